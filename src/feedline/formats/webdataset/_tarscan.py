"""Reading tar archives member by member, and grouping members into WebDataset samples.

A tar archive is a sequence of 512-byte headers, each followed by its data padded to a
multiple of 512 bytes, and ends with zero blocks (or simply with the end of the file).
:func:`members` reads them with plain ``read`` calls (no :mod:`tarfile`), validating each
header before it is used (checksum, strict octal or base-256 numbers, sizes that are
never negative and never run past the end of the file, pax records whose lengths fit,
long names and pax headers of at most :data:`MAX_META` bytes), and knows POSIX ``ustar``
prefixes, GNU long names (``L``) and pax ``path``/``size`` records. Only regular files
are returned. The scan only moves forward and reads no more than the file holds (where
its size is unknown, a gzip stream, in bounded pieces), so a hostile header can neither
loop it nor make it allocate; damage is reported with its byte offset and the scan can
resume right after the bad header.

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

import gzip
import io
import os
import re
import stat
from collections.abc import Generator, Iterator
from typing import IO, Any

from feedline._internal.on_error import report
from feedline._internal.reading import read_full
from feedline.exceptions import CorruptRecordError, FeedlineError

__all__ = ["split_name", "Member", "members", "samples", "BLOCK", "SampleScan",
           "OffsetView", "stream_size", "MAX_META"]

BLOCK = 512
_NAME = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")
_META = re.compile(r"__[^/]*__($|/)")
_REGULAR = (b"0", b"\x00", b"7")
_OCTAL = re.compile(rb"[0-7]+")
#: entries whose data the scanner reads into memory besides regular files
_META_KINDS = {b"L": "long name", b"K": "long link name", b"x": "pax header",
               b"g": "global pax header"}
#: the largest long name or pax header accepted, in bytes
MAX_META = 1 << 20
_PIECE = 1 << 20  # read size where the file size is not known


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


class _Bad(Exception):
    """A header field that does not hold what the tar format allows."""


def _octal_text(field: bytes) -> bytes:
    """The digits of an octal header field: leading NULs and spaces dropped, then cut
    at the first NUL (as :mod:`tarfile` reads them), trailing spaces dropped."""
    return field.lstrip(b"\x00 ").split(b"\x00", 1)[0].strip()


def _checksum_ok(h: bytes) -> bool:
    field = _octal_text(h[148:156])
    if not field or not _OCTAL.fullmatch(field):
        return False
    unsigned = sum(h) - sum(h[148:156]) + 256
    return int(field, 8) == unsigned


def _number(field: bytes, what: str) -> int:
    """A header number: octal digits (NUL/space padded) or GNU base-256 (first byte
    ``0x80``; ``0xff``, a negative number, is refused)."""
    if field[0] == 0x80:
        return int.from_bytes(field[1:], "big")
    if field[0] & 0x80:
        raise _Bad(f"negative {what} in tar header (base-256 {field.hex()})")
    text = _octal_text(field)
    if not text:
        return 0
    if not _OCTAL.fullmatch(text):
        raise _Bad(f"bad {what} field in tar header: {bytes(field)!r}")
    return int(text, 8)


def _text(field: bytes) -> str:
    return field.split(b"\x00", 1)[0].decode("utf-8", "surrogateescape")


def _pax(data: bytes) -> dict[str, str]:
    """The records ``"<length> <key>=<value>\\n"`` of a pax header; each length must
    cover its record exactly and lie inside ``data`` (so the walk always advances)."""
    out, pos = {}, 0
    while pos < len(data):
        if data[pos:].strip(b"\x00") == b"":
            break  # NUL padding after the last record
        sp = data.find(b" ", pos, pos + 21)
        digits = data[pos:sp] if sp > pos else b""
        if not digits.isdigit():
            raise _Bad(f"bad pax header: record at {pos} has no length")
        length = int(digits)
        if length <= sp - pos + 2 or pos + length > len(data) or data[pos + length - 1] != 0x0A:
            raise _Bad(f"bad pax header: record length {length} at {pos} does not fit")
        key, eq, value = data[sp + 1 : pos + length - 1].partition(b"=")
        if not eq or not key or min(key) <= 0x20 or 0x7F in key:
            raise _Bad(f"bad pax header: record at {pos} is not keyword=value")
        try:
            out[key.decode("utf-8")] = value.decode("utf-8", "surrogateescape")
        except UnicodeDecodeError as exc:
            raise _Bad(f"bad pax header: key at {pos} is not UTF-8") from exc
        pos += length
    size = out.get("size")
    if size is not None and not (size.isascii() and size.isdigit() and len(size) <= 20):
        raise _Bad(f"bad pax header: size {size[:40]!r} is not a non-negative decimal number")
    return out


class _Damage(Exception):
    """Damage found by :func:`members`: ``offset`` is reported, ``resume`` is where the
    scan may look for the next valid header (``None``: nowhere, the data is gone)."""

    def __init__(self, message: str, offset: int, name: str | None = None,
                 resume: int | None = None, rest: bytes | None = None) -> None:
        super().__init__(message)
        self.message, self.offset, self.name, self.resume = message, offset, name, resume
        self.rest = rest  # the stream's remaining bytes, from ``resume`` on, when read


class OffsetView(io.RawIOBase):
    """A read-only file over ``data``, bytes that start at offset ``base`` of a larger
    file: seeks and positions use that file's offsets (``size`` is where ``data``
    ends)."""

    def __init__(self, data: bytes, base: int) -> None:
        self._b = io.BytesIO(data)
        self._base = base
        self.size = base + len(data)

    def read(self, n: int = -1) -> bytes:
        return self._b.read(n)

    def tell(self) -> int:
        return self._b.tell() + self._base

    def seek(self, pos: int, whence: int = 0) -> int:
        if whence == 0:
            return self._b.seek(max(pos - self._base, 0)) + self._base
        return self._b.seek(pos, whence) + self._base

    def readable(self) -> bool:
        return True


def stream_size(f: Any) -> int | None:
    """The byte size of the file ``f`` reads, where it is known without reading it: an
    integer ``size`` attribute (fsspec files, index views), a regular file's ``fstat``,
    an in-memory buffer; ``None`` for streams (a gzip-compressed shard)."""
    size = getattr(f, "size", None)
    if isinstance(size, int) and not isinstance(size, bool):
        return size
    if isinstance(f, io.BytesIO):
        return f.getbuffer().nbytes
    if isinstance(f, (io.BufferedReader, io.FileIO)):
        try:
            st = os.fstat(f.fileno())
        except (OSError, ValueError):
            return None
        return st.st_size if stat.S_ISREG(st.st_mode) else None
    return None


def _read_data(f: IO[bytes], size: int, known: bool) -> bytes:
    """``size`` bytes of member data; fewer at the end of the data. Where the file size
    is not known, read in bounded pieces, so a huge declared size costs no more memory
    than the bytes really there."""
    if known:
        return read_full(f, size)
    pieces, got = [], 0
    while got < size:
        want = min(size - got, _PIECE)
        piece = read_full(f, want)
        pieces.append(piece)
        got += len(piece)
        if len(piece) < want:
            break
    return b"".join(pieces)


def members(f: IO[bytes], start: int = 0, end: int | None = None,
            head: bytes | None = None) -> Iterator[Member | _Damage]:
    """Yield the regular-file members of the archive read from ``f`` (positioned at
    byte ``start``), up to byte ``end``; damage is yielded as a ``_Damage`` marker (the
    caller decides what to do, then resynchronises at ``resume``). ``head``: the header
    block at ``start`` when the caller has read it already.

    Every header is validated before it is used: the checksum, each number field
    (octal digits, or positive GNU base-256), sizes (never negative, never past the end
    of the file or of ``end``; long names and pax records at most :data:`MAX_META`
    bytes), pax records (lengths that fit). So the scan always moves forward, never
    reads more than the file holds and never loops; a damaged header is reported with
    its offset and scanning may resume right after it.
    """
    limit = stream_size(f)
    if end is not None:
        limit = end if limit is None else min(limit, end)
    known = limit is not None
    pos = start
    long_name: str | None = None
    pax: dict[str, str] = {}
    first = None  # offset of the first header of the member being assembled
    while limit is None or pos < limit:
        h, head = (read_full(f, BLOCK) if head is None else head), None
        if len(h) < BLOCK:
            if h.strip(b"\x00"):
                yield _Damage("truncated tar header", pos)
            return
        if h.count(0) == BLOCK:
            return  # end-of-archive marker
        after = pos + BLOCK  # the scan position right after this header
        name = None
        try:
            name = _text(h[:100]) or None
            if not _checksum_ok(h):
                raise _Bad("tar header checksum mismatch")
            kind = h[156:157]
            size = _number(h[124:136], "size")
            if "size" in pax:
                size = int(pax["size"])
            if kind in _REGULAR:
                name = pax.get("path") or long_name
                if name is None:
                    name = _text(h[:100])
                    if h[257:263] == b"ustar\x00":  # POSIX ustar: a name prefix
                        prefix = _text(h[345:500])
                        if prefix:
                            name = prefix + "/" + name
            elif kind in _META_KINDS and size > MAX_META:
                raise _Bad(f"tar {_META_KINDS[kind]} of {size} bytes is over the limit of "
                           f"{MAX_META} bytes")
        except _Bad as bad:
            yield _Damage(str(bad), pos, name, resume=after)
            pos = after
            long_name, pax, first = None, {}, None
            continue
        if first is None:
            first = pos
        padded = size + (-size % BLOCK)
        if limit is not None and size > limit - after:
            left = max(limit - after, 0)
            yield _Damage(f"truncated tar member: {left} of {size} data bytes", first, name,
                          resume=after)
            pos = after
            long_name, pax, first = None, {}, None
            continue
        nxt = after + padded
        if kind in _REGULAR or kind in _META_KINDS:
            data = _read_data(f, size, known)
            if len(data) < size:  # a stream that ends early, or a size that is damage
                yield _Damage(f"truncated tar member: {len(data)} of {size} data bytes", first,
                              name, resume=after, rest=data)
                return
            if padded > size:
                read_full(f, padded - size)
        else:
            data = b""
            if padded:
                f.seek(nxt)
        pos = nxt
        if kind in (b"L", b"K"):
            if kind == b"L":
                long_name = _text(data)
            continue
        if kind == b"x":
            try:
                pax = _pax(data)
            except _Bad as bad:
                yield _Damage(str(bad), first, resume=pos)
                long_name, pax, first = None, {}, None
            continue
        if kind == b"g":
            first = None
            continue
        if name is not None:
            yield Member(name, data, first, pos)
        long_name, pax, first = None, {}, None


def _resync(f: IO[bytes], pos: int, end: int | None) -> tuple[int, bytes | None]:
    """Offset of the first block at or after ``pos`` holding a valid header, and that
    block (already read: the scan only moves forward); ``(end of data, None)`` when
    there is none. ``pos`` is the file's position."""
    f.seek(pos)
    while end is None or pos < end:
        h = read_full(f, BLOCK)
        if len(h) < BLOCK:
            return pos + len(h), None
        if h.count(0) != BLOCK and _checksum_ok(h):
            return pos, h
        pos += BLOCK
    return pos, None


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
    the next sample's first header, and ``scan.start``/``scan.end`` the byte range of
    the sample yielded (its first header to the end of its last member's data).

    Damage (a header that fails validation, truncation, a repeated extension, data the
    decompressor refuses) raises :class:`~feedline.exceptions.CorruptRecordError`
    naming ``url``, the sample index and the byte offset under ``on_error="raise"``;
    otherwise the sample being assembled (and any member of the same key found after
    resynchronising) is left out and counted in ``scan.skipped``, and the scan goes on
    at the next valid header after the damage.
    """
    current: dict[str, Any] | None = None
    start = end_of = scan.offset
    drop_key: str | None = None
    pos = scan.offset
    head: bytes | None = None
    while True:
        resume: int | None = None
        rest: bytes | None = None
        gen = _guarded(members(f, pos, end, head), pos)
        for m in gen:
            if isinstance(m, Member) and current is not None:
                parts = split_name(m.name)
                if parts is not None and parts[0] == current["__key__"] and (
                        parts[1].lower() in current):
                    m = _Damage(f"duplicate file name {m.name!r} in sample {parts[0]!r}",
                                m.offset, m.name, resume=m.end)
            if isinstance(m, _Damage):
                parsed = split_name(m.name) if m.name else None
                if current is not None and parsed is not None and parsed[0] != current["__key__"]:
                    scan.offset, scan.start, scan.end = m.offset, start, end_of
                    scan.index += 1
                    yield current
                    current = None
                err = CorruptRecordError(m.message, path=url, index=scan.index, offset=m.offset)
                report(err, on_error, cause=m.__cause__, stacklevel=3)
                scan.skipped += 1
                scan.index += 1
                drop_key = parsed[0] if parsed is not None else (
                    current["__key__"] if current is not None else None)
                current = None
                resume = -1 if m.resume is None else m.resume
                rest = m.rest
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
            current[ext] = m.data
            end_of = m.end
        gen.close()
        if resume is None or resume < 0:
            current = None if resume is not None else current
            break
        if rest is not None:  # a stream read to its end: go on in the bytes at hand
            f = OffsetView(rest, resume)  # type: ignore[assignment]
        pos, head = _resync(f, resume, end)
        if head is None:
            break
        scan.offset = pos
    if current is not None:
        scan.offset, scan.start, scan.end = -1, start, end_of  # the shard is done
        scan.index += 1
        yield current
    scan.offset = -1


def _guarded(found: Iterator[Member | _Damage], pos: int) -> Generator[Member | _Damage]:
    """The error boundary of the scan: an exception other than feedline's own or the
    file system's (a gzip stream the decompressor refuses, anything a damaged header
    could still provoke) ends the scan as a :class:`_Damage` at the last good offset,
    its cause kept."""
    try:
        for m in found:
            if isinstance(m, Member):
                pos = m.end
            yield m
    except FeedlineError:
        raise
    except Exception as exc:  # noqa: BLE001 - the boundary: turned into a named error
        if isinstance(exc, OSError) and not isinstance(exc, gzip.BadGzipFile):
            raise  # the file system's own trouble (a missing file, EIO) is not damage
        damage = _Damage(f"unreadable tar data ({type(exc).__name__}: {exc})", pos)
        damage.__cause__ = exc
        yield damage
