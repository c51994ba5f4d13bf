"""Sequential TFRecord reading: :class:`TFRecordReader`, :func:`read`, :func:`read_batches`,
and the sidecar index builder :func:`build_index` (format and semantics: :mod:`feedline.tfrecord`).

>>> import os, tempfile
>>> from feedline.tfrecord import write
>>> path = os.path.join(tempfile.mkdtemp(), "r.tfrecord")
>>> write(path, [b"x", b"yz"])
2
>>> read_batches(path, 2).to_list() if hasattr(read_batches(path, 2), "to_list") else list(read_batches(path, 2))
[[b'x', b'yz']]
"""

from __future__ import annotations

import io
import os
import struct
import warnings
from typing import Any

import numpy as np

from feedline._internal.on_error import check_on_error, report
from feedline._internal.state import state_int
from feedline._internal.validate import check_bool, non_negative_int, positive_int
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.exceptions import CorruptRecordError
from feedline.formats.tfrecord.index import TFRecordIndex
from feedline.formats.tfrecord.scan import (
    FOOTER,
    HEADER,
    OVERHEAD,
    find_header,
    length_crc,
    masked_crc,
    scan,
)
from feedline.storage import compression as _compression
from feedline.storage.cache import with_cache
from feedline.storage.fs import open_file

__all__ = [
    "detect_compression",
    "TFRecordReader",
    "read",
    "TFRecordBatchReader",
    "read_batches",
    "scan_index",
    "build_index",
]

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_DEFAULT_BLOCK = 4 << 20
_CHUNK_LIMIT = 1 << 16
_FIRST_BLOCK = 256 << 10  # bytes read first after opening
#: records in the first chunk after opening; each chunk after it doubles up to
#: ``_CHUNK_LIMIT``, so the first record comes without cutting a whole buffer
_FIRST_CHUNK = 8
#: payloads at least this long in a plain local file are read straight from the file into
#: their own ``bytes`` (one copy) instead of through the block buffer (two copies); for
#: shorter ones the two system calls per record cost more than the copy saved
_DIRECT_MIN = 32 << 10
#: payload bytes gathered by one chunk of such direct reads
_DIRECT_CHUNK = 1 << 20


def detect_compression(
    path: str | os.PathLike, *, storage_options: dict | None = None
) -> str | None:
    """Return ``None``, ``"GZIP"`` or ``"ZLIB"`` for the TFRecord file at ``path``.

    An uncompressed file is recognised by its first header's length CRC; otherwise the
    gzip magic or a zlib header decides; an empty or unrecognisable file gives ``None``
    (reading it then reports what is wrong).

    Args:
        path: a local path or a URL (``s3://``, ``memory://`` ...); a missing file raises
            ``FileNotFoundError``.
        storage_options: passed to fsspec for a URL (see :mod:`feedline.storage.fs`);
            ``None`` passes none.

    >>> import os, tempfile
    >>> from feedline.tfrecord import write
    >>> d = tempfile.mkdtemp()
    >>> _ = write(os.path.join(d, "p.tfrecord"), [b"a"])
    >>> _ = write(os.path.join(d, "g.tfrecord"), [b"a"], compression="GZIP")
    >>> detect_compression(os.path.join(d, "p.tfrecord")), detect_compression(os.path.join(d, "g.tfrecord"))
    (None, 'GZIP')
    """
    with open_file(path, "rb", storage_options=storage_options) as f:
        return _detect(f)


def _detect(f: Any) -> str | None:
    """Detect the compression from the first bytes of the open binary file ``f``."""
    head = f.read(HEADER)
    if len(head) >= HEADER and masked_crc(head[:8]) == _U32.unpack_from(head, 8)[0]:
        return None
    return _compression.sniff(head)


# --------------------------------------------------------------------------- reading


class _Source:
    """The open file and a reusable buffer holding ``buf[start:end]`` = file bytes
    ``[base + start, base + end)`` (offsets in the uncompressed stream).

    ``compression`` may be ``"auto"``; ``self.compression`` is then what was found."""

    def __init__(
        self,
        path: str,
        compression: str | None,
        block_size: int,
        storage_options: dict | None,
    ) -> None:
        self.path = path
        self.storage_options = storage_options
        self.block_size = block_size
        # the buffer starts small (the first record comes sooner) and doubles on each
        # refill up to ``block_size``
        self.buf = bytearray(min(block_size, _FIRST_BLOCK))
        self.start = self.end = self.base = 0
        self.dead = False  # the data ended for good (damage skipped to the end)
        self.file, self.compression = _compression.open_reader(
            path, compression, storage_options=storage_options, detect=_detect
        )
        self.size = _compression.stream_size(self.file) if self.compression is None else None
        self.fd = self._direct_fd()

    def _open(self) -> None:
        self.file, _ = _compression.open_reader(
            self.path, self.compression, storage_options=self.storage_options
        )
        self.fd = self._direct_fd()

    def _direct_fd(self) -> int | None:
        """The descriptor for positional reads (``os.pread``) of a plain local file, else
        ``None`` (compressed streams and fsspec files are only read through the buffer)."""
        if self.compression is None and isinstance(self.file, io.BufferedReader):
            if hasattr(os, "pread"):
                return self.file.fileno()
        return None

    def offset(self) -> int:
        return self.base + self.start

    def refill(self, need: int) -> bool:
        """Try to hold ``need`` bytes from ``start``; return whether new bytes came.

        The buffer grows (at most doubling each time) only while data keeps arriving, so
        a damaged length field cannot make it allocate more than the data there is.
        """
        if self.dead:
            return False
        held = self.end - self.start
        need = max(need, held + 1)
        if len(self.buf) < self.block_size:  # still ramping up from the first read
            grown = bytearray(min(2 * len(self.buf), self.block_size))
            grown[:held] = self.buf[self.start : self.end]
            self.buf = grown
        elif self.start:
            self.buf[:held] = self.buf[self.start : self.end]
        self.base += self.start
        self.start, self.end = 0, held
        got = False
        while True:
            if self.end == len(self.buf):
                if self.end >= need and got:
                    break
                grown = bytearray(max(min(need, 2 * len(self.buf)), len(self.buf) + 1))
                grown[: self.end] = self.buf[: self.end]
                self.buf = grown
            with memoryview(self.buf) as mv:
                n = self.file.readinto(mv[self.end :])
            if not n:
                break
            self.end += n
            got = True
            if self.end >= need:
                break
        return got

    def seek(self, offset: int) -> None:
        """Position the buffer so that ``offset()`` is ``offset`` (or the end of data)."""
        if self.dead:  # start afresh (a broken compressed stream cannot go on)
            self.dead = False
            self.file.close()
            self._open()
            self.base = self.start = self.end = 0
        if self.base <= offset <= self.base + self.end:
            self.start = offset - self.base
            return
        if self.compression is None:
            self.file.seek(offset)
        else:
            here = self.base + self.end
            if offset < here:
                self.file.close()
                self._open()
                here = 0
            offset = here + self.file.skip(offset - here)
        self.base, self.start, self.end = offset, 0, 0

    def close(self) -> None:
        self.fd = None
        if self.file is not None:
            self.file.close()
            self.file = None


def _load_index_offsets(
    path: str, index_path: str | None, storage_options: dict | None
) -> np.ndarray | None:
    candidate = index_path if index_path is not None else path + ".index"
    try:
        index = TFRecordIndex.load(candidate, storage_options=storage_options)
        index.check(path, storage_options=storage_options)
    except FileNotFoundError:
        return None
    except CorruptRecordError as exc:
        warnings.warn(f"ignoring the sidecar index: {exc}", RuntimeWarning, stacklevel=6)
        return None
    return index.offsets.astype(np.int64)


class TFRecordReader(DatasetIterator[bytes]):
    """Iterator over the records of one TFRecord file, as ``bytes``.

    The file is opened on first use (a read, ``set_state``, or asking for
    ``compression`` when it is ``"auto"``), not by the constructor; a missing file
    raises ``FileNotFoundError`` then.

    Args:
        path: the TFRecord file, a local path or a URL such as ``s3://bucket/a.tfrecord``.
        compression: ``"auto"`` (the default: detected from the first bytes, see
            :func:`detect_compression`), ``None``, ``"GZIP"`` or ``"ZLIB"`` (any case);
            anything else raises ``ValueError``.
        verify: true (the default) checks both CRCs of every frame; false checks
            neither. A non-bool raises ``TypeError``.
        on_error: ``"raise"`` (the default), ``"skip"`` or ``"warn"``: what damaged data
            does (see the module docstring); anything else raises ``ValueError``.
        index_path: the sidecar index used to resynchronise after damage; ``None`` (the
            default) uses ``<path>.index`` when that file exists. A damaged or stale
            index is ignored with a ``RuntimeWarning``.
        block_size: the read buffer in bytes, default 4 MiB; it grows to hold a larger
            record. Not a positive int: ``ValueError``/``TypeError``.
        storage_options: passed to fsspec for a URL (see :mod:`feedline.storage.fs`);
            construction arguments, never part of the state.

    ``get_state()`` returns ``{"type": "tfrecord", "offset", "index", "skipped",
    "skipped_bytes"}``: the byte offset (in the uncompressed stream) and index of the
    next record. ``next_batch(n)`` returns up to ``n`` records at once.

    >>> import os, tempfile
    >>> from feedline.tfrecord import write
    >>> path = os.path.join(tempfile.mkdtemp(), "r.tfrecord")
    >>> _ = write(path, [b"a", b"bb", b"ccc"], compression="ZLIB")
    >>> r = TFRecordReader(path)
    >>> next(r), r.compression
    (b'a', 'ZLIB')
    >>> state = r.get_state(); r.close()
    >>> state["index"], state["offset"]
    (1, 17)
    >>> r2 = TFRecordReader(path); r2.set_state(state)
    >>> r2.next_batch(5)
    [b'bb', b'ccc']
    >>> r2.close()
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        compression: str | None = "auto",
        verify: bool = True,
        on_error: str = "raise",
        index_path: str | os.PathLike | None = None,
        block_size: int = _DEFAULT_BLOCK,
        storage_options: dict | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.on_error = check_on_error(on_error)
        check_bool("verify", verify)
        self.verify = verify
        self._block_size = max(positive_int("block_size", block_size), HEADER + 4)
        self.index_path = None if index_path is None else os.fspath(index_path)
        self.storage_options = storage_options
        self._compression = _compression.normalize(compression, allow_auto=True)
        self._src: _Source | None = None  # opened on first use
        self._closed = False
        self._records: list[bytes] = []
        self._offsets = np.empty(0, dtype=np.int64)
        self._i = 0
        self._chunk_index = 0  # index of self._records[0]
        self._chunk_limit = _FIRST_CHUNK  # records per chunk: doubles up to _CHUNK_LIMIT
        self._wanted: tuple[int, int] | None = None  # (record index, step): see hint_stride
        self._skipped = 0
        self._skipped_bytes = 0
        self._index_offsets: np.ndarray | None = None
        self._index_loaded = False
        self._parked: int | None = None  # offset to reopen at after an error released the file

    compression = _compression.compression_property("_source")

    # -- counters -------------------------------------------------------------------

    @property
    def skipped(self) -> int:
        """Damaged stretches skipped so far (``skip``/``warn``)."""
        return self._skipped

    @property
    def skipped_bytes(self) -> int:
        """Bytes of the stream skipped over because of damage."""
        return self._skipped_bytes

    # -- iteration ------------------------------------------------------------------

    def __next__(self) -> bytes:
        i = self._i
        if i < len(self._records):
            self._i = i + 1
            return self._records[i]
        if not self._fill():
            raise StopIteration
        self._i = 1
        return self._records[0]

    def next_batch(self, n: int) -> list[bytes]:
        """Return the next ``n`` records (fewer at the end of the file, or just before
        damage under ``on_error="raise"``: the next call then raises); ``[]`` at the end.

        Args:
            n: the most records to return; ``0`` or less returns ``[]``.
        """
        out: list[bytes] = []
        while len(out) < n:
            if self._i >= len(self._records):
                try:
                    if not self._fill(n - len(out)):
                        break
                except CorruptRecordError:
                    if out:
                        break
                    raise
            take = self._records[self._i : self._i + n - len(out)]
            self._i += len(take)
            if out:
                out.extend(take)
            else:
                out = take
        return out

    def _source(self) -> _Source:
        src = self._src
        if src is None:
            if self._closed:
                raise ValueError(f"{self.path}: read from a closed TFRecordReader")
            src = _Source(self.path, self._compression, self._block_size, self.storage_options)
            self._src = src
            self._compression = src.compression
            if self._parked is not None:
                parked, self._parked = self._parked, None
                src.seek(parked)
        return src

    def _fill(self, want: int | None = None) -> bool:
        """Load the next chunk of records into ``self._records``; False at the end.

        ``want``: the records the caller needs now. A chunk of large records read
        straight from the file stops one record after that: the record read ahead stays
        allocated after the records just returned, so that when the caller frees those,
        the allocator reuses their memory for the next ones rather than returning it to
        the system and faulting fresh pages in again (glibc gives back free memory at the
        top of its heap); without it every other batch of ``read_batches`` did."""
        src = self._source()
        self._chunk_index += len(self._records)
        self._records, self._i = [], 0
        limit = self._chunk_limit
        self._chunk_limit = min(2 * limit, _CHUNK_LIMIT)
        while True:
            keep = None
            if self._wanted is not None:
                first, step = self._wanted
                keep = (max(first - self._chunk_index, (first - self._chunk_index) % step), step)
            records, offsets, pos, problem = scan(
                src.buf, src.start, src.end, limit, self.verify, keep=keep
            )
            if records:
                self._records = records
                self._offsets = offsets + src.base
                src.start = pos
                return True
            if problem is None:  # nothing buffered at a frame boundary
                if not self._refill(src, HEADER):
                    return False
                continue
            if problem.kind == "partial":
                if (
                    src.fd is not None
                    and problem.length is not None
                    and problem.length >= _DIRECT_MIN
                    and self._fill_direct(src, limit if want is None else min(limit, want + 1),
                                          keep)
                ):
                    return True  # large records, read straight from the file
                need = HEADER if problem.length is None else problem.length + OVERHEAD
                at = src.offset()
                fits = src.size is None or at + need <= src.size
                if fits and self._refill(src, need):
                    continue
                if src.dead:  # the stream broke and the damage was skipped
                    continue
                have = src.size - at if src.size is not None else src.end - src.start
                self._damage(
                    src,
                    "truncated record: the file ends "
                    + (
                        f"{have} bytes into the 12-byte header"
                        if problem.length is None
                        else f"{have} bytes into a frame of {need} bytes (length {problem.length})"
                    ),
                    at,
                    # a length running past the end may itself be the damage: look for
                    # the next whole, valid frame after it
                    resume=None if problem.length is None else "scan",
                )
                continue
            at = src.base + problem.pos
            if problem.kind == "length_crc":
                self._damage(src, "corrupted record: length CRC mismatch", at, resume="scan")
            else:
                self._damage(
                    src,
                    f"corrupted record: data CRC mismatch (data of {problem.length} bytes "
                    f"at byte {at + HEADER})",
                    at,
                    resume=at + problem.length + OVERHEAD,
                )

    def _fill_direct(self, src: _Source, limit: int, keep: tuple[int, int] | None) -> bool:
        """Load a chunk of large records read straight from the file; False if none.

        ``src.buf[src.start:]`` holds the checked header of a frame whose payload is at
        least ``_DIRECT_MIN`` bytes. Each such frame's payload is read with one
        ``os.pread`` into its own ``bytes`` and its footer with the next header by a
        second one; this goes on while the frames are large, whole within the file and
        sound, up to ``limit`` records or about ``_DIRECT_CHUNK`` payload bytes. Anything
        else (a short or damaged frame, a small one, a file that changed size) stops the
        chunk before that frame, whose header is left in the buffer: the buffered path
        then reads it and reports damage with its usual messages.
        """
        fd, size, verify = src.fd, src.size, self.verify
        assert fd is not None and size is not None
        pread, u64, u32 = os.pread, _U64.unpack_from, _U32.unpack_from
        first, step = keep if keep is not None else (0, 1)
        pos = src.base + src.start
        head = bytes(src.buf[src.start : src.start + HEADER])
        length = u64(head)[0]
        records: list[bytes | None] = []
        offsets: list[int] = []
        total = 0
        while True:
            end = pos + HEADER + length
            if end + FOOTER > size:
                break  # truncated (or the file changed): the buffered path reports it
            j = len(records)
            if j >= first and (j - first) % step == 0:
                data = pread(fd, length, pos + HEADER)
                tail = pread(fd, FOOTER + HEADER, end)
                if len(data) != length or len(tail) < FOOTER:
                    break
                if verify and masked_crc(data) != u32(tail)[0]:
                    break  # yield the records before it; the buffered path reports it
                records.append(data)
                total += length
            else:  # not wanted (hint_stride): only walk past it
                tail = pread(fd, FOOTER + HEADER, end)
                if len(tail) < FOOTER:
                    break
                records.append(None)
            offsets.append(pos)
            pos = end + FOOTER
            head = tail[FOOTER:]
            if len(head) < HEADER or len(records) >= limit or total >= _DIRECT_CHUNK:
                break
            length = u64(head)[0]
            if length < _DIRECT_MIN or (verify and length_crc(length) != u32(head, 8)[0]):
                break
        if not records:
            return False
        # the buffer now starts at ``pos`` and holds what was read of the next header
        src.base, src.start, src.end = pos, 0, len(head)
        src.buf[: len(head)] = head
        src.file.seek(pos + len(head))
        self._records = records  # type: ignore[assignment]
        self._offsets = np.array(offsets, dtype=np.int64)
        return True

    def _refill(self, src: _Source, need: int) -> bool:
        try:
            return src.refill(need)
        except CorruptRecordError as exc:
            self._damage(src, exc.message, src.offset(), resume=None, cause=exc)
            return False

    def _damage(
        self,
        src: _Source,
        message: str,
        at: int,
        *,
        resume: int | str | None,
        cause: BaseException | None = None,
    ) -> None:
        """Raise, or count and move past the damage at ``at`` (``resume``: an offset,
        ``"scan"`` to look for the next header, ``None`` for the end of the data)."""
        err = CorruptRecordError(message, path=self.path, index=self._chunk_index, offset=at)
        if self.on_error == "raise":
            # release the descriptor and the read buffer now, not at garbage collection;
            # a later call reopens the file here (and meets the same damage)
            self._parked = src.offset()
            self._src = None
            src.close()
            src.buf = bytearray(0)
        report(err, self.on_error, cause=cause, stacklevel=4)
        self._skipped += 1
        self._chunk_index += 1
        if resume == "scan":
            resume = self._resync(src, at)
        if resume is None:  # nothing usable follows: go to the end of the data
            if src.size is not None:
                src.seek(src.size)
            else:
                src.start = src.end
                while True:
                    src.start = src.end
                    try:
                        if not src.refill(src.block_size):
                            break
                    except CorruptRecordError:
                        break
                src.start = src.end
            src.dead = True
            self._skipped_bytes += max(0, src.offset() - at)
            return
        assert not isinstance(resume, str)  # "scan" was resolved to an offset or None above
        src.seek(resume)
        self._skipped_bytes += max(0, src.offset() - at)

    def _resync(self, src: _Source, at: int) -> int | None:
        """Offset of the next record after the damaged frame at ``at``, or None."""
        if not self._index_loaded:
            self._index_loaded = True
            self._index_offsets = _load_index_offsets(
                self.path, self.index_path, self.storage_options
            )
        if self._index_offsets is not None:
            offsets = self._index_offsets
            j = int(np.searchsorted(offsets, at, side="right"))
            return int(offsets[j]) if j < len(offsets) else None
        src.seek(at + 1)
        while True:
            hit = find_header(src.buf, src.start, src.end)
            if hit >= 0:
                candidate = src.base + hit
                length = _U64.unpack_from(src.buf, hit)[0]
                if (src.size is None or candidate + length + OVERHEAD <= src.size) and (
                    self._data_crc_ok(src, hit, length)
                ):
                    return candidate
                src.start = src.offset() - src.base + 1  # _data_crc_ok may move the buffer
                continue
            src.start = max(src.start, src.end - (HEADER - 1))
            try:
                more = src.refill(src.end - src.start + src.block_size)
            except CorruptRecordError:
                return None
            if not more:
                return None

    @staticmethod
    def _data_crc_ok(src: _Source, hit: int, length: int) -> bool:
        """Whether the frame whose header is at ``src.buf[hit]`` is whole and its data CRC
        checks; leaves ``src.offset()`` at that frame (the buffer may be moved)."""
        src.start = hit
        need = length + OVERHEAD
        while src.end - src.start < need:
            try:
                if not src.refill(need):
                    return False
            except CorruptRecordError:
                return False
        pos = src.start + HEADER
        with memoryview(src.buf) as mv:
            crc = masked_crc(bytes(mv[pos : pos + length]))
        return crc == _U32.unpack_from(src.buf, pos + length)[0]

    # -- state ----------------------------------------------------------------------

    def tell(self) -> int:
        """Byte offset (uncompressed stream) of the next record to be returned."""
        if self._i < len(self._records):
            return int(self._offsets[self._i])
        if self._src is None and not self._closed:
            if self._parked is not None:
                return self._parked  # released after an error
            return 0  # not opened yet: set_state opens, so nothing was read
        return self._source().offset()

    def get_state(self) -> dict[str, Any]:
        return {
            "type": "tfrecord",
            "offset": self.tell(),
            "index": self._chunk_index + self._i,
            "skipped": self._skipped,
            "skipped_bytes": self._skipped_bytes,
        }

    def hint_stride(self, first: int, step: int) -> None:
        """Say that of the records from here on only the ``first``-th, ``first + step``-th,
        ... (counting from 0) will be used: the others may come back as ``None``, without
        being cut out of the buffer or having their data CRC checked (their frames are still
        walked and their length CRCs checked). A stream shard over this reader says so;
        another worker reads and checks those records. Only under ``on_error="raise"``:
        skipping damage must see every record, or parts would count records differently.
        ``set_state`` forgets the hint.

        Args:
            first: the first record wanted, counted from the next one to be returned; a
                negative value raises ``ValueError``.
            step: the distance between wanted records, a positive int (``1`` with
                ``first=0`` wants every record: no hint).

        >>> import os, tempfile
        >>> from feedline.tfrecord import write
        >>> path = os.path.join(tempfile.mkdtemp(), "r.tfrecord")
        >>> _ = write(path, [b"a", b"b", b"c", b"d", b"e"])
        >>> r = TFRecordReader(path); r.hint_stride(1, 2)
        >>> list(r)
        [None, b'b', None, b'd', None]
        """
        non_negative_int("first", first)
        positive_int("step", step)
        if self.on_error == "raise" and (step > 1 or first > 0):
            self._wanted = (self._chunk_index + self._i + first, step)

    def set_state(self, state: dict[str, Any]) -> None:
        """Resume at a position :meth:`get_state` returned (opening the file).

        Args:
            state: a ``{"type": "tfrecord", ...}`` dict from :meth:`get_state`; another
                type, a missing key or an offset past the end of the file raises
                :class:`~feedline.exceptions.StateError`.
        """
        check_state(state, "tfrecord", ("offset", "index"))
        offset = state_int(state, "offset", "tfrecord")
        index = state_int(state, "index", "tfrecord")
        skipped = state_int({"skipped": 0, **state}, "skipped", "tfrecord")
        skipped_bytes = state_int({"skipped_bytes": 0, **state}, "skipped_bytes", "tfrecord")
        self._parked = None
        self._wanted = None
        src = self._source()
        if src.size is not None and offset > src.size:  # a position past the end of the file
            state_int(state, "offset", "tfrecord", high=src.size)
        src.seek(offset)
        self._records, self._i = [], 0
        self._chunk_index = index
        self._skipped = skipped
        self._skipped_bytes = skipped_bytes

    def close(self) -> None:
        self._closed = True
        src = getattr(self, "_src", None)
        if src is not None:
            self._src = None
            src.close()
        self._records = []


def read(
    path: str | os.PathLike,
    *,
    compression: str | None = "auto",
    verify: bool = True,
    on_error: str = "raise",
    index_path: str | os.PathLike | None = None,
    storage_options: dict | None = None,
    cache_dir: str | os.PathLike | None = None,
    cache_limit: int | None = None,
) -> TFRecordReader:
    """Iterate over the records of the TFRecord file ``path`` (``bytes`` each).

    The iterator is a :class:`TFRecordReader`, also a context manager.

    Args:
        path: a local path or a URL (``s3://``, ``gs://``, ``memory://``, ``file://``) read
            through fsspec.
        compression: ``"auto"`` (the default), ``None``, ``"GZIP"`` or ``"ZLIB"``, as in
            :class:`TFRecordReader`.
        verify: true (the default) checks both CRCs of every frame.
        on_error: ``"raise"`` (the default), ``"skip"`` or ``"warn"``.
        index_path: the sidecar index; ``None`` uses ``<path>.index`` when it exists.
        storage_options: passed to fsspec for a URL (see :mod:`feedline.storage.fs`).
        cache_dir: a directory for the node-local
            :class:`~feedline.storage.cache.ShardCache`: a remote file and its index are
            read from their copies there; ``None`` (the default) reads them directly.
        cache_limit: the cache's size limit in bytes, a positive int; ``None`` (the
            default) sets no limit. Given without ``cache_dir`` it raises ``ValueError``.

    >>> import os, tempfile
    >>> from feedline.tfrecord import write
    >>> path = os.path.join(tempfile.mkdtemp(), "r.tfrecord")
    >>> _ = write(path, [b"x", b"y"], compression="GZIP")
    >>> with read(path) as records:
    ...     list(records)
    [b'x', b'y']
    """
    return TFRecordReader(
        path,
        compression=compression,
        verify=verify,
        on_error=on_error,
        index_path=index_path,
        storage_options=with_cache(storage_options, cache_dir, cache_limit),
    )


class TFRecordBatchReader(DatasetIterator[list]):
    """Iterator of lists of ``batch_size`` records from one TFRecord file. State is the
    underlying reader's; further keyword options go to :class:`TFRecordReader`.

    Args:
        path: the TFRecord file, a local path or a URL.
        batch_size: records per list, a positive int (else ``ValueError``/``TypeError``).
        drop_remainder: false (the default) yields a shorter last list; true leaves it out.

    >>> import os, tempfile
    >>> from feedline.tfrecord import write
    >>> path = os.path.join(tempfile.mkdtemp(), "r.tfrecord")
    >>> _ = write(path, [b"%d" % i for i in range(5)])
    >>> list(TFRecordBatchReader(path, 2))
    [[b'0', b'1'], [b'2', b'3'], [b'4']]
    >>> list(TFRecordBatchReader(path, 2, drop_remainder=True))
    [[b'0', b'1'], [b'2', b'3']]
    """

    def __init__(
        self,
        path: str | os.PathLike,
        batch_size: int,
        *,
        drop_remainder: bool = False,
        **options: Any,
    ) -> None:
        self.batch_size = positive_int("batch_size", batch_size)
        self.drop_remainder = bool(drop_remainder)
        self.reader = TFRecordReader(path, **options)

    def __next__(self) -> list[bytes]:
        batch = self.reader.next_batch(self.batch_size)
        if not batch:
            raise StopIteration
        if self.drop_remainder and len(batch) < self.batch_size:
            self.reader.next_batch(1)  # raises if the batch was cut short by damage
            raise StopIteration
        return batch

    @property
    def skipped(self) -> int:
        return self.reader.skipped

    def get_state(self) -> dict[str, Any]:
        return self.reader.get_state()

    def set_state(self, state: dict[str, Any]) -> None:
        """Resume at a position :meth:`get_state` returned.

        Args:
            state: the underlying :class:`TFRecordReader`'s state, as
                :meth:`TFRecordReader.set_state` takes it.
        """
        self.reader.set_state(state)

    def close(self) -> None:
        reader = getattr(self, "reader", None)
        if reader is not None:
            reader.close()


def read_batches(
    path: str | os.PathLike,
    batch_size: int,
    *,
    drop_remainder: bool = False,
    compression: str | None = "auto",
    verify: bool = True,
    on_error: str = "raise",
    storage_options: dict | None = None,
) -> TFRecordBatchReader:
    """Yield lists of ``batch_size`` records (``bytes``) from the TFRecord file ``path``.

    The fast path: records are cut from a large reusable buffer, runs of equal-length
    frames are checked with numpy, and no Python object is made per framing step; payloads
    of 32 KiB or more in an uncompressed local file are read straight into their ``bytes``
    instead. Same errors as :func:`read`.

    Args:
        path: a local path or a URL.
        batch_size: records per list, a positive int.
        drop_remainder: false (the default) yields a shorter last list; true leaves it out.
        compression: ``"auto"`` (the default), ``None``, ``"GZIP"`` or ``"ZLIB"``.
        verify: true (the default) checks both CRCs of every frame.
        on_error: ``"raise"`` (the default), ``"skip"`` or ``"warn"``.
        storage_options: passed to fsspec for a URL (see :mod:`feedline.storage.fs`).

    >>> import os, tempfile
    >>> from feedline.tfrecord import write
    >>> path = os.path.join(tempfile.mkdtemp(), "r.tfrecord")
    >>> _ = write(path, [b"%d" % i for i in range(5)])
    >>> list(read_batches(path, 3))
    [[b'0', b'1', b'2'], [b'3', b'4']]
    """
    return TFRecordBatchReader(
        path,
        batch_size,
        drop_remainder=drop_remainder,
        compression=compression,
        verify=verify,
        on_error=on_error,
        storage_options=storage_options,
    )


# --------------------------------------------------------------------------- index


def scan_index(path: str, *, compression: Any, verify: bool, on_error: str) -> TFRecordIndex:
    """Read the TFRecord file ``path`` once and return its :class:`TFRecordIndex`
    (nothing is written); :func:`build_index` saves one.

    Args:
        path: a local TFRecord file.
        compression: ``"auto"``, ``None``, ``"GZIP"`` or ``"ZLIB"``; the index records the
            compression found.
        verify: whether to check both CRCs of every frame.
        on_error: ``"raise"``, ``"skip"`` or ``"warn"``; skipped damage is left out of
            the index.

    >>> import os, tempfile
    >>> from feedline.tfrecord import write
    >>> path = os.path.join(tempfile.mkdtemp(), "r.tfrecord")
    >>> _ = write(path, [b"a", b"bcd"])
    >>> index = scan_index(path, compression=None, verify=True, on_error="raise")
    >>> index.offsets.tolist(), index.lengths.tolist(), index.file_size
    ([0, 17], [1, 3], 36)
    """
    reader = TFRecordReader(path, compression=compression, verify=verify, on_error=on_error)
    reader._index_loaded = True  # never resynchronise by an index while building one
    offsets: list[np.ndarray] = []
    lengths: list[np.ndarray] = []
    with reader:
        while reader._fill():
            offsets.append(reader._offsets)
            lengths.append(
                np.fromiter(map(len, reader._records), dtype=np.uint64, count=len(reader._records))
            )
            reader._i = len(reader._records)
        compression = reader.compression
    return TFRecordIndex(
        np.concatenate(offsets).astype(np.uint64) if offsets else np.empty(0, np.uint64),
        np.concatenate(lengths) if lengths else np.empty(0, np.uint64),
        file_size=os.path.getsize(path),
        compression=compression,
    )


def build_index(
    path: str | os.PathLike,
    index_path: str | os.PathLike | None = None,
    *,
    compression: str | None = "auto",
    verify: bool = True,
    on_error: str = "raise",
) -> int:
    """Scan the TFRecord file ``path`` and write its sidecar index; return the number of
    records indexed.

    Args:
        path: a local TFRecord file.
        index_path: where to write the index; ``None`` (the default) writes
            ``<path>.index``. It is written atomically.
        compression: ``"auto"`` (the default), ``None``, ``"GZIP"`` or ``"ZLIB"``.
        verify: true (the default) checks both CRCs of every frame.
        on_error: ``"raise"`` (the default) raises at damage; with ``"skip"`` (or
            ``"warn"``) damaged records are left out of the index (and a reader using it
            resynchronises exactly at the next good record).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "c.tfrecord")
    >>> from feedline.tfrecord import TFRecordFile, write
    >>> write(path, [b"a", b"bb", b"ccc"])
    3
    >>> build_index(path)
    3
    >>> f = TFRecordFile(path); len(f), f[2], f[-3]
    (3, b'ccc', b'a')
    """
    path = os.fspath(path)
    index = scan_index(path, compression=compression, verify=verify, on_error=on_error)
    index.save(path + ".index" if index_path is None else index_path)
    return len(index)
