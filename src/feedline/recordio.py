"""MXNet RecordIO: read and write ``.rec`` files byte-identical to MXNet 1.9.1.

Format
------
A file is a sequence of records. Each record is one or more *parts*; a part is::

    uint32 magic   = 0xced7230a                     (little-endian, at a 4-aligned offset)
    uint32 lrecord = (cflag << 29) | length         (length < 2**29)
    length bytes of data, then zero bytes up to the next multiple of 4

A payload that contains the magic word at a 4-byte aligned position (relative to the
payload start) cannot be stored in one part, or a reader that resynchronises on the
magic word would stop inside it. The writer therefore cuts the payload at every such
word and drops the word: the first part has ``cflag`` 1, middle parts 2, the last part
3; a payload without the word is one part with ``cflag`` 0. Readers join the parts
with the magic word between them. Only the last part is padded (the others have
lengths that are multiples of 4 by construction). This is exactly what MXNet's
``MXRecordIO`` (dmlc-core ``RecordIOWriter``) writes, so files are interchangeable.

``.idx`` files, written by ``MXIndexedRecordIO`` and ``im2rec``, hold one line per
record: ``key<TAB>byte offset<LF>``.

Image records (``mxnet.recordio.pack``) start with a 24-byte ``IRHeader``
(``<IfQQ``: flag, label, id, id2); when ``flag > 0`` the header's label field is 0 and
``flag`` float32 labels follow the header.

Reading
-------
>>> import os, tempfile
>>> from feedline import recordio
>>> path = os.path.join(tempfile.mkdtemp(), "a.rec")
>>> with recordio.RecordIOWriter(path) as w:
...     for payload in [b"first", b"", recordio.MAGIC.to_bytes(4, "little") * 2]:
...         _ = w.write(payload)
>>> [len(p) for p in recordio.read(path)]
[5, 0, 8]
>>> it = recordio.read(path); _ = next(it); state = it.get_state(); state
{'type': 'recordio', 'offset': 16, 'index': 1, 'skipped': 0}
>>> it2 = recordio.read(path); it2.set_state(state); [len(p) for p in it2]
[0, 8]

Damaged data raises :class:`~feedline.exceptions.CorruptRecordError` naming the path,
the record index and the byte offset; with ``on_error="skip"`` (or ``"warn"``, which
also issues a ``RuntimeWarning``) the reader resynchronises on the next magic word at a
4-byte aligned offset whose ``cflag`` is 0 or 1 — where MXNet's InputSplit would — and
counts the damaged stretches in ``skipped`` and their bytes in ``skipped_bytes``.
"""

from __future__ import annotations

import bisect
import io
import numbers
import os
import struct
import threading
import uuid
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from feedline._closing import Closeable
from feedline._compression import local_path
from feedline._on_error import check_on_error, report
from feedline._optional import require
from feedline._validate import one_of
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.exceptions import CorruptRecordError, DecodeError
from feedline.io.fs import file_size, open_file

__all__ = [
    "MAGIC",
    "encode",
    "RecordIOWriter",
    "RecordIOReader",
    "read",
    "IndexedRecordIO",
    "read_index",
    "build_index",
    "default_idx_path",
    "IRHeader",
    "pack",
    "unpack",
    "pack_img",
    "unpack_img",
]

MAGIC = 0xCED7230A
"""The magic word that starts every RecordIO part (stored little-endian)."""

_MAGIC_BYTES = struct.pack("<I", MAGIC)
_HEADER = struct.Struct("<II")
_LENGTH_MASK = (1 << 29) - 1
_MAX_PAYLOAD = (1 << 29) - 1
_CHUNK = 1 << 20
_LARGE = 1 << 16  # payloads this long that straddle the buffer are read directly


# --------------------------------------------------------------------------- writing


def encode(payload: bytes | bytearray | memoryview) -> bytes:
    """Return the RecordIO bytes MXNet writes for one ``payload`` (all parts, padded).

    >>> encode(b"abc").hex()
    '0a23d7ce0300000061626300'
    >>> encode(MAGIC.to_bytes(4, "little")).hex()  # start part (cflag 1), empty end part
    '0a23d7ce000000200a23d7ce00000060'
    """
    data = bytes(payload)
    size = len(data)
    if size > _MAX_PAYLOAD:
        raise ValueError(f"a RecordIO record holds at most {_MAX_PAYLOAD} bytes, got {size}")
    pad = b"\0" * (-size & 3)
    hit = data.find(_MAGIC_BYTES)
    if hit < 0:
        return _HEADER.pack(MAGIC, size) + data + pad
    out = []
    begin = 0
    while hit >= 0:
        if hit & 3 == 0:  # aligned relative to the payload start, hence in the file
            cflag = 1 if begin == 0 else 2
            out.append(_HEADER.pack(MAGIC, (cflag << 29) | (hit - begin)))
            out.append(data[begin:hit])
            begin = hit + 4
        hit = data.find(_MAGIC_BYTES, hit + 1)
    cflag = 3 if begin else 0
    out.append(_HEADER.pack(MAGIC, (cflag << 29) | (size - begin)))
    out.append(data[begin:])
    out.append(pad)
    return b"".join(out)


class RecordIOWriter:
    """Write payloads to a new RecordIO file (truncating it), as ``MXRecordIO(path, "w")``.

    ``write`` returns the byte offset at which the record starts (what ``tell()`` said
    before the call); use it as a context manager or call ``close()``.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "w.rec")
    >>> with RecordIOWriter(path) as w:
    ...     w.write(b"hello"), w.write(b"x"), w.tell()
    (0, 16, 28)
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        self._f = open(self.path, "wb")  # noqa: SIM115 - closed by close()
        self._pos = 0

    def write(self, payload: bytes | bytearray | memoryview) -> int:
        """Append one record; return the offset of its first byte."""
        if self._f is None:
            raise ValueError(f"{self.path}: write to a closed RecordIOWriter")
        framed = encode(payload)
        start = self._pos
        self._f.write(framed)
        self._pos += len(framed)
        return start

    def tell(self) -> int:
        """Offset at which the next record will start."""
        return self._pos

    def flush(self) -> None:
        if self._f is not None:
            self._f.flush()

    def close(self) -> None:
        """Flush and close; idempotent."""
        if self._f is not None:
            self._f.close()
            self._f = None

    def __enter__(self) -> RecordIOWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# --------------------------------------------------------------------------- reading


class _Window:
    """Buffered reads of the byte range ``[start, end)`` of one or more files laid end to
    end (global offsets). ``buf[pos:]`` holds bytes from global offset ``base + pos``.

    Never reads past ``end`` or past a file's recorded size, so a corrupt length cannot
    make it allocate more than the data that exists. Files are local paths or URLs
    (opened with :func:`feedline.io.fs.open_file` and ``storage_options``).
    """

    __slots__ = (
        "paths", "sizes", "starts", "end", "buf", "pos", "base", "storage_options", "_fi", "_f"
    )

    def __init__(
        self,
        files: list[tuple[str, int]],
        start: int = 0,
        end: int | None = None,
        *,
        storage_options: dict | None = None,
    ) -> None:
        self.storage_options = storage_options
        self.paths = [p for p, _ in files]
        self.sizes = [s for _, s in files]
        self.starts = []
        total = 0
        for s in self.sizes:
            self.starts.append(total)
            total += s
        self.end = total if end is None else min(end, total)
        self.buf = b""
        self.pos = 0
        self.base = start
        self._fi = -1
        self._f = None

    @property
    def offset(self) -> int:
        return self.base + self.pos

    def locate(self, offset: int) -> tuple[str, int]:
        """(path, offset inside that file) of a global offset."""
        i = max(bisect.bisect_right(self.starts, offset) - 1, 0)
        while i + 1 < len(self.starts) and self.sizes[i] == 0:
            i += 1
        return self.paths[i], offset - self.starts[i]

    def seek(self, offset: int) -> None:
        self.buf = b""
        self.pos = 0
        self.base = offset

    def _read_more(self, n: int) -> bytes:
        at = self.base + len(self.buf)
        n = min(n, self.end - at)
        pieces = []
        while n > 0:
            i = bisect.bisect_right(self.starts, at) - 1
            if i != self._fi:
                if self._f is not None:
                    self._f.close()
                self._f = open_file(self.paths[i], "rb", storage_options=self.storage_options)
                self._fi = i
            local = at - self.starts[i]
            self._f.seek(local)
            want = min(n, self.sizes[i] - local)
            data = _read_fully(self._f, want)
            if not data:
                break  # the file shrank since we measured it: treat as its end
            pieces.append(data)
            at += len(data)
            n -= len(data)
            if len(data) < want:
                break
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def need(self, n: int) -> int:
        """Make at least ``n`` bytes available from ``pos`` if the data has them; return
        how many are available (fewer only at the end of the range)."""
        have = len(self.buf) - self.pos
        if have >= n:
            return have
        more = self._read_more(max(n - have, _CHUNK))
        self.buf = self.buf[self.pos :] + more
        self.base += self.pos
        self.pos = 0
        return len(self.buf)

    def take(self, length: int) -> bytes | None:
        """Return the payload of the one-part record whose header is at ``pos`` and whose
        ``length`` bytes are not all buffered, reading the rest straight from the file
        (one copy less than buffering it); leave ``pos`` after the record. Return
        ``None`` if the data ends first (the bytes read stay buffered for the caller)."""
        buf, pos = self.buf, self.pos
        head = buf[pos + 8 :]
        want = length - len(head)
        tail = self._read_more(want)
        if len(tail) < want:
            self.buf = buf[pos:] + tail
            self.base += pos
            self.pos = 0
            return None
        self.base += len(buf) + len(tail)
        self.buf = b""
        self.pos = 0
        pad = -length & 3
        if pad:
            self.pos = min(pad, self.need(pad))
        return head + tail if head else tail

    def resync(self, offset: int) -> bool:
        """Move to the first 4-aligned offset >= ``offset`` holding the magic word followed
        by an lrecord whose cflag is 0 or 1; return False (positioned at the end) if none."""
        offset = (offset + 3) & ~3
        if not (self.base <= offset <= self.base + len(self.buf)):
            self.seek(offset)
        self.pos = offset - self.base
        while True:
            buf, start = self.buf, self.pos
            hit = buf.find(_MAGIC_BYTES, start)
            while hit >= 0:
                if (self.base + hit) & 3 == 0:
                    if hit + 8 > len(buf):
                        break  # need the lrecord word: refill from the hit
                    if (_HEADER.unpack_from(buf, hit)[1] >> 29) <= 1:
                        self.pos = hit
                        return True
                hit = buf.find(_MAGIC_BYTES, hit + 1)
            if hit >= 0:
                self.pos = hit
            else:  # keep the last 3 bytes: the word may straddle the refill
                self.pos = max(start, len(buf) - 3)
            have = len(self.buf) - self.pos
            if self.need(have + _CHUNK) <= have:
                self.pos = len(self.buf)
                return False

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None
            self._fi = -1


def _read_fully(f: Any, n: int) -> bytes:
    data = f.read(n)
    if data is None or len(data) == n or not data:
        return data or b""
    pieces = [data]
    got = len(data)
    while got < n:
        more = f.read(n - got)
        if not more:
            break
        pieces.append(more)
        got += len(more)
    return b"".join(pieces)


class _Scan:
    """Counters shared between a reader and its record generator."""

    __slots__ = ("skipped", "skipped_bytes")

    def __init__(self) -> None:
        self.skipped = 0
        self.skipped_bytes = 0


def _records(
    win: _Window, on_error: str, index: int, scan: _Scan
) -> Iterator[tuple[bytes, int]]:
    """Yield ``(payload, start offset)`` for each record from ``win``'s position to its end;
    while suspended after a yield, ``win.offset`` is the offset just after that record."""
    unpack = _HEADER.unpack_from
    magic_word = MAGIC
    mask = _LENGTH_MASK
    while True:
        buf, pos = win.buf, win.pos
        if len(buf) - pos < 8:
            avail = win.need(8)
            if avail == 0:
                return
            buf, pos = win.buf, win.pos
            if avail < 8:
                problem = f"truncated record header: {avail} of 8 bytes before the end of the data"
                yield from _fail(win, problem, index, on_error, scan)
                continue
        magic, lrec = unpack(buf, pos)
        if magic != magic_word:
            problem = f"bad magic word 0x{magic:08x} (expected 0x{magic_word:08x})"
            yield from _fail(win, problem, index, on_error, scan)
            continue
        cflag = lrec >> 29
        length = lrec & mask
        if cflag == 0:
            total = 8 + ((length + 3) & ~3)
            if len(buf) - pos < total:
                if length >= _LARGE and len(buf) - pos < 8 + length:
                    start = win.base + pos
                    payload = win.take(length)
                    if payload is not None:
                        index += 1
                        yield payload, start
                        continue
                avail = win.need(total)
                buf, pos = win.buf, win.pos
                if avail < 8 + length:
                    problem = (
                        f"truncated record: needs {length} payload bytes, "
                        f"the data has {avail - 8}"
                    )
                    yield from _fail(win, problem, index, on_error, scan)
                    continue
                total = min(total, avail)  # missing zero padding at the very end is fine
            payload = buf[pos + 8 : pos + 8 + length]
            win.pos = pos + total
            index += 1
            yield payload, win.base + pos
            continue
        if cflag != 1:
            what = "a continuation part" if cflag in (2, 3) else "an invalid part"
            problem = f"record starts with {what} (cflag {cflag})"
            yield from _fail(win, problem, index, on_error, scan)
            continue
        start = win.offset
        payload, problem = _join_parts(win)
        if problem is not None:
            yield from _fail(win, problem, index, on_error, scan)
            continue
        index += 1
        yield payload, start


def _join_parts(win: _Window) -> tuple[bytes, str | None]:
    """Read a multi-part record whose first part (cflag 1) is at ``win.pos``; on success
    leave ``win.pos`` after it and return the payload, else leave it and say why.

    Offsets are kept relative to the record start (``win.pos``) because ``need`` may
    move the buffer."""
    pieces: list[bytes] = []
    rel = 0
    part = 0
    while True:
        avail = win.need(rel + 8) - rel
        buf, cur = win.buf, win.pos + rel
        if avail < 8:
            return b"", (
                f"truncated multi-part record: part {part} header cut by the end of the data"
            )
        magic, lrec = _HEADER.unpack_from(buf, cur)
        if magic != MAGIC:
            return b"", (
                f"multi-part record broken: part {part} at byte {win.base + cur} has bad "
                f"magic word 0x{magic:08x}"
            )
        cflag, length = lrec >> 29, lrec & _LENGTH_MASK
        if part and cflag not in (2, 3):
            return b"", (
                f"multi-part record interrupted: part {part} at byte {win.base + cur} "
                f"has cflag {cflag}, expected 2 or 3"
            )
        total = 8 + ((length + 3) & ~3)
        avail = win.need(rel + total) - rel
        buf, cur = win.buf, win.pos + rel
        if avail < 8 + length:
            return b"", (
                f"truncated multi-part record: part {part} needs {length} bytes, "
                f"the data has {avail - 8}"
            )
        if part:
            pieces.append(_MAGIC_BYTES)
        pieces.append(buf[cur + 8 : cur + 8 + length])
        rel += min(total, avail)
        part += 1
        if cflag == 3:
            win.pos += rel
            return b"".join(pieces), None


def _fail(
    win: _Window, problem: str, index: int, on_error: str, scan: _Scan
) -> Iterator[tuple[bytes, int]]:
    """Report damage at ``win.offset``; resynchronise past it unless raising. A generator
    (yielding nothing) so that ``yield from`` keeps ``_records`` a plain generator."""
    bad = win.offset
    path, local = win.locate(bad)
    report(CorruptRecordError(problem, path=path, index=index, offset=local), on_error, stacklevel=3)
    win.resync(bad + 4)
    scan.skipped += 1
    scan.skipped_bytes += win.offset - bad
    return
    yield  # pragma: no cover


class RecordIOReader(DatasetIterator[bytes]):
    """Sequential reader of one RecordIO file; also a feedline ``DatasetIterator``.

    Iterating yields each payload (``bytes``); ``read()`` returns the next payload or
    ``None`` at the end, like ``MXRecordIO.read``. ``tell()``/``seek(offset)`` work with
    byte offsets of record starts (as ``.idx`` files store them). ``get_state()`` is
    ``{"type": "recordio", "offset": o, "index": i, "skipped": s}``: the offset and
    index of the next record and how many damaged stretches were skipped so far.

    ``on_error``: ``"raise"`` (default) raises :class:`CorruptRecordError`; ``"skip"``
    and ``"warn"`` resynchronise on the next magic word and go on.

    ``path`` may be an fsspec URL (``s3://``, ``gs://``, ``memory://``, ``file://``);
    ``storage_options`` are passed to fsspec (construction arguments, not state). The
    file is opened (and measured) on the first read, not by the constructor.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "r.rec")
    >>> with RecordIOWriter(path) as w:
    ...     offsets = [w.write(p) for p in (b"a", b"bb", b"ccc")]
    >>> with RecordIOReader(path) as r:
    ...     r.seek(offsets[1]); r.read(), r.read(), r.read()
    (b'bb', b'ccc', None)
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        on_error: str = "raise",
        offset: int = 0,
        storage_options: dict | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.on_error = check_on_error(on_error)
        self.storage_options = storage_options
        self._win: _Window | None = None  # opened on the first read
        self._closed = False
        self._scan = _Scan()
        self._offset = 0
        self._index = 0
        self._gen: Iterator[tuple[bytes, int]] | None = None
        self.seek(offset)

    @property
    def skipped(self) -> int:
        """Damaged stretches skipped so far (``skip``/``warn``)."""
        return self._scan.skipped

    @property
    def skipped_bytes(self) -> int:
        """Bytes jumped over while resynchronising."""
        return self._scan.skipped_bytes

    def seek(self, offset: int, *, index: int | None = None) -> None:
        """Continue reading at byte ``offset`` (a record start, a multiple of 4).
        ``index`` is the record number reported in errors (0 when seeking to 0)."""
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"`offset` must be a non-negative int, got {offset!r}")
        if offset % 4:
            raise ValueError(f"`offset` must be a multiple of 4 (records are aligned), got {offset}")
        if self._closed:
            raise ValueError(f"{self.path}: the reader is closed")
        self._offset = offset
        self._index = index if index is not None else (0 if offset == 0 else self._index)
        if self._win is not None:
            self._win.seek(offset)
        self._gen = None

    def tell(self) -> int:
        """Offset of the next record to be read."""
        return self._offset

    def __next__(self) -> bytes:
        if self._gen is None:
            if self._closed:
                raise StopIteration
            if self._win is None:
                size = file_size(self.path, storage_options=self.storage_options)
                self._win = _Window([(self.path, size)], storage_options=self.storage_options)
                self._win.seek(self._offset)
            self._gen = _records(self._win, self.on_error, self._index, self._scan)
        payload, _ = next(self._gen)
        self._offset = self._win.offset
        self._index += 1
        return payload

    def read(self) -> bytes | None:
        """The next payload, or ``None`` at the end of the file."""
        try:
            return next(self)
        except StopIteration:
            return None

    def get_state(self) -> dict[str, Any]:
        return {
            "type": "recordio",
            "offset": self._offset,
            "index": self._index,
            "skipped": self._scan.skipped,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "recordio", ("offset", "index"))
        self.seek(state["offset"], index=state["index"])
        self._scan.skipped = state.get("skipped", 0)

    def close(self) -> None:
        self._closed = True
        win = getattr(self, "_win", None)
        if win is not None:
            win.close()
            self._win = None
        self._gen = None


def read(
    path: str | os.PathLike, *, on_error: str = "raise", storage_options: dict | None = None
) -> RecordIOReader:
    """Iterate over the payloads of the RecordIO file at ``path`` (a local path or an
    fsspec URL read with ``storage_options``).

    Returns a :class:`RecordIOReader` (a ``DatasetIterator`` with byte-offset state).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "x.rec")
    >>> with RecordIOWriter(path) as w:
    ...     _ = [w.write(b"rec%d" % i) for i in range(3)]
    >>> list(read(path))
    [b'rec0', b'rec1', b'rec2']
    """
    return RecordIOReader(path, on_error=on_error, storage_options=storage_options)


# --------------------------------------------------------------------------- random access


def _read_record_at(fd: int, offset: int, size: int, path: str, index: int | None) -> bytes:
    """Read the whole record starting at ``offset`` with positional reads."""
    pieces = []
    cur = offset
    part = 0
    while True:
        head = os.pread(fd, 8, cur)
        if len(head) < 8:
            raise CorruptRecordError(
                f"truncated record header at byte {cur}: {len(head)} of 8 bytes",
                path=path, index=index, offset=offset,
            )
        magic, lrec = _HEADER.unpack(head)
        if magic != MAGIC:
            raise CorruptRecordError(
                f"bad magic word 0x{magic:08x} at byte {cur} (expected 0x{MAGIC:08x})",
                path=path, index=index, offset=offset,
            )
        cflag, length = lrec >> 29, lrec & _LENGTH_MASK
        expected = (0, 1) if part == 0 else (2, 3)
        if cflag not in expected:
            raise CorruptRecordError(
                f"part {part} at byte {cur} has cflag {cflag}, expected "
                f"{' or '.join(map(str, expected))}",
                path=path, index=index, offset=offset,
            )
        if cur + 8 + length > size:
            raise CorruptRecordError(
                f"truncated record: part {part} needs {length} bytes, the file has "
                f"{max(size - cur - 8, 0)}",
                path=path, index=index, offset=offset,
            )
        data = os.pread(fd, length, cur + 8) if length else b""
        if part:
            pieces.append(_MAGIC_BYTES)
        pieces.append(data)
        if cflag in (0, 3):
            return data if part == 0 else b"".join(pieces)
        cur += 8 + ((length + 3) & ~3)
        part += 1


def read_index(idx_path: str | os.PathLike, *, key_type: type = int) -> list[tuple[Any, int]]:
    """Parse an ``.idx`` file into ``[(key, offset), ...]`` in file order.

    Each line is ``key<TAB>offset``; blank lines are ignored; anything else raises
    :class:`CorruptRecordError` naming the line.

    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "a.idx")
    >>> _ = open(p, "w").write("7\\t0\\n3\\t16\\n")
    >>> read_index(p)
    [(7, 0), (3, 16)]
    """
    idx_path = os.fspath(idx_path)
    entries = []
    with open(idx_path, encoding="utf-8", newline="") as f:
        for lineno, line in enumerate(f, 1):
            text = line.strip()
            if not text:
                continue
            fields = text.split("\t")
            try:
                if len(fields) != 2:
                    raise ValueError(f"expected 2 tab-separated fields, got {len(fields)}")
                key = key_type(fields[0])
                offset = int(fields[1])
                if offset < 0:
                    raise ValueError(f"negative offset {offset}")
            except ValueError as exc:
                raise CorruptRecordError(
                    f"bad index line {text!r}: {exc}", path=idx_path, line=lineno
                ) from exc
            entries.append((key, offset))
    return entries


class IndexedRecordIO(Closeable):
    """A RecordIO file with its ``.idx`` file, as ``MXIndexedRecordIO(idx_path, rec_path,
    mode)``: ``mode="w"`` writes both (``write_idx(key, payload)`` appends the record and
    a ``key<TAB>offset`` line, byte-identical to MXNet); ``mode="r"`` reads by key
    (``read_idx``) or by position (``ir[i]``, ``len(ir)``) with two positional reads per
    record, safe from several threads, and picklable (file handles reopen lazily).

    Both files must be local (paths or ``file://`` URLs): positional reads need a file
    descriptor, and a remote URL raises ``ValueError``. Read remote RecordIO files
    sequentially with :func:`read` (``storage_options=...``).

    ``keys`` lists keys in file order; with duplicate keys ``read_idx`` returns the
    last record written under the key (as MXNet does) and ``ir[i]`` the i-th line's.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> idx, rec = os.path.join(d, "a.idx"), os.path.join(d, "a.rec")
    >>> with IndexedRecordIO(idx, rec, "w") as w:
    ...     for key in (10, 5, 7):
    ...         w.write_idx(key, b"payload %d" % key)
    >>> open(idx).read()
    '10\\t0\\n5\\t20\\n7\\t40\\n'
    >>> r = IndexedRecordIO(idx, rec, "r")
    >>> r.keys, r.read_idx(5), r[0], len(r)
    ([10, 5, 7], b'payload 5', b'payload 10', 3)
    """

    def __init__(
        self,
        idx_path: str | os.PathLike,
        rec_path: str | os.PathLike,
        mode: str = "r",
        *,
        key_type: type = int,
    ) -> None:
        self.idx_path = local_path(idx_path, "IndexedRecordIO", "feedline.recordio.read")
        self.rec_path = local_path(rec_path, "IndexedRecordIO", "feedline.recordio.read")
        self.mode = one_of("mode", mode, ("r", "w"))
        self.key_type = key_type
        self.keys: list[Any] = []
        self._offsets: list[int] = []
        self._index: dict[Any, int] = {}  # key -> position in keys (last wins)
        self._fd: int | None = None
        self._writer: RecordIOWriter | None = None
        self._fidx: Any = None
        self._lock = threading.Lock()
        if mode == "w":
            self._writer = RecordIOWriter(self.rec_path)
            self._fidx = open(self.idx_path, "w", encoding="utf-8", newline="")  # noqa: SIM115
        else:
            for key, offset in read_index(self.idx_path, key_type=key_type):
                self._index[key] = len(self.keys)
                self.keys.append(key)
                self._offsets.append(offset)
            self._size = os.path.getsize(self.rec_path)

    # -- writing
    def write_idx(self, key: Any, payload: bytes | bytearray | memoryview) -> None:
        """Append ``payload`` as a record and ``key<TAB>offset`` to the index."""
        if self._writer is None:
            raise ValueError(f"{self.rec_path}: write_idx needs mode 'w', this is mode {self.mode!r}")
        key = self.key_type(key)
        text = str(key)
        if "\t" in text or "\n" in text or "\r" in text:
            raise ValueError(f"`key` must not contain tabs or newlines, got {text!r}")
        offset = self._writer.write(payload)
        self._fidx.write(f"{text}\t{offset}\n")
        self._index[key] = len(self.keys)
        self.keys.append(key)
        self._offsets.append(offset)

    def tell(self) -> int:
        """Offset the next ``write_idx`` record will start at (mode ``"w"``)."""
        if self._writer is None:
            raise ValueError(f"{self.rec_path}: tell needs mode 'w'")
        return self._writer.tell()

    # -- reading
    def offset(self, key: Any) -> int:
        """Byte offset of the record stored under ``key``."""
        try:
            return self._offsets[self._index[key]]
        except KeyError:
            raise KeyError(f"{self.idx_path}: no record with key {key!r}") from None

    def _read_at(self, position: int) -> bytes:
        if self.mode != "r":
            raise ValueError(f"{self.rec_path}: reading needs mode 'r'")
        fd = self._fd
        if fd is None:
            with self._lock:
                if self._fd is None:
                    self._fd = os.open(self.rec_path, os.O_RDONLY)
                fd = self._fd
        return _read_record_at(fd, self._offsets[position], self._size, self.rec_path, position)

    def read_idx(self, key: Any) -> bytes:
        """The payload stored under ``key`` (``KeyError`` if there is none)."""
        try:
            position = self._index[key]
        except KeyError:
            raise KeyError(f"{self.idx_path}: no record with key {key!r}") from None
        return self._read_at(position)

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, position: int) -> bytes:
        """The payload of the ``position``-th index line (negative counts from the end)."""
        n = len(self.keys)
        if isinstance(position, bool) or not isinstance(position, (int, np.integer)):
            raise TypeError(f"`position` must be an int, got {position!r}")
        position = int(position)
        if position < 0:
            position += n
        if not 0 <= position < n:
            raise IndexError(f"record position {position} out of range for {n} records")
        return self._read_at(position)

    # -- lifecycle
    def close(self) -> None:
        """Close the files (flushing both in mode ``"w"``); idempotent."""
        if getattr(self, "_writer", None) is not None:
            self._writer.close()
            self._writer = None
        if getattr(self, "_fidx", None) is not None:
            self._fidx.close()
            self._fidx = None
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)
            self._fd = None

    def __getstate__(self) -> dict[str, Any]:
        if self.mode != "r":
            raise TypeError("an IndexedRecordIO in mode 'w' cannot be pickled")
        state = self.__dict__.copy()
        state["_fd"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


def default_idx_path(rec_path: str | os.PathLike) -> str:
    """``x.rec`` -> ``x.idx`` (as im2rec names them); other names get ``.idx`` appended."""
    rec_path = os.fspath(rec_path)
    root, ext = os.path.splitext(rec_path)
    return root + ".idx" if ext == ".rec" else rec_path + ".idx"


def build_index(
    rec_path: str | os.PathLike,
    idx_path: str | os.PathLike | None = None,
    *,
    on_error: str = "raise",
) -> int:
    """Scan ``rec_path`` and write its ``.idx`` (keys 0, 1, 2, ... in file order);
    return the number of records. ``idx_path`` defaults to the ``.rec`` name with
    ``.idx``. The index is written to a temporary file and renamed, so a failed scan
    leaves no index behind.

    >>> import os, tempfile
    >>> rec = os.path.join(tempfile.mkdtemp(), "b.rec")
    >>> with RecordIOWriter(rec) as w:
    ...     _ = [w.write(b"x" * i) for i in range(3)]
    >>> build_index(rec), open(rec[:-4] + ".idx").read()
    (3, '0\\t0\\n1\\t8\\n2\\t20\\n')
    """
    rec_path = os.fspath(rec_path)
    idx_path = default_idx_path(rec_path) if idx_path is None else os.fspath(idx_path)
    on_error = check_on_error(on_error)
    win = _Window([(rec_path, os.path.getsize(rec_path))])
    try:
        lines = [
            f"{i}\t{start}\n"
            for i, (_, start) in enumerate(_records(win, on_error, 0, _Scan()))
        ]
    finally:
        win.close()
    directory, name = os.path.split(os.path.abspath(idx_path))
    tmp = os.path.join(directory, f".{name}.tmp-{uuid.uuid4().hex[:12]}")
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.writelines(lines)
        os.replace(tmp, idx_path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return len(lines)


# --------------------------------------------------------------------------- image records


class IRHeader(NamedTuple):
    """Header of an MXNet image record (``mxnet.recordio.IRHeader``).

    ``flag``: 0 for a scalar ``label``; the number of labels when ``label`` is an array.
    ``label``: a float, or a float32 array when ``flag > 0``. ``id``/``id2``: the record
    id (low and high 64 bits).
    """

    flag: int
    label: Any
    id: int
    id2: int


_IR = struct.Struct("<IfQQ")


def pack(header: IRHeader | tuple, payload: bytes) -> bytes:
    """Prefix ``payload`` with the packed ``header``, as ``mxnet.recordio.pack``.

    A numeric ``label`` is stored in the header with ``flag=0`` (whatever ``flag`` says);
    any other label is stored as float32 values after the header, the header carrying
    ``flag=label.size`` and ``label=0``.

    >>> pack(IRHeader(0, 3.0, 7, 0), b"img").hex()
    '000000000000404007000000000000000000000000000000696d67'
    >>> unpack(pack(IRHeader(0, [1, 2], 7, 0), b""))[0].flag
    2
    """
    flag, label, rid, rid2 = IRHeader(*header)
    if isinstance(label, numbers.Number):
        flag = 0
        prefix = b""
    else:
        labels = np.asarray(label, dtype="<f4")
        flag = int(labels.size)
        label = 0.0
        prefix = labels.tobytes()
    return _IR.pack(flag, float(label), int(rid), int(rid2)) + prefix + bytes(payload)


def unpack(record: bytes) -> tuple[IRHeader, bytes]:
    """Split an image record into its :class:`IRHeader` and payload (``mxnet.recordio.unpack``).

    With ``flag > 0`` the header's ``label`` is a float32 array of ``flag`` values.

    >>> h, body = unpack(pack(IRHeader(0, [4.0, 2.0], 100, 0), b"jpeg"))
    >>> h.flag, h.label.tolist(), h.id, body
    (2, [4.0, 2.0], 100, b'jpeg')
    """
    if not isinstance(record, bytes):
        record = bytes(record)
    if len(record) < _IR.size:
        raise DecodeError(f"an IRHeader needs {_IR.size} bytes, the record has {len(record)}")
    flag, label, rid, rid2 = _IR.unpack_from(record)
    body = record[_IR.size :]
    if flag > 0:
        if len(body) < 4 * flag:
            raise DecodeError(
                f"IRHeader flag {flag} announces {flag} float32 labels ({4 * flag} bytes), "
                f"the record has {len(body)} bytes after the header"
            )
        label = np.frombuffer(body, dtype="<f4", count=flag).astype(np.float32)
        body = body[4 * flag :]
    return IRHeader(flag, label, rid, rid2), body


_JPEG_FORMATS = (".jpg", ".jpeg")
_PNG_FORMATS = (".png",)


def pack_img(
    header: IRHeader | tuple,
    img: np.ndarray,
    *,
    quality: int = 95,
    img_fmt: str = ".jpg",
    color_order: str = "rgb",
) -> bytes:
    """Encode ``img`` (``HxW``, ``HxWx1`` or ``HxWx3`` uint8) and :func:`pack` it.

    ``color_order="rgb"`` (default) means ``img`` is RGB; ``"bgr"`` means it is BGR as
    OpenCV arrays are — what ``mxnet.recordio.pack_img`` expects. JPEG (``quality``
    1-100, 4:2:0 subsampling as OpenCV uses) is encoded with simplejpeg; PNG with
    Pillow, ``quality`` being the zlib level (values above 9 count as 9, as in OpenCV).
    The encoded bytes are valid images but not byte-identical to OpenCV's.

    >>> import numpy as np
    >>> img = np.zeros((4, 6, 3), np.uint8); img[..., 0] = 255
    >>> h, out = unpack_img(pack_img(IRHeader(0, 1.0, 0, 0), img, img_fmt=".png"))
    >>> out.shape, out[0, 0].tolist()
    ((4, 6, 3), [255, 0, 0])
    """
    color_order = one_of("color_order", color_order, ("rgb", "bgr"))
    fmt = img_fmt.lower() if isinstance(img_fmt, str) else img_fmt
    one_of("img_fmt", fmt, _JPEG_FORMATS + _PNG_FORMATS)
    if isinstance(quality, bool) or not isinstance(quality, int) or not 0 <= quality <= 100:
        raise ValueError(f"`quality` must be an int in [0, 100], got {quality!r}")
    arr = np.asarray(img)
    if arr.dtype != np.uint8:
        raise TypeError(f"`img` must be a uint8 array, got dtype {arr.dtype}")
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    if not (arr.ndim == 2 or (arr.ndim == 3 and arr.shape[2] == 3)):
        raise ValueError(f"`img` must have shape HxW, HxWx1 or HxWx3, got {arr.shape}")
    if arr.ndim == 3 and color_order == "bgr":
        arr = arr[:, :, ::-1]
    arr = np.ascontiguousarray(arr)
    if fmt in _JPEG_FORMATS:
        simplejpeg = require("simplejpeg", extra="image")
        if arr.ndim == 2:
            data = simplejpeg.encode_jpeg(
                arr[:, :, None], quality=max(quality, 1), colorspace="GRAY"
            )
        else:
            data = simplejpeg.encode_jpeg(
                arr, quality=max(quality, 1), colorspace="RGB", colorsubsampling="420"
            )
    else:
        image = require("PIL.Image", extra="image")
        buf = io.BytesIO()
        image.fromarray(arr).save(buf, format="PNG", compress_level=min(quality, 9))
        data = buf.getvalue()
    return pack(header, data)


def unpack_img(record: bytes, *, color_order: str = "rgb") -> tuple[IRHeader, np.ndarray]:
    """:func:`unpack` a record and decode its image to an ``HxWx3`` uint8 array.

    RGB by default. MXNet's ``unpack_img`` decodes with OpenCV, which yields **BGR**;
    pass ``color_order="bgr"`` for arrays identical to MXNet's. Grayscale images are
    expanded to three channels and alpha is dropped (OpenCV's ``IMREAD_COLOR``, what
    ``ImageRecordIter`` uses). Decoding is :func:`feedline.image.decode` (JPEG through
    libjpeg-turbo with OpenCV's accurate DCT and upsampling, other formats through
    Pillow); an undecodable payload raises :class:`~feedline.exceptions.DecodeError`.
    """
    color_order = one_of("color_order", color_order, ("rgb", "bgr"))
    header, data = unpack(record)
    return header, _decode_image(data, color_order)


def _decode_image(data: bytes, color_order: str) -> np.ndarray:
    from feedline.image.codec import decode

    arr = decode(data, mode="RGB")
    return np.ascontiguousarray(arr[:, :, ::-1]) if color_order == "bgr" else arr
