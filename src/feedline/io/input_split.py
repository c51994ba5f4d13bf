"""MXNet's InputSplit, byte-range mode: part ``r`` of ``n`` of a set of record files.

The files, in the order given, form one byte range of ``total`` bytes (empty files are
left out, as dmlc-core does). Part ``r`` of ``n`` is computed exactly as MXNet 1.9.1
(dmlc-core ``InputSplitBase::ResetPartition``) computes it:

1. ``step = ceil(total / n)``, rounded up to a multiple of ``align`` (4 for RecordIO,
   1 for text);
2. nominal ``begin = min(r * step, total)``, ``end = min((r + 1) * step, total)``; if
   they are equal the part is empty;
3. each of ``begin`` and ``end`` that is not the first byte of a file moves forward, *inside
   the file that contains it*, to the next record boundary — or to that file's end if
   the file has none after it:

   * RecordIO: the next 4-byte word (stepping by 4 from the nominal offset) equal to the
     magic word whose lrecord has ``cflag`` 0 or 1 (after a magic word with another
     cflag the scan resumes 8 bytes further, skipping the lrecord word);
   * text: just past the next run of ``\\n``/``\\r`` characters;

4. the part reads every record that starts in ``[begin, end)``; records never span two
   parts because part ``r``'s ``end`` and part ``r + 1``'s ``begin`` come from the
   same nominal offset by the same rule. RecordIO parts read the files as one stream of
   bytes; text lines never continue into the next file (MXNet inserts a newline between
   files). Blank lines are not records: a newline run ends one line.

Every record is therefore read by exactly one part, and the assignment reproduces what
MXNet's ``ImageRecordIter(path_imgrec=..., part_index=r, num_parts=n)`` reads, for one
file or for several (``"a.rec;b.rec;c.rec"``).

Files may be fsspec URLs (``s3://...``, with ``storage_options``): a part then reads
only its own bytes, with ranged GETs of at most 1 MiB each (plus ranges of 64 KiB from
each nominal cut to find its record boundary), never whole objects.

>>> import os, tempfile
>>> from feedline import recordio
>>> path = os.path.join(tempfile.mkdtemp(), "d.rec")
>>> with recordio.RecordIOWriter(path) as w:
...     _ = [w.write(bytes([i]) * 50) for i in range(10)]
>>> parts = [[rec[0] for rec in InputSplit(path, r, 3)] for r in range(3)]
>>> parts
[[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
>>> it = iter(InputSplit(path, 1, 3)); _ = next(it); state = it.get_state()
>>> it2 = InputSplit(path, 1, 3).iterator(state); [rec[0] for rec in it2]
[5, 6]
"""

from __future__ import annotations

import mmap
import os
import re
from collections.abc import Iterator, Sequence
from typing import Any

from feedline._internal.on_error import check_on_error
from feedline._internal.validate import non_negative_int, one_of, positive_int
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.exceptions import CorruptRecordError, StateError
from feedline.formats.recordio.stream import MAGIC_BYTES, Scan, Window, iter_records
from feedline.storage.cache import with_cache
from feedline.storage.fs import file_size, is_remote, open_ranged, read_range, strip_file_scheme

__all__ = ["InputSplit", "InputSplitIterator"]

_NEWLINES = re.compile(rb"[\r\n]+")
_LINE = re.compile(rb"([^\r\n]*)([\r\n]*)")
_CHUNK = 1 << 20
_SEEK_CHUNK = 1 << 16  # remote boundary search: ranged reads of this size


def _as_paths(paths: Any) -> list[str]:
    if isinstance(paths, (str, os.PathLike)):
        text = os.fspath(paths)
        return [p for p in text.split(";") if p] if isinstance(text, str) else [text]
    if isinstance(paths, Sequence):
        return [os.fspath(p) for p in paths]
    raise TypeError(f"`paths` must be a path, a ';'-separated string or a list of paths, got {paths!r}")


def _seek_recordio(path: str, local: int, size: int | None = None,
                   storage_options: dict | None = None) -> int:
    """Offset in ``path`` of the first record start at or after ``local`` (a multiple of
    4), stepping as dmlc-core's ``RecordIOSplitter::SeekRecordBegin``; the file size if
    there is none."""
    if is_remote(path):
        assert size is not None  # the caller passes the size it listed
        return _seek_recordio_remote(path, local, size, storage_options)
    with open(strip_file_scheme(path), "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        size = len(mm)
        cur = local
        while True:
            hit = mm.find(MAGIC_BYTES, cur)
            while hit >= 0 and (hit - local) & 3:
                hit = mm.find(MAGIC_BYTES, hit + 1)
            if hit < 0 or hit + 8 > size:
                return size
            cflag = int.from_bytes(mm[hit + 4 : hit + 8], "little") >> 29
            if cflag <= 1:
                return hit
            cur = hit + 8


def _seek_recordio_remote(path: str, local: int, size: int, so: dict | None) -> int:
    """:func:`_seek_recordio` for a URL, reading ranges of ``_SEEK_CHUNK`` bytes."""
    cur = local
    while cur < size:
        data = read_range(path, cur, min(cur + _SEEK_CHUNK, size), storage_options=so)
        p = data.find(MAGIC_BYTES)
        while p >= 0 and p & 3:  # cur - local is a multiple of 4, so is the chunk size
            p = data.find(MAGIC_BYTES, p + 1)
        if p < 0:
            cur += len(data)
            continue
        hit = cur + p
        if hit + 8 > size:
            return size
        word = data[p + 4 : p + 8] if p + 8 <= len(data) else read_range(
            path, hit + 4, hit + 8, storage_options=so)
        if int.from_bytes(word, "little") >> 29 <= 1:
            return hit
        cur = hit + 8
    return size


def _seek_text_remote(path: str, local: int, size: int, so: dict | None) -> int:
    """:func:`_seek_text` for a URL, reading ranges of ``_SEEK_CHUNK`` bytes."""
    cur = local
    while cur < size:
        data = read_range(path, cur, min(cur + _SEEK_CHUNK, size), storage_options=so)
        m = _NEWLINES.search(data)
        if m is None:
            cur += len(data)
            continue
        pos = cur + m.end()
        while m.end() == len(data) and pos < size:  # the run may go on in the next range
            data = read_range(path, pos, min(pos + _SEEK_CHUNK, size), storage_options=so)
            m = re.compile(rb"[\r\n]*").match(data)
            assert m is not None  # the pattern matches the empty string
            pos += m.end()
        return pos
    return size


def _seek_text(path: str, local: int, size: int | None = None,
               storage_options: dict | None = None) -> int:
    """Offset in ``path`` just past the first run of newline characters at or after
    ``local`` (dmlc-core's ``LineSplitter::SeekRecordBegin``); the file size if none."""
    if is_remote(path):
        assert size is not None  # the caller passes the size it listed
        return _seek_text_remote(path, local, size, storage_options)
    with open(strip_file_scheme(path), "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        m = _NEWLINES.search(mm, local)
        return len(mm) if m is None else m.end()


def _partition(
    files: list[tuple[str, int]], part_index: int, num_parts: int, fmt: str,
    storage_options: dict | None = None,
) -> tuple[int, int]:
    """``(begin, end)`` global offsets of part ``part_index`` of ``num_parts``."""
    starts = [0]
    for _, size in files:
        starts.append(starts[-1] + size)
    total = starts[-1]
    align = 4 if fmt == "recordio" else 1
    step = -(-total // num_parts)
    step = -(-step // align) * align
    begin = min(step * part_index, total)
    end = min(step * (part_index + 1), total)
    if begin == end:
        return begin, end
    seek = _seek_recordio if fmt == "recordio" else _seek_text

    def to_boundary(offset: int) -> int:
        if offset in starts:  # the first byte of a file (or the end of all data)
            return offset
        i = max(k for k in range(len(files)) if starts[k] <= offset)
        return starts[i] + seek(files[i][0], offset - starts[i], files[i][1], storage_options)

    return to_boundary(begin), to_boundary(end)


class InputSplit:
    """Part ``part_index`` of ``num_parts`` of record files read as one byte range.

    ``begin``/``end`` are the part's global byte offsets after moving to record
    boundaries (see the module docstring for the exact rule); iterating yields the
    records that start in ``[begin, end)``. Iterators carry the state
    ``{"type": "input_split", "offset": o, "index": i, ...}`` with ``o`` the global
    offset of the next record.

    Args:
        paths: a path, a list of paths, or MXNet's ``"a.rec;b.rec"`` string; the order
            given is the order of the byte range. No path raises ``ValueError``.
        part_index: the part to read, in ``0 .. num_parts - 1`` (else ``ValueError``).
        num_parts: how many parts the byte range is cut into, a positive int.
        format: ``"recordio"`` (the default) yields payloads (``bytes``); ``"text"``
            yields lines (``bytes`` without their newline characters). RecordIO files
            must have sizes that are multiples of 4 (MXNet refuses others too), else
            :class:`~feedline.exceptions.CorruptRecordError`.
        on_error: what damaged RecordIO data does: ``"raise"`` (the default), ``"skip"``
            or ``"warn"`` (see :mod:`feedline.recordio`).
        storage_options: options for fsspec when the paths are URLs (see the module
            docstring).
        cache_dir: read remote files through the node-local
            :class:`~feedline.storage.cache.ShardCache` in this folder, in blocks shared
            by every part and process on the node; ``None`` (the default): no cache.
        cache_limit: the cache's size limit in bytes (needs ``cache_dir``, else
            ``ValueError``).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "lines.txt")
    >>> with open(path, "w") as f: f.writelines(f"line{i}" + chr(10) for i in range(6))
    >>> parts = [InputSplit(path, r, 2, format="text") for r in range(2)]
    >>> [list(p) for p in parts]    # the cut at byte 18 moves past the next newline
    [[b'line0', b'line1', b'line2', b'line3'], [b'line4', b'line5']]
    >>> (parts[0].begin, parts[0].end, parts[1].begin, parts[1].end)
    (0, 24, 24, 36)
    """

    def __init__(
        self,
        paths: Any,
        part_index: int = 0,
        num_parts: int = 1,
        *,
        format: str = "recordio",
        on_error: str = "raise",
        storage_options: dict | None = None,
        cache_dir: str | os.PathLike | None = None,
        cache_limit: int | None = None,
    ) -> None:
        storage_options = with_cache(storage_options, cache_dir, cache_limit)
        self.storage_options = storage_options
        self.num_parts = positive_int("num_parts", num_parts)
        self.part_index = non_negative_int("part_index", part_index)
        if part_index >= num_parts:
            raise ValueError(
                f"`part_index` must be smaller than `num_parts` ({num_parts}), got {part_index}"
            )
        self.format = one_of("format", format, ("recordio", "text"))
        self.on_error = check_on_error(on_error)
        self.paths = _as_paths(paths)
        if not self.paths:
            raise ValueError("`paths` must name at least one file, got none")
        files = []
        for path in self.paths:
            size = file_size(path, storage_options=storage_options)
            if size == 0:
                continue
            if format == "recordio" and size % 4:
                raise CorruptRecordError(
                    f"file size {size} is not a multiple of 4: not a RecordIO file, or truncated",
                    path=path,
                    offset=size - size % 4,
                )
            files.append((path, size))
        self.files = files
        self.total_size = sum(size for _, size in files)
        self.begin, self.end = _partition(files, part_index, num_parts, format, storage_options)

    def __repr__(self) -> str:
        return (
            f"InputSplit({len(self.files)} files, part {self.part_index} of "
            f"{self.num_parts}, bytes [{self.begin}, {self.end}), format={self.format!r})"
        )

    def iterator(self, state: dict[str, Any] | None = None) -> InputSplitIterator:
        """A fresh iterator over this part.

        Args:
            state: a state from :meth:`InputSplitIterator.get_state` to resume from;
                ``None`` (the default) starts at the part's first record.
        """
        it = InputSplitIterator(self)
        if state is not None:
            it.set_state(state)
        return it

    def __iter__(self) -> InputSplitIterator:
        return self.iterator()


def _text_lines(
    files: list[tuple[str, int]], start: int, end: int, storage_options: dict | None = None,
) -> Iterator[tuple[bytes, int]]:
    """Yield ``(line, global offset after its newline run)`` for lines starting in
    ``[start, end)``; lines end at newline runs and at file ends."""
    base = 0
    for path, size in files:
        fstart, fend = base, base + size
        base = fend
        if fend <= start or fstart >= end:
            continue
        lo, hi = max(start, fstart) - fstart, min(end, fend) - fstart
        with open_ranged(path, "rb", storage_options=storage_options) as f:
            f.seek(lo)
            pending, pending_at = b"", lo
            while True:
                want = min(_CHUNK, hi - pending_at - len(pending))
                data = f.read(want) if want > 0 else b""
                eof = len(data) < want or pending_at + len(pending) + len(data) >= hi
                buf = pending + data if pending else data
                p = 0
                n = len(buf)
                while p < n:
                    m = _LINE.match(buf, p)
                    assert m is not None  # the pattern matches the empty string
                    if m.end() == n and not eof:
                        break  # the line or its newline run may go on in the next chunk
                    p = m.end()
                    if m.group(1):
                        yield m.group(1), fstart + pending_at + p
                pending, pending_at = buf[p:], pending_at + p
                if eof:
                    break


class InputSplitIterator(DatasetIterator[bytes]):
    """Iterator over one :class:`InputSplit` part; state is the global byte offset of the
    next record, the number of records read, and (RecordIO) damaged stretches skipped.

    Args:
        split: the part to read.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "lines.txt")
    >>> with open(path, "w") as f: f.writelines(w + chr(10) for w in ("ab", "cd", "ef"))
    >>> it = iter(InputSplit(path, format="text"))
    >>> type(it).__name__, next(it)
    ('InputSplitIterator', b'ab')
    >>> state = it.get_state()
    >>> state["offset"]
    3
    >>> list(InputSplit(path, format="text").iterator(state))
    [b'cd', b'ef']
    """

    def __init__(self, split: InputSplit) -> None:
        self.split = split
        self._offset = split.begin
        self._index = 0
        self._scan = Scan()
        self._win: Window | None = None
        self._gen: Iterator[tuple[bytes, int]] | None = None

    @property
    def skipped(self) -> int:
        return self._scan.skipped

    def _start(self) -> Iterator[tuple[bytes, int]]:
        split = self.split
        if split.format == "text":
            return _text_lines(split.files, self._offset, split.end, split.storage_options)
        self._win = Window(split.files, self._offset, split.end,
                           storage_options=split.storage_options, opener=open_ranged)
        return iter_records(self._win, split.on_error, self._index, self._scan)

    def __next__(self) -> bytes:
        if self._gen is None:
            self._gen = self._start()
        record, where = next(self._gen)
        self._offset = where if self._win is None else self._win.offset
        self._index += 1
        return record

    def get_state(self) -> dict[str, Any]:
        return {
            "type": "input_split",
            "part": [self.split.part_index, self.split.num_parts],
            "offset": self._offset,
            "index": self._index,
            "skipped": self._scan.skipped,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Continue from ``state``.

        Args:
            state: a dict :meth:`get_state` returned; a state of another part, or an
                offset outside this part's bytes, raises
                :class:`~feedline.exceptions.StateError`.
        """
        check_state(state, "input_split", ("offset", "index"))
        part = state.get("part")
        split = self.split
        if part is not None and list(part) != [split.part_index, split.num_parts]:
            raise StateError(
                f"state is for part {part[0]} of {part[1]}, this iterator reads part "
                f"{split.part_index} of {split.num_parts}"
            )
        offset = state["offset"]
        if not (isinstance(offset, int) and split.begin <= offset <= split.end):
            raise StateError(
                f"state offset {offset!r} lies outside this part's bytes [{split.begin}, {split.end}]"
            )
        self.close()
        self._offset = offset
        self._index = state["index"]
        self._scan.skipped = state.get("skipped", 0)

    def close(self) -> None:
        gen = getattr(self, "_gen", None)
        if gen is not None:
            gen.close()
            self._gen = None
        win = getattr(self, "_win", None)
        if win is not None:
            win.close()
            self._win = None
