"""Parquet and Arrow IPC files as one table cut into *fragments*.

A fragment is the unit a file is stored and read in: a row group of a Parquet file, a
record batch of an Arrow IPC file. :class:`TableFiles` lists the fragments of several
files in order (file by file), knows how many rows each holds, and reads one fragment
(only the selected ``columns``) on request. It is what the readers of
:mod:`feedline.formats.parquet.reader` are built on.

Formats, recognised by their content (``format="auto"``):

* **Parquet** (starts with ``PAR1``): the footer is read once when the file is opened;
  a row group is decoded when it is read.
* **Arrow IPC file format** (starts with ``ARROW1``; ``.arrow``/``.feather`` files
  written by ``pyarrow.ipc.new_file`` or Feather v2): record batches are read by index.
* **Arrow IPC stream format** (what ``datasets.Dataset.save_to_disk`` writes as
  ``data-00000-of-00001.arrow``): the stream is read through once at opening; a local
  file is memory-mapped, so this costs no copy of the data.

Local files are opened directly (Arrow files memory-mapped); URLs (``s3://...``,
``memory://...``) are read by byte ranges (:func:`feedline.storage.fs.open_ranged`): the
footer, then the row groups or record batches asked for, never the whole file (through
the node's cache when ``storage_options`` has a ``"cache_dir"``); an Arrow IPC stream,
which has no footer, is read through once.

Damage: a file that is not Parquet or Arrow, or whose footer or stream cannot be read
(a truncated download), raises :class:`~feedline.exceptions.CorruptRecordError` naming
the file when it is opened; with ``on_error="skip"`` or ``"warn"`` the file is left out
instead and listed in :attr:`TableFiles.skipped`. A row group that fails to decode
raises ``CorruptRecordError`` naming the file and the row group (``read_fragments``
can skip and count it instead; rows and fixed-size batches cannot, since their count
is fixed when the files are opened).

>>> import os, tempfile, pyarrow as pa, pyarrow.parquet as pq
>>> path = os.path.join(tempfile.mkdtemp(), "a.parquet")
>>> pq.write_table(pa.table({"x": [1, 2, 3], "y": ["a", "b", "c"]}), path, row_group_size=2)
>>> files = TableFiles([path], columns=["x"])
>>> files.fragment_rows, files.num_rows, files.column_names
([2, 1], 3, ['x'])
>>> files.read_fragment(1).column("x").to_pylist()
[3]
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from typing import Any

from feedline._internal.on_error import check_on_error, report
from feedline._internal.optional import require
from feedline._internal.validate import one_of, positive_int
from feedline.exceptions import CorruptRecordError, MissingFeatureError, RemoteReadError
from feedline.storage.fs import is_remote, open_file, open_ranged, strip_file_scheme

__all__ = ["TableFiles", "detect_table_format", "FORMATS"]

logger = logging.getLogger(__name__)

FORMATS = ("auto", "parquet", "arrow")
"""Accepted values of ``format``: ``"arrow"`` covers both IPC file and stream formats."""


def _pa() -> Any:
    return require("pyarrow", extra="parquet")


def detect_table_format(head: bytes) -> str | None:
    """``"parquet"``, ``"arrow_file"``, ``"arrow_stream"`` or ``None`` from a file's
    first bytes.

    >>> detect_table_format(b"PAR1...."), detect_table_format(b"ARROW1\\x00\\x00")
    ('parquet', 'arrow_file')
    >>> detect_table_format(b"\\xff\\xff\\xff\\xff\\x10\\x00\\x00\\x00"), detect_table_format(b"{}")
    ('arrow_stream', None)
    """
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith(b"ARROW1"):
        return "arrow_file"
    if head.startswith(b"\xff\xff\xff\xff"):
        return "arrow_stream"  # the IPC continuation marker of every stream message
    return None


class _Handle:
    """One opened file: how to read its fragments."""

    def __init__(self, kind: str, source: Any, reader: Any, batches: Any) -> None:
        self.kind, self.source, self.reader, self.batches = kind, source, reader, batches

    def close(self) -> None:
        closer = getattr(self.source, "close", None)
        if closer is not None:
            closer()


class TableFiles:
    """The fragments of Parquet / Arrow IPC files; see the module docstring.

    ``paths``: file paths or URLs, read in this order. ``columns``: the columns to read
    (``None``: all, in the file's order); a missing one raises
    :class:`~feedline.exceptions.MissingFeatureError` naming it and the file.
    ``format``: ``"auto"`` (by content), ``"parquet"`` or ``"arrow"``.
    ``on_error``: what to do with a file that cannot be opened (see the module docstring).
    ``min_fragment_rows``: join consecutive record batches of an Arrow file into one
    fragment until it holds at least this many rows (the last fragment of a file may
    hold fewer); fewer, larger fragments read faster in order — the record batches of
    ``save_to_disk`` hold 1,000 rows — but cost more per random access. Parquet row
    groups are never joined.

    Attributes: ``paths`` (the files kept), ``fragment_rows`` (rows per fragment, all
    files in order), ``fragment_file`` (the file index of each fragment),
    ``fragment_local`` and ``fragment_span`` (its first row group / record batch in that
    file, and how many record batches it joins), ``starts``
    (first row of each fragment, plus the total at the end), ``num_rows``, ``schema``
    (the selected columns' ``pyarrow.Schema``), ``column_names``, ``skipped`` (list of
    ``(path, message)`` for files left out under ``on_error``).

    At most :attr:`max_open_files` files stay open (least recently used closed first;
    a reopened Parquet file reads its footer again, an Arrow stream is read through
    again). Picklable: open files are dropped and reopened lazily in the process that
    reads. Reads are serialised by a lock, so threads may share one instance.

    >>> import os, tempfile, numpy as np, pyarrow as pa, pyarrow.parquet as pq
    >>> path = os.path.join(tempfile.mkdtemp(), "a.parquet")
    >>> pq.write_table(pa.table({"x": np.arange(5), "s": list("abcde")}), path, row_group_size=2)
    >>> files = TableFiles([path], columns=["x"])
    >>> files.num_rows, files.num_fragments, files.fragment_rows, files.starts, files.column_names
    (5, 3, [2, 2, 1], [0, 2, 4, 5], ['x'])
    >>> files.read_fragment(1).column("x").to_pylist()
    [2, 3]
    >>> files.close()
    """

    #: files kept open at once
    max_open_files = 32

    def __init__(self, paths: Sequence[str | os.PathLike], *, columns: Sequence[str] | None = None,
                 format: str = "auto", on_error: str = "raise", min_fragment_rows: int = 1,
                 storage_options: dict | None = None) -> None:
        _pa()
        one_of("format", format, FORMATS)
        self.min_fragment_rows = positive_int("min_fragment_rows", min_fragment_rows)
        self._on_error = check_on_error(on_error)
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        names: list[str] = [os.fspath(p) for p in paths]
        if not names:
            raise ValueError("`paths` must name at least one file, got none")
        if columns is not None:
            if isinstance(columns, str) or not all(isinstance(c, str) for c in columns):
                raise TypeError(f"`columns` must be a list of column names, got {columns!r}")
            columns = list(columns)
        self.columns = columns
        self.format = format
        self.storage_options = storage_options
        self.paths: list[str] = []
        self.skipped: list[tuple[str, str]] = []
        self._kinds: list[str] = []
        self._handles: list[_Handle | None] = []
        self.fragment_rows: list[int] = []
        self.fragment_file: list[int] = []
        self.fragment_local: list[int] = []
        self.fragment_span: list[int] = []
        self.schema: Any = None
        self._lock = threading.Lock()
        self._open_order: list[int] = []
        for path in names:
            try:
                handle = self._open(path, None)
                counts = self._counts(handle)
                schema = self._check_schema(path, handle)
            except CorruptRecordError as exc:
                report(exc, self._on_error, stacklevel=3)
                self.skipped.append((path, str(exc)))
                logger.info("left out %s: %s", path, exc)
                continue
            if self.schema is None:
                self.schema = schema
            elif not schema.equals(self.schema):
                raise ValueError(
                    f"{path}: its columns {schema} differ from the first file's {self.schema}"
                )
            file_index = len(self.paths)
            self.paths.append(path)
            self._kinds.append(handle.kind)
            self._handles.append(handle)
            self._note_open(file_index)
            for local, span, n in self._group(handle.kind, counts):
                self.fragment_rows.append(n)
                self.fragment_file.append(file_index)
                self.fragment_local.append(local)
                self.fragment_span.append(span)
        if self.schema is None:
            raise CorruptRecordError(
                f"none of the {len(names)} files could be read: {self.skipped[0][1]}",
                path=self.skipped[0][0])
        self.starts = [0]
        for n in self.fragment_rows:
            self.starts.append(self.starts[-1] + n)

    # ------------------------------------------------------------------ opening
    @property
    def num_rows(self) -> int:
        """Rows in all fragments."""
        return self.starts[-1]

    @property
    def num_fragments(self) -> int:
        """Row groups / record batches in all files."""
        return len(self.fragment_rows)

    @property
    def column_names(self) -> list[str]:
        """Names of the columns read, in order."""
        return list(self.schema.names)

    def _open(self, path: str, kind: str | None) -> _Handle:
        pa = _pa()
        local = not is_remote(path)
        if local:
            source: Any = pa.memory_map(strip_file_scheme(path), "r")
        else:
            source = open_ranged(path, "rb", storage_options=self.storage_options)
        try:
            if kind is None:
                head = source.read(8)
                source.seek(0)
                kind = detect_table_format(head)
                if kind is None or (self.format == "parquet" and kind != "parquet") or (
                        self.format == "arrow" and kind == "parquet"):
                    expected = "Parquet or Arrow IPC" if self.format == "auto" else self.format
                    raise CorruptRecordError(
                        f"not a {expected} file (starts with {head[:8]!r})", path=path)
            if not local and kind == "arrow_stream":  # read through once: buffered, not by ranges
                source.close()
                source = open_file(path, "rb", storage_options=self.storage_options)
            return self._reader(path, kind, source)
        except BaseException:
            source.close()
            raise

    def _reader(self, path: str, kind: str, source: Any) -> _Handle:
        pa = _pa()
        try:
            if kind == "parquet":
                pq = require("pyarrow.parquet", extra="parquet")
                return _Handle(kind, source, pq.ParquetFile(source), None)
            if kind == "arrow_file":
                return _Handle(kind, source, pa.ipc.open_file(source), None)
            reader = pa.ipc.open_stream(source)
            return _Handle(kind, source, reader, list(reader))
        except (pa.ArrowException, OSError, ValueError) as exc:
            if isinstance(exc, (FileNotFoundError, RemoteReadError)):
                raise
            what = {"parquet": "Parquet", "arrow_file": "Arrow IPC file",
                    "arrow_stream": "Arrow IPC stream"}[kind]
            raise CorruptRecordError(f"damaged or truncated {what}: {exc}", path=path) from exc

    def _counts(self, handle: _Handle) -> list[int]:
        if handle.kind == "parquet":
            meta = handle.reader.metadata
            return [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
        if handle.kind == "arrow_file":
            return [handle.reader.get_batch(i).num_rows
                    for i in range(handle.reader.num_record_batches)]
        return [b.num_rows for b in handle.batches]

    def _group(self, kind: str, counts: list[int]) -> list[tuple[int, int, int]]:
        """``(first record batch, number of batches, rows)`` of each fragment of a file:
        consecutive Arrow record batches joined until ``min_fragment_rows``."""
        if kind == "parquet" or self.min_fragment_rows <= 1:
            return [(i, 1, n) for i, n in enumerate(counts)]
        groups, first, rows = [], 0, 0
        for i, n in enumerate(counts):
            rows += n
            if rows >= self.min_fragment_rows:
                groups.append((first, i - first + 1, rows))
                first, rows = i + 1, 0
        if first < len(counts):
            groups.append((first, len(counts) - first, rows))
        return groups

    def _check_schema(self, path: str, handle: _Handle) -> Any:
        pa = _pa()
        if handle.kind == "parquet":
            schema = handle.reader.schema_arrow
        else:
            schema = handle.reader.schema
        if self.columns is None:
            return pa.schema(list(schema), metadata=None)
        fields = []
        for name in self.columns:
            index = schema.get_field_index(name)
            if index < 0:
                raise MissingFeatureError(
                    f"no column {name!r}; the file has {schema.names}", path=path)
            fields.append(schema.field(index))
        return pa.schema(fields)

    def _note_open(self, file_index: int) -> None:
        """Mark ``file_index`` most recently used; close the least recently used file
        beyond :attr:`max_open_files`."""
        order = self._open_order
        if file_index in order:
            order.remove(file_index)
        order.append(file_index)
        while len(order) > self.max_open_files:
            oldest = order.pop(0)
            handle, self._handles[oldest] = self._handles[oldest], None
            if handle is not None:
                handle.close()

    def _handle(self, file_index: int) -> _Handle:
        handle = self._handles[file_index]
        if handle is None:
            path = self.paths[file_index]
            handle = self._handles[file_index] = self._open(path, self._kinds[file_index])
        if self._open_order[-1:] != [file_index]:
            self._note_open(file_index)
        return handle

    # ------------------------------------------------------------------ reading
    def read_fragment(self, k: int) -> Any:
        """Fragment ``k`` (counted over all files) as a ``pyarrow.Table`` of the selected
        columns; a row group that does not decode raises
        :class:`~feedline.exceptions.CorruptRecordError` naming the file and row group."""
        pa = _pa()
        file_index, local, span = self.fragment_file[k], self.fragment_local[k], self.fragment_span[k]
        with self._lock:
            handle = self._handle(file_index)  # a file gone since: FileNotFoundError
            try:
                if handle.kind == "parquet":
                    table = handle.reader.read_row_group(local, columns=self.columns)
                else:
                    get = (handle.reader.get_batch if handle.kind == "arrow_file"
                           else handle.batches.__getitem__)
                    table = pa.Table.from_batches([get(j) for j in range(local, local + span)],
                                                  schema=handle.reader.schema)
                    if self.columns is not None:
                        table = table.select(self.columns)
            except (pa.ArrowException, OSError) as exc:
                if isinstance(exc, RemoteReadError):  # the network, not the data
                    raise
                unit = "row group" if handle.kind == "parquet" else "record batch"
                raise CorruptRecordError(f"{unit} {local} does not decode: {exc}",
                                         path=self.paths[file_index]) from exc
        if table.num_rows != self.fragment_rows[k]:
            raise CorruptRecordError(
                f"fragment {local} has {table.num_rows} rows, its metadata says "
                f"{self.fragment_rows[k]}", path=self.paths[file_index])
        return table

    def close(self) -> None:
        """Close every open file (they reopen on the next read)."""
        with self._lock:
            for i, handle in enumerate(self._handles):
                if handle is not None:
                    self._handles[i] = None
                    handle.close()
            self._open_order = []

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_handles"] = [None] * len(self.paths)
        state["_open_order"] = []
        del state["_lock"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
