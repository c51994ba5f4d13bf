"""Write Parquet files from a pipeline, atomically.

:class:`ParquetWriter` takes rows (dicts of values) and/or column batches (dicts of
equal-length arrays, numpy arrays of two or more dimensions stored as fixed-size lists)
and writes row groups of exactly ``row_group_size`` rows (the last one may be shorter).
The file is written under a temporary name beside ``path`` (``.NAME.XXXX.tmp``) and
renamed onto ``path`` by :meth:`ParquetWriter.close`, so a reader sees either no file
(or the old one) or the whole new one; leaving a ``with`` block by an exception, or
:meth:`ParquetWriter.abort`, removes the temporary file instead.

The schema is the ``schema`` argument, else inferred from the first row group; later
data is converted to it (a column it lacks raises ``ValueError``).

>>> import os, tempfile, pyarrow.parquet as pq
>>> path = os.path.join(tempfile.mkdtemp(), "out.parquet")
>>> with ParquetWriter(path, row_group_size=2) as w:
...     for i in range(3):
...         w.write({"id": i, "name": f"n{i}"})
>>> pf = pq.ParquetFile(path)
>>> pf.metadata.num_row_groups, pf.read().to_pylist()[2]
(2, {'id': 2, 'name': 'n2'})
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable
from typing import Any

import numpy as np

from feedline._internal.atomic import temporary_path
from feedline._internal.closing import Abortable
from feedline._internal.optional import require
from feedline._internal.validate import one_of, positive_int
from feedline.storage.fs import is_remote, strip_file_scheme

__all__ = ["ParquetWriter", "write_parquet", "COMPRESSIONS"]

COMPRESSIONS = ("snappy", "zstd", "gzip", "brotli", "lz4", "none")
"""Accepted values of ``compression``."""


def _pa() -> Any:
    return require("pyarrow", extra="parquet")


def _to_arrow(values: Any) -> Any:
    pa = _pa()
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values
    if isinstance(values, np.ndarray):
        if values.ndim >= 2:
            flat = _to_arrow(np.ascontiguousarray(values).reshape(len(values) * values.shape[1],
                                                                  *values.shape[2:]))
            return pa.FixedSizeListArray.from_arrays(flat, values.shape[1])
        if values.dtype == object:
            return pa.array(list(values))
        return pa.array(values)
    return pa.array(list(values))


class ParquetWriter(Abortable):
    """Write one Parquet file atomically; see the module docstring.

    Args:
        path: the file to write, local or an fsspec URL (the temporary file or object
            beside it is moved onto ``path`` by :meth:`close`).
        row_group_size: rows per row group, a positive int (default 65536); the last one
            may be shorter.
        compression: one of :data:`COMPRESSIONS` (default ``"snappy"``; ``"none"`` writes
            uncompressed); anything else raises ``ValueError``.
        schema: a ``pyarrow.Schema`` that all data is converted to; ``None`` (the
            default) infers it from the first row group. Another type raises
            ``TypeError``.
        storage_options: passed to fsspec for a URL.

    >>> import os, tempfile, pyarrow.parquet as pq
    >>> path = os.path.join(tempfile.mkdtemp(), "w.parquet")
    >>> with ParquetWriter(path, row_group_size=2) as w:
    ...     w.write({"id": 1, "name": "a"})
    ...     w.write({"id": 2, "name": "b"})
    ...     w.write_batch({"id": [3], "name": ["c"]})
    >>> pq.read_table(path).to_pydict(), pq.ParquetFile(path).num_row_groups
    ({'id': [1, 2, 3], 'name': ['a', 'b', 'c']}, 2)
    >>> w = ParquetWriter(path + ".tmp-demo"); w.write({"id": 1}); w.abort()
    >>> os.path.exists(path + ".tmp-demo")           # abort leaves nothing behind
    False
    """

    def __init__(self, path: str | os.PathLike, *, row_group_size: int = 65536,
                 compression: str = "snappy", schema: Any = None,
                 storage_options: dict | None = None) -> None:
        pa = _pa()
        self._pq = require("pyarrow.parquet", extra="parquet")
        self.path = os.fspath(path)
        self.row_group_size = positive_int("row_group_size", row_group_size)
        self.compression = one_of("compression", compression, COMPRESSIONS)
        if schema is not None and not isinstance(schema, pa.Schema):
            raise TypeError(f"`schema` must be a pyarrow.Schema, got {type(schema).__name__}")
        self._schema = schema
        self._storage_options = storage_options
        self._rows: list[dict] = []
        self._tables: list[Any] = []
        self._buffered = 0
        self._writer: Any = None
        self._file: Any = None
        self._fs: Any = None
        self.rows_written = 0
        self._closed = False
        if is_remote(self.path):
            fsspec = require("fsspec", extra="remote")
            self._fs, _ = fsspec.core.url_to_fs(self.path, **(storage_options or {}))
            head, _, name = self.path.rstrip("/").rpartition("/")
            self._tmp = f"{head}/.{name}.{uuid.uuid4().hex}.tmp"
            self._file = self._fs.open(self._tmp, "wb")
        else:
            fd, self._tmp = temporary_path(strip_file_scheme(self.path))
            self._file = os.fdopen(fd, "wb")

    @property
    def closed(self) -> bool:
        """True once :meth:`close` or :meth:`abort` ran."""
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"write to a closed ParquetWriter ({self.path})")

    def write(self, row: dict[str, Any]) -> None:
        """Add one row.

        Args:
            row: a dict from column name to value (another type raises ``TypeError``); a
                row lacking a column of the schema raises ``ValueError`` when its row group
                is written. A closed writer raises ``ValueError``.
        """
        self._check_open()
        if not isinstance(row, dict):
            raise TypeError(f"a row must be a dict of column values, got {type(row).__name__}")
        self._rows.append(row)
        self._buffered += 1
        if self._buffered >= self.row_group_size:
            self._flush(final=False)

    def write_batch(self, batch: Any) -> None:
        """Add the rows of a column batch.

        Args:
            batch: a dict of equal-length arrays (numpy, lists, pyarrow arrays; numpy
                arrays of two or more dimensions are stored as fixed-size lists) or a
                ``pyarrow.Table``/``RecordBatch``; another type raises ``TypeError``, a
                batch lacking a column of the schema ``ValueError``.

        >>> import os, tempfile, numpy as np, pyarrow.parquet as pq
        >>> path = os.path.join(tempfile.mkdtemp(), "b.parquet")
        >>> with ParquetWriter(path) as w:
        ...     w.write_batch({"xy": np.zeros((2, 3), np.float32), "k": np.array([1, 2])})
        >>> pq.read_schema(path).field("xy").type.list_size, w.rows_written
        (3, 2)
        """
        pa = _pa()
        self._check_open()
        if isinstance(batch, pa.RecordBatch):
            table = pa.Table.from_batches([batch])
        elif isinstance(batch, pa.Table):
            table = batch
        elif isinstance(batch, dict):
            table = pa.table({name: _to_arrow(v) for name, v in batch.items()})
        else:
            raise TypeError(f"a batch must be a dict of arrays or a pyarrow Table, got "
                            f"{type(batch).__name__}")
        self._rows_to_table()
        self._tables.append(self._conform(table))
        self._buffered += table.num_rows
        if self._buffered >= self.row_group_size:
            self._flush(final=False)

    def _conform(self, table: Any) -> Any:
        if self._schema is None:
            self._schema = table.schema
            return table
        missing = [n for n in self._schema.names if n not in table.column_names]
        if missing:
            raise ValueError(f"{self.path}: data lacks the columns {missing} of the schema "
                             f"{self._schema.names}")
        return table.select(self._schema.names).cast(self._schema)

    def _rows_to_table(self) -> None:
        if self._rows:
            pa = _pa()
            rows, self._rows = self._rows, []
            if self._schema is None:
                table = pa.Table.from_pylist(rows)
            else:
                missing = [n for n in self._schema.names if n not in rows[0]]
                if missing:
                    raise ValueError(f"{self.path}: a row lacks the columns {missing} of the "
                                     f"schema {self._schema.names}")
                table = pa.Table.from_pylist(rows, schema=self._schema)
            self._tables.append(self._conform(table))

    def _flush(self, *, final: bool) -> None:
        pa = _pa()
        self._rows_to_table()
        if not self._tables:
            return
        table = pa.concat_tables(self._tables) if len(self._tables) > 1 else self._tables[0]
        self._tables = []
        size = self.row_group_size
        whole = table.num_rows if final else table.num_rows - table.num_rows % size
        if self._writer is None:
            compression = None if self.compression == "none" else self.compression
            self._writer = self._pq.ParquetWriter(self._file, self._schema,
                                                  compression=compression)
        for offset in range(0, whole, size):
            piece = table.slice(offset, min(size, whole - offset))
            self._writer.write_table(piece, row_group_size=size)
        self.rows_written += whole
        if whole < table.num_rows:
            self._tables = [table.slice(whole)]
        self._buffered = table.num_rows - whole

    def close(self) -> None:
        """Write what is buffered, finish the file and rename it onto ``path``;
        idempotent."""
        if self._closed or not hasattr(self, "_tmp"):
            return
        try:
            self._flush(final=True)
            if self._writer is None:  # nothing written: an empty file with the schema
                pa = _pa()
                self._writer = self._pq.ParquetWriter(self._file, self._schema or pa.schema([]))
            self._writer.close()
            self._file.close()
            if self._fs is not None:
                self._fs.mv(self._tmp, self.path)
            else:
                os.replace(self._tmp, strip_file_scheme(self.path))
        except BaseException:
            self.abort()
            raise
        self._closed = True

    def abort(self) -> None:
        """Discard the temporary file; ``path`` is left as it was. Idempotent."""
        if self._closed or not hasattr(self, "_tmp"):
            return
        self._closed = True
        try:
            if self._writer is not None:
                try:
                    self._writer.close()
                except Exception:  # noqa: BLE001 - the file is discarded anyway
                    pass
            self._file.close()
        finally:
            if self._fs is not None:
                if self._fs.exists(self._tmp):
                    self._fs.rm(self._tmp)
            elif os.path.exists(self._tmp):
                os.unlink(self._tmp)

    def __del__(self) -> None:  # an unfinished writer leaves no partial file
        try:
            self.abort()
        except Exception:  # noqa: BLE001 - never raise from a finaliser
            pass


def write_parquet(source: Iterable[Any], path: str | os.PathLike, *, batched: bool = False,
                  row_group_size: int = 65536, compression: str = "snappy", schema: Any = None,
                  storage_options: dict | None = None) -> int:
    """Write every item of ``source`` to the Parquet file ``path``, atomically, and
    return the number of rows. An error while iterating leaves ``path`` untouched.

    Args:
        source: a :class:`~feedline.dataset.base.Dataset` or any iterable; its iterator
            is closed at the end.
        path: the file to write, local or an fsspec URL.
        batched: false (the default): items are rows (dicts of values); true: items are
            column batches (dicts of equal-length arrays), as
            :meth:`ParquetWriter.write_batch` takes them.
        row_group_size: rows per row group (default 65536).
        compression: one of :data:`COMPRESSIONS` (default ``"snappy"``).
        schema: a ``pyarrow.Schema``; ``None`` (the default) infers it.
        storage_options: passed to fsspec for a URL.

    >>> import os, tempfile
    >>> from feedline import Dataset
    >>> from feedline.formats.parquet.reader import read_rows
    >>> path = os.path.join(tempfile.mkdtemp(), "sq.parquet")
    >>> write_parquet(Dataset.range(4).map(lambda i: {"i": i, "sq": i * i}), path, row_group_size=3)
    4
    >>> read_rows(path)[3], len(read_rows(path).files.fragment_rows)
    ({'i': 3, 'sq': 9}, 2)
    """
    with ParquetWriter(path, row_group_size=row_group_size, compression=compression,
                       schema=schema, storage_options=storage_options) as writer:
        add = writer.write_batch if batched else writer.write
        it = iter(source)
        try:
            for item in it:
                add(item)
        finally:
            closer = getattr(it, "close", None)
            if closer is not None:
                closer()
    return writer.rows_written
