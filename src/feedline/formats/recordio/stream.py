"""RecordIO framing: the writer and the streaming reader (see :mod:`feedline.recordio`)."""

from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Iterator
from typing import IO, Any

from feedline._internal.on_error import check_on_error, report
from feedline._internal.reading import read_full
from feedline._internal.state import state_int
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.exceptions import CorruptRecordError
from feedline.storage.cache import with_cache
from feedline.storage.fs import file_size, open_file

__all__ = ["MAGIC", "encode", "RecordIOWriter", "RecordIOReader", "read"]

MAGIC = 0xCED7230A
"""The magic word that starts every RecordIO part (stored little-endian)."""

MAGIC_BYTES = struct.pack("<I", MAGIC)
HEADER = struct.Struct("<II")
LENGTH_MASK = (1 << 29) - 1
_MAX_PAYLOAD = (1 << 29) - 1
_CHUNK = 1 << 20
_LARGE = 1 << 16  # payloads this long that straddle the buffer are read directly


# --------------------------------------------------------------------------- writing


def encode(payload: bytes | bytearray | memoryview) -> bytes:
    """Return the RecordIO bytes MXNet writes for one ``payload`` (all parts, padded).

    Args:
        payload: the record, bytes-like, at most 2**29 - 1 bytes (else ``ValueError``). A
            payload holding the magic word at a 4-aligned position is split into parts
            there, as MXNet does.

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
    hit = data.find(MAGIC_BYTES)
    if hit < 0:
        return HEADER.pack(MAGIC, size) + data + pad
    out = []
    begin = 0
    while hit >= 0:
        if hit & 3 == 0:  # aligned relative to the payload start, hence in the file
            cflag = 1 if begin == 0 else 2
            out.append(HEADER.pack(MAGIC, (cflag << 29) | (hit - begin)))
            out.append(data[begin:hit])
            begin = hit + 4
        hit = data.find(MAGIC_BYTES, hit + 1)
    cflag = 3 if begin else 0
    out.append(HEADER.pack(MAGIC, (cflag << 29) | (size - begin)))
    out.append(data[begin:])
    out.append(pad)
    return b"".join(out)


class RecordIOWriter:
    """Write payloads to a new RecordIO file (truncating it), as ``MXRecordIO(path, "w")``.

    Use it as a context manager or call ``close()``.

    Args:
        path: the local file to create (an existing one is truncated).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "w.rec")
    >>> with RecordIOWriter(path) as w:
    ...     w.write(b"hello"), w.write(b"x"), w.tell()
    (0, 16, 28)
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        self._f: IO[bytes] | None = open(self.path, "wb")  # noqa: SIM115 - closed by close()
        self._pos = 0

    def write(self, payload: bytes | bytearray | memoryview) -> int:
        """Append one record; return the offset of its first byte (what ``tell()`` said
        before the call).

        Args:
            payload: the record, bytes-like, at most 2**29 - 1 bytes (else ``ValueError``;
                a closed writer raises ``ValueError`` too).
        """
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


class Window:
    """Buffered reads of the byte range ``[start, end)`` of one or more files laid end to
    end (global offsets). ``buf[pos:]`` holds bytes from global offset ``base + pos``.

    Never reads past ``end`` or past a file's recorded size, so a corrupt length cannot
    make it allocate more than the data that exists. Files are local paths or URLs
    (opened with :func:`feedline.storage.fs.open_file` and ``storage_options``).
    """

    __slots__ = (
        "paths", "sizes", "starts", "end", "buf", "pos", "base", "storage_options", "_fi", "_f",
        "opener",
    )

    def __init__(
        self,
        files: list[tuple[str, int]],
        start: int = 0,
        end: int | None = None,
        *,
        storage_options: dict | None = None,
        opener: Any = None,
    ) -> None:
        self.storage_options = storage_options
        self.opener = open_file if opener is None else opener
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
        self._f: IO[Any] | None = None

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
                self._f = self.opener(self.paths[i], "rb", storage_options=self.storage_options)
                self._fi = i
            local = at - self.starts[i]
            assert self._f is not None  # file i is open (opened above when it changed)
            self._f.seek(local)
            want = min(n, self.sizes[i] - local)
            data = read_full(self._f, want)
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
            hit = buf.find(MAGIC_BYTES, start)
            while hit >= 0:
                if (self.base + hit) & 3 == 0:
                    if hit + 8 > len(buf):
                        break  # need the lrecord word: refill from the hit
                    if (HEADER.unpack_from(buf, hit)[1] >> 29) <= 1:
                        self.pos = hit
                        return True
                hit = buf.find(MAGIC_BYTES, hit + 1)
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


class Scan:
    """Counters shared between a reader and its record generator."""

    __slots__ = ("skipped", "skipped_bytes")

    def __init__(self) -> None:
        self.skipped = 0
        self.skipped_bytes = 0


def iter_records(
    win: Window, on_error: str, index: int, scan: Scan
) -> Iterator[tuple[bytes, int]]:
    """Yield ``(payload, start offset)`` for each record from ``win``'s position to its end;
    while suspended after a yield, ``win.offset`` is the offset just after that record."""
    unpack = HEADER.unpack_from
    magic_word = MAGIC
    mask = LENGTH_MASK
    problem: str | None
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


def _join_parts(win: Window) -> tuple[bytes, str | None]:
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
        magic, lrec = HEADER.unpack_from(buf, cur)
        if magic != MAGIC:
            return b"", (
                f"multi-part record broken: part {part} at byte {win.base + cur} has bad "
                f"magic word 0x{magic:08x}"
            )
        cflag, length = lrec >> 29, lrec & LENGTH_MASK
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
            pieces.append(MAGIC_BYTES)
        pieces.append(buf[cur + 8 : cur + 8 + length])
        rel += min(total, avail)
        part += 1
        if cflag == 3:
            win.pos += rel
            return b"".join(pieces), None


def _fail(
    win: Window, problem: str, index: int, on_error: str, scan: Scan
) -> Iterator[tuple[bytes, int]]:
    """Report damage at ``win.offset``; resynchronise past it unless raising. A generator
    (yielding nothing) so that ``yield from`` keeps ``iter_records`` a plain generator."""
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
    index of the next record and how many damaged stretches were skipped so far. The
    file is opened (and measured) on the first read, not by the constructor.

    Args:
        path: a local path or an fsspec URL (``s3://``, ``gs://``, ``memory://``,
            ``file://``).
        on_error: ``"raise"`` (the default) raises :class:`CorruptRecordError`; ``"skip"``
            and ``"warn"`` resynchronise on the next magic word and go on. Anything else
            raises ``ValueError``.
        offset: the byte offset to start at, as :meth:`seek` takes it (default 0).
        storage_options: passed to fsspec for a URL (construction arguments, not state).

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
        self._win: Window | None = None  # opened on the first read
        self._closed = False
        self._scan = Scan()
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
        """Continue reading at byte ``offset``.

        Args:
            offset: a record start: a non-negative int, a multiple of 4 (else
                ``ValueError``; a closed reader raises ``ValueError`` too).
            index: the record number of the record at ``offset``, reported in errors and
                the state; ``None`` (the default) means 0 when seeking to 0 and keeps the
                current count otherwise.
        """
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
                self._win = Window([(self.path, size)], storage_options=self.storage_options)
                self._win.seek(self._offset)
            self._gen = iter_records(self._win, self.on_error, self._index, self._scan)
        try:
            payload, _ = next(self._gen)
        except StopIteration:
            raise
        except Exception:  # damage (raise mode): release the descriptor and buffer now
            win, self._win = self._win, None
            if win is not None:
                win.close()
            raise
        assert self._win is not None  # a record was just read through it
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
        """Resume at a position :meth:`get_state` returned.

        Args:
            state: a ``{"type": "recordio", ...}`` dict from :meth:`get_state`; another
                type or a missing or negative field raises
                :class:`~feedline.exceptions.StateError`.
        """
        check_state(state, "recordio", ("offset", "index"))
        offset = state_int(state, "offset", "recordio")
        index = state_int(state, "index", "recordio")
        skipped = state_int({"skipped": 0, **state}, "skipped", "recordio")
        self.seek(offset, index=index)
        self._scan.skipped = skipped

    def close(self) -> None:
        self._closed = True
        win = getattr(self, "_win", None)
        if win is not None:
            win.close()
            self._win = None
        self._gen = None


def read(
    path: str | os.PathLike, *, on_error: str = "raise", storage_options: dict | None = None,
    cache_dir: str | os.PathLike | None = None, cache_limit: int | None = None,
) -> RecordIOReader:
    """Iterate over the payloads of the RecordIO file at ``path``.

    Returns a :class:`RecordIOReader` (a ``DatasetIterator`` with byte-offset state).

    Args:
        path: a local path or an fsspec URL.
        on_error: ``"raise"`` (the default), ``"skip"`` or ``"warn"``, as in
            :class:`RecordIOReader`.
        storage_options: passed to fsspec for a URL.
        cache_dir: a directory for the node-local
            :class:`~feedline.storage.cache.ShardCache`: a remote file is read from its copy
            there; ``None`` (the default) reads it directly.
        cache_limit: the cache's size limit in bytes, a positive int; ``None`` (the
            default) sets no limit. Given without ``cache_dir`` it raises ``ValueError``.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "x.rec")
    >>> with RecordIOWriter(path) as w:
    ...     _ = [w.write(b"rec%d" % i) for i in range(3)]
    >>> list(read(path))
    [b'rec0', b'rec1', b'rec2']
    """
    return RecordIOReader(path, on_error=on_error,
                          storage_options=with_cache(storage_options, cache_dir, cache_limit))
