"""Indexed record files read as one random-access dataset (index mode).

``indexed_records(paths)`` concatenates record files that have an index — RecordIO
with its ``.idx`` (built with :func:`feedline.recordio.build_index` or ``feedline index``)
and TFRecord with its sidecar index (:func:`feedline.tfrecord.build_index`) — into one
:class:`~feedline.dataset.base.RandomAccessDataset` of payloads (``bytes``): item ``i`` is
record ``i`` counted across the files in order. Being random access, it supports
``global_shuffle`` and exact ``shard``/``split`` with equal counts per rank, and worker
processes fetch records themselves by index. Files are opened lazily, once per process.

>>> import os, tempfile
>>> from feedline import recordio
>>> d = tempfile.mkdtemp(); path = os.path.join(d, "a.rec")
>>> with recordio.RecordIOWriter(path) as w:
...     for i in range(3): _ = w.write(b"r%d" % i)
>>> _ = recordio.build_index(path)
>>> indexed_records([path]).global_shuffle(seed=0).shard(0, 1).to_list() != []
True
>>> indexed_records([path])[2]
b'r2'
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Sequence
from typing import Any

from feedline._internal.validate import one_of
from feedline.dataset.base import BuildContext, RandomAccessDataset

__all__ = ["indexed_records", "IndexedRecordFiles", "read_records", "record_reader"]


def _indexed_format(path: str) -> str:
    from feedline.formats.detect import detect_format

    fmt, compression = detect_format(path)
    if fmt not in ("recordio", "tfrecord", "empty") or compression is not None:
        kind = fmt if compression is None else f"{compression}-compressed {fmt}"
        raise ValueError(f"{path}: index mode needs uncompressed TFRecord or RecordIO, got {kind}")
    return fmt


def _open(path: str, fmt: str, index: str | None = None, scan: bool = False) -> Any:
    if fmt == "empty" or os.path.getsize(path) == 0:
        return ()
    if fmt == "recordio":
        from feedline.formats.recordio import IndexedRecordIO, default_idx_path

        if index is not None and not os.path.isfile(index):
            raise FileNotFoundError(
                f"index {index!r} for {path!r} does not exist; leave the index path out "
                "to scan the file, or build it with feedline.recordio.build_index"
            )
        idx = index or default_idx_path(path)
        if not os.path.exists(idx):
            if scan:
                return _scan_recordio(path)
            raise FileNotFoundError(
                f"{path} has no index {idx}; build it with `feedline index {path}`"
            )
        return IndexedRecordIO(idx, path, "r")
    from feedline.formats.tfrecord import TFRecordFile

    return TFRecordFile(path, index_path=index)


def _scan_recordio(path: str) -> Any:
    """An ``IndexedRecordIO`` over ``path`` from one scan of its records (no ``.idx``
    file is written beside it; the temporary one is gone once read)."""
    import tempfile

    from feedline.formats import recordio

    with tempfile.TemporaryDirectory(prefix="feedline-scan-") as tmp:
        idx = os.path.join(tmp, "scan.idx")
        recordio.build_index(path, idx)
        reader: Any = recordio.IndexedRecordIO(idx, path, "r")
    reader.idx_path = f"{path} (scanned, no .idx)"
    reader.scanned = True  # the offsets live only in this object
    return reader


class IndexedRecordFiles(RandomAccessDataset):
    """Random access over the records of several indexed files, in file order.

    ``starts[i]`` is the position of file ``i``'s first record; :meth:`locate` maps a
    position to ``(path, record number in the file)``. Every file is opened (and counted)
    when this is made.

    Args:
        paths: the files, in order.
        formats: each file's format, one per file: ``"recordio"``, ``"tfrecord"`` or
            ``"empty"``.
        index_paths: each file's index, one per file (another count raises
            ``ValueError``); ``None`` (for all, or for one file) means the default:
            ``x.idx`` beside ``x.rec``, ``<path>.index`` for TFRecord.
        scan: a RecordIO file without an index is scanned once here (nothing written)
            and the offsets travel with the dataset into worker processes; ``False`` (the
            default) raises ``FileNotFoundError`` for a missing index.

    >>> import os, tempfile
    >>> from feedline import recordio
    >>> d = tempfile.mkdtemp()
    >>> paths = [os.path.join(d, f"{k}.rec") for k in "ab"]
    >>> for k, path in enumerate(paths):
    ...     with recordio.RecordIOWriter(path) as w:
    ...         for i in range(2 + k): _ = w.write(b"%d-%d" % (k, i))
    ...     _ = recordio.build_index(path)
    >>> ds = indexed_records(paths)
    >>> type(ds).__name__, len(ds), ds.starts, ds[3]
    ('IndexedRecordFiles', 5, [0, 2], b'1-1')
    >>> os.path.basename(ds.locate(3)[0]), ds.locate(3)[1]
    ('b.rec', 1)
    """

    def __init__(self, paths: Sequence[str], formats: Sequence[str], *,
                 index_paths: Sequence[str | None] | None = None, scan: bool = False) -> None:
        super().__init__()
        self._paths = list(paths)
        self._formats = list(formats)
        self._index_paths = list(index_paths) if index_paths is not None else [None] * len(self._paths)
        if len(self._index_paths) != len(self._paths):
            raise ValueError(f"`index_paths` names {len(self._index_paths)} index(es) for "
                             f"{len(self._paths)} file(s)")
        self._scan = bool(scan)
        self._keep: set[int] = set()  # files scanned here: their readers travel when pickled
        self._files: list[Any] = [None] * len(self._paths)
        self._starts = [0]
        for i in range(len(self._paths)):
            self._starts.append(self._starts[-1] + len(self._file(i)))
            if getattr(self._files[i], "scanned", False):
                self._keep.add(i)

    def _file(self, i: int) -> Any:
        f = self._files[i]
        if f is None:
            f = self._files[i] = _open(self._paths[i], self._formats[i], self._index_paths[i],
                                       self._scan)
        return f

    @property
    def name(self) -> str:
        return f"records({len(self._paths)} files)"

    @property
    def paths(self) -> list[str]:
        """The files, in order."""
        return list(self._paths)

    @property
    def starts(self) -> list[int]:
        """Position of each file's first record (one entry per file)."""
        return self._starts[:-1]

    def locate(self, position: int) -> tuple[str, int]:
        """``(path, record number in that file)`` of record ``position``.

        Args:
            position: a record position, ``0 <= position < len(self)``.
        """
        i = bisect.bisect_right(self._starts, position) - 1
        i = min(i, len(self._paths) - 1)
        return self._paths[i], position - self._starts[i]

    def __len__(self) -> int:
        return self._starts[-1]

    def _getitem(self, index: int) -> bytes:
        index %= self._starts[-1]
        i = bisect.bisect_right(self._starts, index) - 1
        return self._file(i)[index - self._starts[i]]

    def _release(self) -> None:
        for i, f in enumerate(self._files):
            if hasattr(f, "close"):
                f.close()  # a scanned reader keeps its offsets and reopens on the next read
                if i not in self._keep:
                    self._files[i] = None

    def __getstate__(self) -> dict:  # reopen files in worker processes
        state = self.__dict__.copy()
        state["_files"] = [f if i in self._keep else None for i, f in enumerate(self._files)]
        return state


def indexed_records(paths: Sequence[str | os.PathLike], *, format: str = "auto") -> IndexedRecordFiles:
    """One random-access dataset over the records of indexed files; see the module docstring.

    Args:
        paths: the files, in order (at least one, else ``ValueError``); each needs its
            index (see :class:`IndexedRecordFiles`).
        format: ``"auto"`` (the default) finds each file's format from its content and
            raises ``ValueError`` for anything but uncompressed TFRecord or RecordIO;
            ``"recordio"`` or ``"tfrecord"`` names it. Another value raises ``ValueError``.

    >>> import os, tempfile
    >>> from feedline import tfrecord
    >>> path = os.path.join(tempfile.mkdtemp(), "a.tfrecord")
    >>> with tfrecord.TFRecordWriter(path) as w:
    ...     for i in range(3): w.write(b"t%d" % i)
    >>> _ = tfrecord.build_index(path)
    >>> ds = indexed_records([path])
    >>> len(ds), ds[1], ds.to_list()
    (3, b't1', [b't0', b't1', b't2'])
    """
    one_of("format", format, ("auto", "recordio", "tfrecord"))
    names = [os.fspath(p) for p in paths]
    if not names:
        raise ValueError("`paths` must name at least one file, got none")
    formats = [_indexed_format(p) if format == "auto" else format for p in names]
    return IndexedRecordFiles(names, formats)


def record_reader(path: str, *, format: str = "auto", on_error: str = "raise",
                  storage_options: dict | None = None) -> Any:
    """A resumable iterator (:class:`~feedline.dataset.iterator.DatasetIterator`) over the
    records of one file: payload ``bytes`` for TFRecord (any compression) and RecordIO,
    lines (``bytes``) for text and CSV, samples (dicts, see :mod:`feedline.webdataset`)
    for a ``tar`` shard.

    Args:
        path: the file (a local path or an fsspec URL).
        format: ``"auto"`` (the default) looks at the file's content; else
            ``"tfrecord"``, ``"recordio"``, ``"text"``, ``"csv"`` or ``"tar"``. Another
            value raises ``ValueError``.
        on_error: what a damaged record does: ``"raise"`` (the default), ``"skip"`` or
            ``"warn"`` (not used for text and CSV).
        storage_options: options for fsspec when ``path`` is a URL.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "lines.txt")
    >>> with open(path, "w") as f: f.writelines(line + chr(10) for line in "abc")
    >>> it = record_reader(path, format="text")
    >>> next(it), next(it)
    (b'a', b'b')
    >>> again = record_reader(path, format="text")    # resume where ``it`` stands
    >>> again.set_state(it.get_state())
    >>> list(again)
    [b'c']
    """
    if format == "auto":
        from feedline.formats.detect import detect_format as sniff

        format, _ = sniff(path, storage_options=storage_options)
    if format == "tfrecord":
        from feedline.formats import tfrecord

        return tfrecord.read(path, on_error=on_error, storage_options=storage_options)
    if format == "recordio":
        from feedline.formats import recordio

        return recordio.read(path, on_error=on_error, storage_options=storage_options)
    if format in ("text", "csv"):
        from feedline.formats import text

        return text.read_lines(path, storage_options=storage_options)
    if format == "tar":
        from feedline.formats import webdataset

        ds = webdataset.read(path, rank=0, world_size=1, on_error=on_error,
                             storage_options=storage_options)
        return ds._make_iterator(BuildContext())
    if format == "empty":
        from feedline.dataset.base import IndexIterator
        from feedline.dataset.sources import SequenceDataset

        return IndexIterator(SequenceDataset([], name="empty"), 0)
    raise ValueError(f"{path}: cannot read records of format {format!r}")


def read_records(paths: Any, *, format: str = "auto", cycle_length: int | None = None,
                 num_parallel_reads: int | None = None, on_error: str = "raise",
                 storage_options: dict | None = None) -> Any:
    """The records of several files as one resumable stream (TF's
    ``TFRecordDataset(filenames, num_parallel_reads=...)`` for every record format).

    Files are read ``cycle_length`` at a time (default: one after the other), interleaved
    one record at a time.

    Args:
        paths: a path, a glob, a URL (``s3://...``) or a list of them.
        format: ``"auto"`` (each file's format found from its content), ``"tfrecord"``,
            ``"recordio"``, ``"text"``, ``"csv"`` or ``"tar"``.
        cycle_length: files open at once, read round robin (default 1).
        num_parallel_reads: read each open file this many records ahead in a thread.
        on_error: ``"raise"`` on a damaged record, or ``"skip"`` it (counted).
        storage_options: options for fsspec (and ``cache_dir`` for a local cache).

    >>> import os, tempfile
    >>> from feedline import tfrecord
    >>> d = tempfile.mkdtemp()
    >>> for f in range(2):
    ...     with tfrecord.TFRecordWriter(os.path.join(d, f"{f}.tfrecord")) as w:
    ...         for i in range(2): w.write(b"%d-%d" % (f, i))
    >>> read_records(os.path.join(d, "*.tfrecord"), cycle_length=2).to_list()
    [b'0-0', b'1-0', b'0-1', b'1-1']
    """
    from feedline.dataset.base import Dataset
    from feedline.io.files import files

    listed = files(paths, storage_options=storage_options)

    def open_file(path: str) -> Dataset:
        return Dataset.from_source(
            lambda: record_reader(path, format=format, on_error=on_error,
                                  storage_options=storage_options),
            name=f"records({os.path.basename(path)})")

    return listed.interleave(open_file, cycle_length=cycle_length or 1,
                             num_parallel_reads=num_parallel_reads)
