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
raises ``CorruptRecordError`` naming the file, the row group or record batch (as the
record) and its byte offset where the format gives one (``read_fragments`` can skip and
count it instead; rows and fixed-size batches cannot, since their count is fixed when
the files are opened).

Every fragment is validated before anything looks at its values
(``RecordBatch.validate(full=True)``: offsets, lengths, UTF-8, dictionary indices
inside their buffers), so one flipped byte of a memory-mapped Arrow file is a
``CorruptRecordError``, never a crashed process. Each reader has one error boundary
(:func:`damage_as`): whatever pyarrow or the conversion to numpy raises about the
bytes (``ArrowInvalid``, ``ArrowIndexError``, pyarrow's ``OSError`` for a bad
flatbuffer, ``UnicodeDecodeError``, ``MemoryError`` for an impossible size) becomes a
feedline error naming file, record and offset, under every ``on_error``; a missing or
unreadable file (``FileNotFoundError``, ``PermissionError``) stays what it is.

A Parquet row group of more than ``max_fragment_rows`` rows (default 1,048,576, pyarrow's
default row group size) is read as several fragments of at most that many rows each,
decoded in bounded slices, so a small file holding one 50-million-row group never costs
the memory of the whole group to read one row; reading the slices in order decodes
each once.

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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from feedline._internal.on_error import check_on_error, report
from feedline._internal.optional import require
from feedline._internal.validate import one_of, positive_int
from feedline.exceptions import (
    CorruptRecordError,
    DataError,
    DecodeError,
    FeedlineError,
    MissingFeatureError,
)
from feedline.storage.fs import is_remote, open_file, open_ranged, strip_file_scheme

__all__ = ["TableFiles", "detect_table_format", "damage_as", "FORMATS", "MAX_FRAGMENT_ROWS"]

logger = logging.getLogger(__name__)

FORMATS = ("auto", "parquet", "arrow")
"""Accepted values of ``format``: ``"arrow"`` covers both IPC file and stream formats."""


def _pa() -> Any:
    return require("pyarrow", extra="parquet")


#: the default of ``max_fragment_rows``: larger Parquet row groups are read in slices
MAX_FRAGMENT_ROWS = 1 << 20


def _data_errors() -> tuple[type[BaseException], ...]:
    """What the bytes of a file make pyarrow or numpy raise (pyarrow raises a plain
    ``OSError`` without ``errno`` for bytes it cannot parse, e.g. a bad flatbuffer or
    thrift header; one with ``errno`` is the file system's)."""
    return (_pa().ArrowException, OSError, ValueError, IndexError, KeyError, TypeError,
            OverflowError, MemoryError, EOFError, UnicodeError)


@contextmanager
def damage_as(path: str, what: str, *, index: int | None = None, offset: int | None = None,
              error: type[DataError] = CorruptRecordError) -> Iterator[None]:
    """The error boundary of a table reader: inside it, an exception about the data
    (pyarrow's own, its ``OSError`` without ``errno``, ``ValueError``,
    ``UnicodeDecodeError``, ``MemoryError``, ...) is raised again as ``error``
    ``"<what>: <exception>"``, from the original; feedline's own errors and the file
    system's (``FileNotFoundError``) pass unchanged.

    Args:
        path: the file to name in the error.
        what: what went wrong, the message's start (e.g. ``"row group 2 does not
            decode"``).
        index: the record (row group / record batch) to name; ``None`` names none.
        offset: the byte offset to name; ``None`` names none.
        error: the feedline error class raised,
            :class:`~feedline.exceptions.CorruptRecordError` by default.

    >>> with damage_as("t.parquet", "row group 2 does not decode", index=2, offset=4):
    ...     raise ValueError("Offset invariant failure: 7 > 3")
    Traceback (most recent call last):
    ...
    feedline.exceptions.CorruptRecordError: t.parquet: record 2 at byte 4: row group 2 does not decode: ValueError: Offset invariant failure: 7 > 3
    """
    try:
        yield
    except FeedlineError:
        raise
    except _data_errors() as exc:
        if isinstance(exc, OSError) and exc.errno is not None:
            raise  # a missing or unreadable file, not damaged bytes
        text = str(exc)
        if len(text) > 300:
            text = text[:300] + "..."
        if isinstance(exc, MemoryError):
            text = f"{text} (a size in the file is damaged, or the data is too large to hold)"
        raise error(f"{what}: {type(exc).__name__}: {text}", path=path, index=index,
                    offset=offset) from exc


def detect_table_format(head: bytes) -> str | None:
    """``"parquet"``, ``"arrow_file"``, ``"arrow_stream"`` or ``None`` from a file's
    first bytes.

    Args:
        head: the file's first bytes (8 are enough): ``PAR1`` is Parquet, ``ARROW1`` an
            Arrow IPC file, the continuation marker ``ff ff ff ff`` an Arrow IPC stream.

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

    def __init__(self, kind: str, source: Any, reader: Any, batches: Any,
                 offsets: list[int] | None = None) -> None:
        self.kind, self.source, self.reader, self.batches = kind, source, reader, batches
        self.offsets = offsets  # byte offset of each record batch (a stream's)
        self.cursor: list | None = None  # a sliced row group read in order (see _slice)

    def close(self) -> None:
        closer = getattr(self.source, "close", None)
        if closer is not None:
            closer()


class TableFiles:
    """The fragments of Parquet / Arrow IPC files; see the module docstring.

    Args:
        paths: file paths or URLs (or one), read in this order; none raises
            ``ValueError``. Files whose columns differ from the first file's raise
            ``ValueError``.
        columns: the columns to read; ``None`` (the default) reads all, in the file's
            order. A missing one raises :class:`~feedline.exceptions.MissingFeatureError`
            naming it and the file; a str or non-str names raise ``TypeError``.
        format: ``"auto"`` (the default: by content), ``"parquet"`` or ``"arrow"`` (IPC
            file or stream); anything else raises ``ValueError``.
        on_error: what to do with a file that cannot be opened: ``"raise"`` (the
            default), or ``"skip"``/``"warn"`` to leave it out and list it in
            ``skipped`` (see the module docstring). If no file can be read,
            :class:`~feedline.exceptions.CorruptRecordError` is raised anyway.
        min_fragment_rows: join consecutive record batches of an Arrow file into one
            fragment until it holds at least this many rows (the last fragment of a file
            may hold fewer); fewer, larger fragments read faster in order — the record
            batches of ``save_to_disk`` hold 1,000 rows — but cost more per random
            access. Parquet row groups are never joined. Default 1.
        storage_options: passed to fsspec for URLs; with a ``"cache_dir"`` the byte
            ranges are read through the node's cache.
        max_fragment_rows: a Parquet row group of more rows is cut into fragments of at
            most this many (default :data:`MAX_FRAGMENT_ROWS`; see the module docstring).

    Attributes: ``paths`` (the files kept), ``fragment_rows`` (rows per fragment, all
    files in order), ``fragment_file`` (the file index of each fragment),
    ``fragment_local`` and ``fragment_span`` (its first row group / record batch in that
    file, and how many record batches it joins), ``fragment_row`` (its first row inside
    that row group: non-zero for the later slices of a large one), ``starts``
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
                 storage_options: dict | None = None,
                 max_fragment_rows: int = MAX_FRAGMENT_ROWS) -> None:
        _pa()
        one_of("format", format, FORMATS)
        self.min_fragment_rows = positive_int("min_fragment_rows", min_fragment_rows)
        self.max_fragment_rows = positive_int("max_fragment_rows", max_fragment_rows)
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
        self.fragment_row: list[int] = []
        self.schema: Any = None
        self._lock = threading.Lock()
        self._open_order: list[int] = []
        for path in names:
            handle = None
            try:
                handle = self._open(path, None)
                counts = self._counts(path, handle)
                schema = self._check_schema(path, handle)
            except CorruptRecordError as exc:
                if handle is not None:
                    handle.close()
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
            for local, span, n, row in self._group(handle.kind, counts):
                self.fragment_rows.append(n)
                self.fragment_file.append(file_index)
                self.fragment_local.append(local)
                self.fragment_span.append(span)
                self.fragment_row.append(row)
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
        what = {"parquet": "Parquet", "arrow_file": "Arrow IPC file",
                "arrow_stream": "Arrow IPC stream"}[kind]
        with damage_as(path, f"damaged or truncated {what}"):
            if kind == "parquet":
                pq = require("pyarrow.parquet", extra="parquet")
                return _Handle(kind, source, pq.ParquetFile(source), None)
            if kind == "arrow_file":
                reader = pa.ipc.open_file(source)
                return _Handle(kind, source, reader, None,
                               _batch_offsets(source, reader.num_record_batches))
            reader = pa.ipc.open_stream(source)
            batches, offsets = [], []
            while True:
                at = source.tell()
                try:
                    batches.append(reader.read_next_batch())
                except StopIteration:
                    break
                offsets.append(at)
            return _Handle(kind, source, reader, batches, offsets)

    def _counts(self, path: str, handle: _Handle) -> list[int]:
        with damage_as(path, "unreadable table metadata"):
            if handle.kind == "parquet":
                meta = handle.reader.metadata
                counts = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
            elif handle.kind == "arrow_file":
                counts = [handle.reader.get_batch(i).num_rows
                          for i in range(handle.reader.num_record_batches)]
            else:
                counts = [b.num_rows for b in handle.batches]
        for i, n in enumerate(counts):
            if n < 0:
                raise CorruptRecordError(f"fragment {i} claims {n} rows", path=path, index=i)
        return counts

    def _group(self, kind: str, counts: list[int]) -> list[tuple[int, int, int, int]]:
        """``(first row group / record batch, number of batches, rows, first row)`` of
        each fragment of a file: consecutive Arrow record batches joined until
        ``min_fragment_rows``, Parquet row groups over ``max_fragment_rows`` cut."""
        if kind == "parquet":
            step = self.max_fragment_rows
            return [(i, 1, min(step, n - row), row) for i, n in enumerate(counts)
                    for row in (range(0, n, step) if n > step else (0,))]
        if self.min_fragment_rows <= 1:
            return [(i, 1, n, 0) for i, n in enumerate(counts)]
        groups, first, rows = [], 0, 0
        for i, n in enumerate(counts):
            rows += n
            if rows >= self.min_fragment_rows:
                groups.append((first, i - first + 1, rows, 0))
                first, rows = i + 1, 0
        if first < len(counts):
            groups.append((first, len(counts) - first, rows, 0))
        return groups

    def _check_schema(self, path: str, handle: _Handle) -> Any:
        pa = _pa()
        with damage_as(path, "unreadable schema"):
            if handle.kind == "parquet":
                schema = handle.reader.schema_arrow
            else:
                schema = handle.reader.schema
            schema.names  # noqa: B018 - names that are not UTF-8 fail here, not later
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
        """Fragment ``k`` as a ``pyarrow.Table`` of the selected columns, validated
        (``validate(full=True)``) before it is returned; a fragment that does not decode
        or validate raises :class:`~feedline.exceptions.CorruptRecordError` naming the
        file, the row group / record batch and its byte offset (where the format gives
        one).

        Args:
            k: the fragment's number counted over all files, from 0 to
                ``num_fragments - 1``.
        """
        pa = _pa()
        file_index, local, span = self.fragment_file[k], self.fragment_local[k], self.fragment_span[k]
        path, rows = self.paths[file_index], self.fragment_rows[k]
        with self._lock:
            handle = self._handle(file_index)  # a file gone since: FileNotFoundError
            unit = "row group" if handle.kind == "parquet" else "record batch"
            offset = self._offset(handle, local)
            with damage_as(path, f"{unit} {local} does not decode", index=local, offset=offset):
                if handle.kind == "parquet":
                    group_rows = handle.reader.metadata.row_group(local).num_rows
                    if group_rows > self.max_fragment_rows:
                        table = self._slice(handle, local, self.fragment_row[k], rows)
                    else:
                        table = handle.reader.read_row_group(local, columns=self.columns)
                    table.validate(full=True)
                else:
                    get = (handle.reader.get_batch if handle.kind == "arrow_file"
                           else handle.batches.__getitem__)
                    batches = [get(j) for j in range(local, local + span)]
                    if self.columns is not None:
                        batches = [b.select(self.columns) for b in batches]
                    for b in batches:  # before any value is looked at
                        b.validate(full=True)
                    table = pa.Table.from_batches(batches)
        if table.num_rows != rows:
            raise CorruptRecordError(
                f"fragment {local} has {table.num_rows} rows, its metadata says {rows}",
                path=path, index=local, offset=offset)
        return table

    def conversion_errors(self, k: int) -> Any:
        """The error boundary for converting fragment ``k`` (numpy arrays, Python
        values): what the conversion raises about the data becomes a
        :class:`~feedline.exceptions.DecodeError` naming file, row group / record batch
        and offset (see :func:`damage_as`).

        Args:
            k: the fragment's number counted over all files.
        """
        file_index, local = self.fragment_file[k], self.fragment_local[k]
        handle = self._handles[file_index]
        unit = "row group" if self._kinds[file_index] == "parquet" else "record batch"
        return damage_as(self.paths[file_index], f"{unit} {local} does not convert",
                         index=local, offset=None if handle is None else self._offset(handle, local),
                         error=DecodeError)

    @staticmethod
    def _offset(handle: _Handle, local: int) -> int | None:
        """Byte offset of record batch ``local`` of an Arrow file (noted when it was
        opened); ``None`` otherwise. (A Parquet column chunk's offsets are not asked for:
        pyarrow aborts the process on some damaged column metadata.)"""
        if handle.offsets is not None and 0 <= local < len(handle.offsets):
            return handle.offsets[local]
        return None

    def _slice(self, handle: _Handle, group: int, first: int, rows: int) -> Any:
        """Rows ``first .. first + rows - 1`` of Parquet row group ``group``, decoded in
        slices of ``max_fragment_rows``; reading the slices in order continues one
        decoder, a jump restarts it at the row group's start (decoding, not keeping,
        the rows before)."""
        pa = _pa()
        cur = handle.cursor
        if cur is None or cur[0] != group or cur[1] != first:
            it = handle.reader.iter_batches(batch_size=self.max_fragment_rows,
                                            row_groups=[group], columns=self.columns)
            cur = handle.cursor = [group, 0, it, None]
            _take(cur, first)
        got = _take(cur, rows)
        if not got:
            return pa.Table.from_batches([], schema=self.schema)
        return pa.Table.from_batches(got)

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


def _batch_offsets(source: Any, count: int) -> list[int] | None:
    """Where each of the ``count`` record batches of a local (memory-mapped) Arrow IPC
    file starts, from a walk over its messages (metadata only, bodies are mapped, not
    read); ``None`` for a remote file (the walk would fetch it whole) or where the walk
    does not find exactly ``count`` batches."""
    pa = _pa()
    if not isinstance(source, pa.MemoryMappedFile):
        return None
    offsets: list[int] = []
    try:
        source.seek(8)  # after the file format's "ARROW1\0\0"
        messages = pa.ipc.MessageReader.open_stream(source)
        while len(offsets) < count:
            at = source.tell()
            try:
                message = messages.read_next_message()
            except StopIteration:
                break
            if message.type == "record batch":
                offsets.append(at)
    except Exception:  # noqa: BLE001 - damaged messages: the batches say so when read
        return None
    finally:
        source.seek(0)
    return offsets if len(offsets) == count else None


def _take(cursor: list, n: int) -> list:
    """The next ``n`` rows of a slice cursor ``[group, row, batches, leftover]`` as a
    list of record batches (fewer rows where the row group ends first)."""
    out, need = [], n
    while need > 0:
        batch, cursor[3] = cursor[3], None
        if batch is None:
            batch = next(cursor[2], None)
            if batch is None:
                break
        if batch.num_rows > need:
            batch, cursor[3] = batch.slice(0, need), batch.slice(need)
        out.append(batch)
        need -= batch.num_rows
        cursor[1] += batch.num_rows
    return out
