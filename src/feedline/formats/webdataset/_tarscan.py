"""Reading tar archives member by member, and grouping members into WebDataset samples.

A tar archive is a sequence of 512-byte headers, each followed by its data padded to a
multiple of 512 bytes, and ends with zero blocks (or simply with the end of the file).
:func:`members` reads them with plain ``read`` calls (no :mod:`tarfile`), checking each
header's checksum, and knows POSIX ``ustar`` prefixes, GNU long names (``L``) and pax
``path``/``size`` records. Only regular files are returned.

:func:`samples` groups members into samples exactly as the webdataset package does: a
member name splits at the first dot of its last path component into the *key*
(directory plus basename before the dot) and the *extension* (the rest, lower-cased);
names without such a dot are ignored, as are top-level ``__*__`` names; consecutive
members with the same key form one sample ``{"__key__": key, "__url__": url, ext:
bytes, ...}``; a repeated extension inside one sample is an error.

>>> split_name("images/000123.seg.PNG")
('images/000123', 'seg.PNG')
>>> split_name("README") is None
True
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import IO, Any

from feedline._internal.on_error import report
from feedline._internal.reading import read_full
from feedline.exceptions import CorruptRecordError, DataError

__all__ = ["split_name", "Member", "members", "samples", "BLOCK"]

BLOCK = 512
_NAME = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")
_META = re.compile(r"__[^/]*__($|/)")
_REGULAR = (b"0", b"\x00", b"7")


def split_name(name: str) -> tuple[str, str] | None:
    """``(key, extension)`` of a member name, or ``None`` when it has no extension."""
    m = _NAME.match(name)
    return None if m is None else (m.group(1), m.group(2))


class Member:
    """One regular file of the archive: ``name``, ``data``, ``offset`` (the byte offset
    of its first header, long-name and pax headers included) and ``end`` (the offset
    after its padded data)."""

    __slots__ = ("name", "data", "offset", "end")

    def __init__(self, name: str, data: bytes, offset: int, end: int) -> None:
        self.name, self.data, self.offset, self.end = name, data, offset, end


def _checksum_ok(h: bytes) -> bool:
    try:
        stored = int(h[148:156].replace(b"\x00", b" ").strip() or b"-1", 8)
    except ValueError:
        return False
    unsigned = sum(h) - sum(h[148:156]) + 256
    return stored == unsigned


def _number(field: bytes) -> int:
    if field[0] & 0x80:  # GNU base-256
        return int.from_bytes(field[1:], "big")
    text = field.replace(b"\x00", b" ").strip()
    return int(text, 8) if text else 0


def _text(field: bytes) -> str:
    return field.split(b"\x00", 1)[0].decode("utf-8", "surrogateescape")


def _pax(data: bytes) -> dict[str, str]:
    out, pos = {}, 0
    while pos < len(data):
        sp = data.index(b" ", pos)
        length = int(data[pos:sp])
        key, _, value = data[sp + 1 : pos + length - 1].partition(b"=")
        out[key.decode("utf-8")] = value.decode("utf-8", "surrogateescape")
        pos += length
    return out


class _Damage(Exception):
    def __init__(self, message: str, offset: int, name: str | None = None,
                 fatal: bool = False) -> None:
        super().__init__(message)
        self.message, self.offset, self.name, self.fatal = message, offset, name, fatal


def members(f: IO[bytes], start: int = 0, end: int | None = None) -> Iterator[Member | _Damage]:
    """Yield the regular-file members of the archive read from ``f`` (positioned at
    byte ``start``), up to byte ``end``; damage is yielded as a ``_Damage`` marker (the
    caller decides), after which scanning resumes at the next block holding a valid
    header."""
    pos = start
    long_name: str | None = None
    pax: dict[str, str] = {}
    first = None  # offset of the first header of the member being assembled
    while end is None or pos < end:
        h = read_full(f, BLOCK)
        if len(h) < BLOCK:
            if h.strip(b"\x00"):
                yield _Damage("truncated tar header", pos, fatal=True)
            return
        if h.count(0) == BLOCK:
            return  # end-of-archive marker
        if not _checksum_ok(h):
            name = None
            try:
                name = _text(h[:100]) or None
            except Exception:  # noqa: BLE001 - a damaged name is no name
                pass
            yield _Damage("tar header checksum mismatch", pos, name)
            pos += BLOCK
            long_name, pax, first = None, {}, None
            continue
        if first is None:
            first = pos
        kind = h[156:157]
        try:
            size = _number(h[124:136])
        except ValueError:
            yield _Damage("bad size field in tar header", pos)
            pos += BLOCK
            long_name, pax, first = None, {}, None
            continue
        if "size" in pax:
            size = int(pax["size"])
        padded = size + (-size % BLOCK)
        name = None
        if kind in _REGULAR:
            name = pax.get("path") or long_name
            if name is None:
                name = _text(h[:100])
                if h[257:263] == b"ustar\x00":  # POSIX ustar: a name prefix
                    prefix = _text(h[345:500])
                    if prefix:
                        name = prefix + "/" + name
        if kind in _REGULAR or kind in (b"L", b"x"):
            data = read_full(f, size)
            if len(data) < size:
                yield _Damage(f"truncated tar member: {len(data)} of {size} data bytes", first,
                              name, fatal=True)
                return
            if padded > size:
                f.read(padded - size)
        else:
            data = b""
            if padded:
                f.seek(padded, 1)
        pos += BLOCK + padded
        if kind == b"L":
            long_name = _text(data)
            continue
        if kind == b"x":
            try:
                pax = _pax(data)
            except (ValueError, UnicodeDecodeError):
                yield _Damage("bad pax header", first)
                long_name, pax, first = None, {}, None
            continue
        if kind == b"g":
            first = None
            continue
        if name is not None:
            yield Member(name, data, first, pos)
        long_name, pax, first = None, {}, None


def _resync(f: IO[bytes], pos: int, end: int | None) -> int:
    """Offset of the first block at or after ``pos`` holding a valid header (or the end)."""
    f.seek(pos)
    while end is None or pos < end:
        h = read_full(f, BLOCK)
        if len(h) < BLOCK:
            return pos + len(h)
        if h.count(0) != BLOCK and _checksum_ok(h):
            break
        pos += BLOCK
    f.seek(pos)
    return pos


class SampleScan:
    """Counters and position of a :func:`samples` scan: ``index`` (samples produced or
    skipped so far), ``skipped`` (damaged stretches left out), ``offset`` (where the
    next sample starts)."""

    __slots__ = ("index", "skipped", "offset", "start", "end")

    def __init__(self, index: int = 0, skipped: int = 0, offset: int = 0) -> None:
        self.index, self.skipped, self.offset = index, skipped, offset
        self.start = self.end = offset  # the byte range of the sample last yielded


def samples(f: IO[bytes], url: str, scan: SampleScan, *, on_error: str = "raise",
            end: int | None = None) -> Iterator[dict[str, Any]]:
    """Group the members read from ``f`` (positioned at ``scan.offset``) into samples;
    see the module docstring. After each yielded sample ``scan.offset`` is the offset of
    the next sample's first header.

    Damage (bad header checksum, truncation) raises
    :class:`~feedline.exceptions.CorruptRecordError` naming ``url``, the sample index and
    the byte offset under ``on_error="raise"``; otherwise the sample being assembled
    (and any member of the same key found after resynchronising) is left out and
    counted in ``scan.skipped``.
    """
    current: dict[str, Any] | None = None
    start = end_of = scan.offset
    drop_key: str | None = None
    pos = scan.offset
    while True:
        restart = None
        for m in members(f, pos, end):
            if isinstance(m, _Damage):
                parsed = split_name(m.name) if m.name else None
                if current is not None and parsed is not None and parsed[0] != current["__key__"]:
                    scan.offset, scan.start, scan.end = m.offset, start, end_of
                    scan.index += 1
                    yield current
                    current = None
                err = CorruptRecordError(m.message, path=url, index=scan.index, offset=m.offset)
                report(err, on_error, stacklevel=3)
                scan.skipped += 1
                scan.index += 1
                drop_key = parsed[0] if parsed is not None else (
                    current["__key__"] if current is not None else None)
                current = None
                restart = -1 if m.fatal else m.offset + BLOCK
                break
            name = m.name
            if "/" not in name and name.startswith("__") and name.endswith("__"):
                continue
            if _META.match(name):
                continue
            parts = split_name(name)
            if parts is None:
                continue
            key, ext = parts
            ext = ext.lower()
            if drop_key is not None:
                if key == drop_key:
                    continue
                drop_key = None
            if current is None or key != current["__key__"]:
                if current is not None:
                    scan.offset, scan.start, scan.end = m.offset, start, end_of
                    scan.index += 1
                    yield current
                current = {"__key__": key, "__url__": url}
                start = m.offset
            if ext in current:
                raise DataError(f"duplicate file name {name!r} in sample {key!r}",
                                path=url, index=scan.index, offset=m.offset)
            current[ext] = m.data
            end_of = m.end
        if restart is None or restart < 0:
            current = None if restart is not None else current
            break
        pos = _resync(f, restart, end)
        scan.offset = pos
    if current is not None:
        scan.offset, scan.start, scan.end = -1, start, end_of  # the shard is done
        scan.index += 1
        yield current
    scan.offset = -1
