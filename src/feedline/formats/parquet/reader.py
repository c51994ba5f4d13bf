"""Read Parquet and Arrow IPC files as random-access datasets of rows, batches or
fragments, and re-cut streams of column batches.

Three views of the same files (see :mod:`feedline.formats.parquet.arrow` for the
formats and what a *fragment* is: a Parquet row group or an Arrow record batch):

* :func:`read_rows`: item ``i`` is row ``i`` (counted across the files in order) as a
  ``dict`` of Python values (``pyarrow``'s ``to_pylist`` semantics);
* :func:`read_batches`: item ``b`` is rows ``b*batch_size .. (b+1)*batch_size - 1`` as a
  ``dict`` of numpy arrays, sliced straight out of the decoded fragments, without a
  Python object per row where the type allows (see :mod:`feedline.formats.parquet._convert`
  for each Arrow type's array); the last batch is shorter unless ``drop_remainder``;
* :func:`read_fragments`: item ``k`` is fragment ``k`` whole, as a ``dict`` of numpy
  arrays.

All three are :class:`~feedline.dataset.base.RandomAccessDataset` s: they resume exactly
(the state is the next index), support ``global_shuffle(seed=...)``, and ``shard`` /
:func:`feedline.split` over ranks and workers deal out rows, batches or fragments
exactly once with equal counts (``policy="pad"`` or ``"drop_remainder"``). Splitting
``read_fragments`` gives every rank and worker whole row groups — each row group is
decoded by one reader only — and :func:`rebatch` then cuts the fragments it receives
into batches of a fixed size, still resuming exactly:

>>> import os, tempfile, numpy as np, pyarrow as pa, pyarrow.parquet as pq
>>> from feedline import split
>>> path = os.path.join(tempfile.mkdtemp(), "a.parquet")
>>> pq.write_table(pa.table({"x": np.arange(10), "s": list("abcdefghij")}), path,
...                row_group_size=4)
>>> read_rows(path)[5]
{'x': 5, 's': 'f'}
>>> [b["x"].tolist() for b in read_batches(path, batch_size=3, columns=["x"])]
[[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
>>> mine = split(read_fragments(path), rank=1, world_size=2, policy="none")
>>> [b["x"].tolist() for b in rebatch(mine, 3)]
[[4, 5, 6], [7]]

Decoded fragments are kept in a small cache (``cache_fragments`` most recently used), so
reading in order decodes each fragment once. Random access that jumps between
fragments — ``global_shuffle`` over rows or small batches — decodes a fragment for
almost every item; shuffle fragments instead (``read_fragments(...).global_shuffle()``,
then :func:`rebatch` and a buffer ``shuffle``), or raise ``cache_fragments`` to hold
the whole file.

Numeric batch columns are read-only views of Arrow's memory; copy one
(``arr.copy()``) before writing into it.
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from feedline._internal.on_error import check_on_error, report
from feedline._internal.validate import UNSET, non_negative_int, positive_int, renamed_option
from feedline.dataset.base import BuildContext, Dataset, RandomAccessDataset
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.exceptions import DataError, StateNotSupportedError
from feedline.formats.parquet._convert import numpy_or_arrow, slice_numpy, to_numpy, to_python
from feedline.formats.parquet.arrow import TableFiles

logger = logging.getLogger(__name__)

__all__ = [
    "read_rows",
    "read_batches",
    "read_fragments",
    "rebatch",
    "RowsDataset",
    "BatchesDataset",
    "FragmentsDataset",
    "RebatchDataset",
]


class _TableDataset(RandomAccessDataset):
    """Shared part: the files and the cache of converted fragments."""

    def __init__(self, files: TableFiles, cache_fragments: int) -> None:
        super().__init__()
        self._files = files
        self._cache_size = positive_int("cache_fragments", cache_fragments)
        self._cache: OrderedDict[int, Any] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._names = files.column_names

    @property
    def files(self) -> TableFiles:
        """The :class:`~feedline.formats.parquet.arrow.TableFiles` read."""
        return self._files

    @property
    def column_names(self) -> list[str]:
        """The columns read, in order (the keys of every item)."""
        return list(self._names)

    @property
    def num_rows(self) -> int:
        """Rows in all files."""
        return self._files.num_rows

    def _convert(self, table: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _fragment(self, k: int) -> Any:
        cache = self._cache
        with self._cache_lock:
            hit = cache.get(k)
            if hit is not None:
                cache.move_to_end(k)
                return hit
        table = self._files.read_fragment(k)
        with self._files.conversion_errors(k):
            value = self._convert(table)
        with self._cache_lock:
            cache[k] = value
            while len(cache) > self._cache_size:
                cache.popitem(last=False)
        return value

    def _locate(self, row: int) -> int:
        return bisect.bisect_right(self._files.starts, row) - 1

    def _release(self) -> None:
        with self._cache_lock:
            self._cache.clear()
        self._files.close()

    def __getstate__(self) -> dict:  # worker processes start with an empty cache
        state = self.__dict__.copy()
        state["_cache"] = OrderedDict()
        del state["_cache_lock"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._cache_lock = threading.Lock()


class RowsDataset(_TableDataset):
    """Rows as dicts of Python values; made by :func:`read_rows`.

    Args:
        files: the :class:`~feedline.formats.parquet.arrow.TableFiles` to read.
        cache_fragments: how many decoded fragments to keep, a positive int.

    >>> import os, tempfile, numpy as np, pyarrow as pa, pyarrow.parquet as pq
    >>> path = os.path.join(tempfile.mkdtemp(), "a.parquet")
    >>> pq.write_table(pa.table({"x": np.arange(5), "s": list("abcde")}), path, row_group_size=2)
    >>> ds = read_rows(path)
    >>> type(ds).__name__, len(ds), ds[4]
    ('RowsDataset', 5, {'x': 4, 's': 'e'})
    """

    @property
    def name(self) -> str:
        return f"parquet_rows[{len(self)}]"

    def __len__(self) -> int:
        return self._files.num_rows

    def _convert(self, table: Any) -> list[list]:
        return [to_python(table.column(i)) for i in range(table.num_columns)]

    def _getitem(self, index: int) -> dict[str, Any]:
        index %= self._files.num_rows
        k = self._locate(index)
        j = index - self._files.starts[k]
        return dict(zip(self._names, [c[j] for c in self._fragment(k)]))

    def _items_for(self, indices: Iterator[int], epoch: int,
                   start: int | None = 0) -> Iterator[dict[str, Any]]:
        return self._rows(indices)

    def _rows(self, indices: Iterator[int]) -> Iterator[dict[str, Any]]:
        names, starts, n = self._names, self._files.starts, self._files.num_rows
        lo = hi = 0
        cols: list[list] = []
        for index in indices:
            index %= n
            if not lo <= index < hi:
                k = self._locate(index)
                lo, hi = starts[k], starts[k + 1]
                cols = self._fragment(k)
            j = index - lo
            yield dict(zip(names, [c[j] for c in cols]))


def _slice(columns: dict[str, Any], lo: int, hi: int) -> dict[str, np.ndarray]:
    return {name: slice_numpy(c, lo, hi) for name, c in columns.items()}


class BatchesDataset(_TableDataset):
    """Fixed-size batches as dicts of numpy arrays; made by :func:`read_batches`.

    Args:
        files: the :class:`~feedline.formats.parquet.arrow.TableFiles` to read.
        cache_fragments: how many decoded fragments to keep, a positive int.
        batch_size: rows per batch, a positive int.
        drop_last: true leaves out a last batch shorter than ``batch_size``.

    >>> import os, tempfile, numpy as np, pyarrow as pa, pyarrow.parquet as pq
    >>> path = os.path.join(tempfile.mkdtemp(), "a.parquet")
    >>> pq.write_table(pa.table({"x": np.arange(5), "s": list("abcde")}), path, row_group_size=2)
    >>> ds = read_batches(path, batch_size=3, columns=["s"])
    >>> type(ds).__name__, [b["s"].tolist() for b in ds]
    ('BatchesDataset', [['a', 'b', 'c'], ['d', 'e']])
    """

    def __init__(self, files: TableFiles, cache_fragments: int, batch_size: int,
                 drop_last: bool) -> None:
        super().__init__(files, cache_fragments)
        self.batch_size = positive_int("batch_size", batch_size)
        self.drop_last = bool(drop_last)

    @property
    def name(self) -> str:
        return f"parquet_batches[{len(self)}x{self.batch_size}]"

    def __len__(self) -> int:
        n = self._files.num_rows
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _convert(self, table: Any) -> dict[str, Any]:
        return {name: numpy_or_arrow(table.column(i)) for i, name in enumerate(self._names)}

    def _getitem(self, index: int) -> dict[str, np.ndarray]:
        index %= len(self)
        starts = self._files.starts
        lo = index * self.batch_size
        hi = min(lo + self.batch_size, self._files.num_rows)
        k = self._locate(lo)
        if hi <= starts[k + 1]:  # inside one fragment: views, no copy
            return self._piece(k, lo - starts[k], hi - starts[k])
        pieces = []
        row = lo
        while row < hi:
            k = self._locate(row)
            end = min(hi, starts[k + 1])
            pieces.append(self._piece(k, row - starts[k], end - starts[k]))
            row = end
        return {name: np.concatenate([p[name] for p in pieces]) for name in self._names}


    def _piece(self, k: int, lo: int, hi: int) -> dict[str, np.ndarray]:
        """Rows ``lo .. hi - 1`` of fragment ``k``; columns kept as Arrow data convert
        here, inside the fragment's error boundary."""
        columns = self._fragment(k)
        with self._files.conversion_errors(k):
            return _slice(columns, lo, hi)


class FragmentsDataset(_TableDataset):
    """Whole row groups / record batches as dicts of numpy arrays; made by
    :func:`read_fragments`.

    Args:
        files: the :class:`~feedline.formats.parquet.arrow.TableFiles` to read.
        cache_fragments: how many decoded fragments to keep, a positive int.
        on_error: what a fragment that does not decode or convert does: ``"raise"`` (the
            default) raises; ``"skip"``/``"warn"`` yield it as an empty batch (zero rows,
            the same columns) and list ``(path, fragment)`` in ``skipped``.

    >>> import os, tempfile, numpy as np, pyarrow as pa, pyarrow.parquet as pq
    >>> path = os.path.join(tempfile.mkdtemp(), "a.parquet")
    >>> pq.write_table(pa.table({"x": np.arange(5), "s": list("abcde")}), path, row_group_size=2)
    >>> ds = read_fragments(path)                    # one item per row group
    >>> type(ds).__name__, [f["x"].tolist() for f in ds]
    ('FragmentsDataset', [[0, 1], [2, 3], [4]])
    """

    def __init__(self, files: TableFiles, cache_fragments: int, on_error: str = "raise") -> None:
        super().__init__(files, cache_fragments)
        self._on_error = check_on_error(on_error)
        self.skipped: list[tuple[str, int]] = []

    @property
    def name(self) -> str:
        return f"parquet_fragments[{len(self)}]"

    def __len__(self) -> int:
        return self._files.num_fragments

    def _convert(self, table: Any) -> dict[str, np.ndarray]:
        return {name: to_numpy(table.column(i)) for i, name in enumerate(self._names)}

    def _getitem(self, index: int) -> dict[str, np.ndarray]:
        k = index % self._files.num_fragments
        if self._on_error == "raise":
            return dict(self._fragment(k))
        try:
            return dict(self._fragment(k))
        except DataError as exc:  # damaged (CorruptRecordError) or not convertible (DecodeError)
            report(exc, self._on_error, stacklevel=2)
            files = self._files
            self.skipped.append((files.paths[files.fragment_file[k]], k))
            logger.info("skipped damaged fragment %d: %s", k, exc)
            return self._convert(files.schema.empty_table())


#: file name endings kept when a directory is given
TABLE_SUFFIXES = (".parquet", ".pq", ".parq", ".arrow", ".feather", ".ipc")


def _files(paths: Any, columns: Sequence[str] | None, format: str, on_error: str,
           storage_options: dict | None, min_fragment_rows: int = 1) -> TableFiles:
    from feedline.storage.fs import expand, is_remote

    if isinstance(paths, TableFiles):
        return paths
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    listed: list[str] = []
    for pattern in paths:
        found = expand(pattern, storage_options=storage_options)
        p = os.fspath(pattern)
        if not is_remote(p) and os.path.isdir(p):  # a folder: only its table files
            found = [f for f in found if f.endswith(TABLE_SUFFIXES)]
            if not found:
                raise FileNotFoundError(f"no {'/'.join(TABLE_SUFFIXES)} file in folder {p!r}")
        listed.extend(found)
    return TableFiles(listed, columns=columns, format=format, on_error=on_error,
                      min_fragment_rows=min_fragment_rows, storage_options=storage_options)


def read_rows(paths: str | os.PathLike | Sequence[str | os.PathLike] | TableFiles, *,
              columns: Sequence[str] | None = None, format: str = "auto",
              on_error: str = "raise", cache_fragments: int = 2, min_fragment_rows: int = 1,
              storage_options: dict | None = None) -> RowsDataset:
    """Rows of Parquet / Arrow IPC files as dicts; see the module docstring.

    Args:
        paths: a path, URL, glob or directory, or a list of them (expanded by
            :func:`feedline.storage.fs.expand`, each pattern's matches sorted; of a local
            directory only the files ending in one of :data:`TABLE_SUFFIXES` are read, and
            one without any raises ``FileNotFoundError``), or a
            :class:`~feedline.formats.parquet.arrow.TableFiles` (then the options below
            that describe files are not used).
        columns: the columns to read; ``None`` (the default) reads all. As for
            :class:`~feedline.formats.parquet.arrow.TableFiles`.
        format: ``"auto"`` (the default), ``"parquet"`` or ``"arrow"``.
        on_error: what a file that cannot be opened does: ``"raise"`` (the default),
            ``"skip"`` or ``"warn"`` (left out).
        cache_fragments: how many decoded fragments to keep, a positive int (default 2).
        min_fragment_rows: join Arrow record batches into fragments of at least this
            many rows (default 1), as for ``TableFiles``.
        storage_options: passed to fsspec for URLs.

    >>> import os, tempfile, pyarrow as pa, pyarrow.parquet as pq
    >>> path = os.path.join(tempfile.mkdtemp(), "a.parquet")
    >>> pq.write_table(pa.table({"id": [7, 8], "tags": [["a"], []]}), path)
    >>> read_rows(path).to_list()
    [{'id': 7, 'tags': ['a']}, {'id': 8, 'tags': []}]
    """
    return RowsDataset(_files(paths, columns, format, on_error, storage_options,
                              min_fragment_rows), cache_fragments)


def read_batches(paths: str | os.PathLike | Sequence[str | os.PathLike] | TableFiles, *,
                 batch_size: int, drop_remainder: bool = False,
                 columns: Sequence[str] | None = None, format: str = "auto",
                 on_error: str = "raise", cache_fragments: int = 2, min_fragment_rows: int = 1,
                 storage_options: dict | None = None, drop_last: Any = UNSET) -> BatchesDataset:
    """Batches of ``batch_size`` rows as dicts of numpy arrays; see the module docstring.
    A batch inside one fragment is a set of views; one spanning fragments is
    concatenated.

    Args:
        paths: paths, URLs, globs or directories, or a
            :class:`~feedline.formats.parquet.arrow.TableFiles`, as for :func:`read_rows`.
        batch_size: rows per batch, a positive int (else ``ValueError``/``TypeError``).
        drop_remainder: false (the default) keeps a shorter last batch; true leaves it
            out.
        columns: the columns to read; ``None`` (the default) reads all.
        format: ``"auto"`` (the default), ``"parquet"`` or ``"arrow"``.
        on_error: what a file that cannot be opened does: ``"raise"`` (the default),
            ``"skip"`` or ``"warn"``.
        cache_fragments: how many decoded fragments to keep (default 2).
        min_fragment_rows: join Arrow record batches into fragments of at least this
            many rows (default 1).
        storage_options: passed to fsspec for URLs.
        drop_last: the deprecated old name of ``drop_remainder`` (a
            ``DeprecationWarning``; passing both with different values raises
            ``TypeError``).

    >>> import os, tempfile, pyarrow as pa, pyarrow.parquet as pq
    >>> path = os.path.join(tempfile.mkdtemp(), "a.parquet")
    >>> pq.write_table(pa.table({"v": [1.5, 2.5, 3.5]}), path)
    >>> ds = read_batches(path, batch_size=2)
    >>> len(ds), ds[0]["v"].dtype.name, ds[1]["v"].tolist()
    (2, 'float64', [3.5])
    """
    positive_int("batch_size", batch_size)
    drop = renamed_option("drop_last", "drop_remainder", drop_last, drop_remainder, False)
    return BatchesDataset(_files(paths, columns, format, on_error, storage_options,
                                 min_fragment_rows), cache_fragments, batch_size, drop)


def read_fragments(paths: str | os.PathLike | Sequence[str | os.PathLike] | TableFiles, *,
                   columns: Sequence[str] | None = None, format: str = "auto",
                   on_error: str = "raise", cache_fragments: int = 1, min_fragment_rows: int = 1,
                   storage_options: dict | None = None) -> FragmentsDataset:
    """Whole row groups (Parquet) / record batches (Arrow) as dicts of numpy arrays, the
    unit to split over ranks and workers; see the module docstring.

    Args:
        paths: paths, URLs, globs or directories, or a
            :class:`~feedline.formats.parquet.arrow.TableFiles`, as for :func:`read_rows`.
        columns: the columns to read; ``None`` (the default) reads all.
        format: ``"auto"`` (the default), ``"parquet"`` or ``"arrow"``.
        on_error: ``"raise"`` (the default), ``"skip"`` or ``"warn"``: covers a file that
            cannot be opened and also a row group that does not decode (see
            :class:`FragmentsDataset`).
        cache_fragments: how many decoded fragments to keep (default 1).
        min_fragment_rows: join Arrow record batches into fragments of at least this
            many rows (default 1).
        storage_options: passed to fsspec for URLs.

    >>> import os, tempfile, pyarrow as pa, pyarrow.parquet as pq
    >>> path = os.path.join(tempfile.mkdtemp(), "a.parquet")
    >>> pq.write_table(pa.table({"v": range(5)}), path, row_group_size=2)
    >>> [f["v"].tolist() for f in read_fragments(path)]
    [[0, 1], [2, 3], [4]]
    """
    return FragmentsDataset(_files(paths, columns, format, on_error, storage_options,
                                   min_fragment_rows), cache_fragments, on_error)


# ---------------------------------------------------------------------- rebatch
def rebatch(dataset: Dataset, batch_size: int, *, drop_remainder: bool = False,
            drop_last: Any = UNSET) -> RebatchDataset:
    """Cut a stream of column batches (dicts of equal-length arrays, e.g. the fragments of
    :func:`read_fragments`) into batches of exactly ``batch_size`` rows, in order; a
    batch may join the end of one input and the start of the next.

    Resumes exactly when ``dataset`` does: the state is the parent's state before the
    input that holds the next row, plus the rows of it already produced.

    Args:
        dataset: a :class:`~feedline.dataset.base.Dataset` of dicts of equal-length arrays
            (a non-Dataset raises ``TypeError``; an item that is not such a dict raises
            ``TypeError``/``ValueError`` when reached).
        batch_size: rows per batch, a positive int.
        drop_remainder: false (the default) keeps a shorter last batch; true leaves it
            out.
        drop_last: the deprecated old name of ``drop_remainder`` (a
            ``DeprecationWarning``).

    >>> import numpy as np
    >>> parts = Dataset.from_iterable([{"a": np.arange(3)}, {"a": np.arange(3, 5)}])
    >>> [b["a"].tolist() for b in rebatch(parts, 2)]
    [[0, 1], [2, 3], [4]]
    """
    if not isinstance(dataset, Dataset):
        raise TypeError(f"`dataset` must be a Dataset, got {type(dataset).__name__}")
    drop = renamed_option("drop_last", "drop_remainder", drop_last, drop_remainder, False)
    return RebatchDataset(dataset, positive_int("batch_size", batch_size), bool(drop))


class RebatchDataset(Dataset):
    """Fixed-size batches out of a stream of column batches; see :func:`rebatch`.

    Args:
        parent: the dataset of column batches (dicts of equal-length arrays).
        batch_size: rows per batch (not validated here: :func:`rebatch` does).
        drop_last: true leaves out a last batch shorter than ``batch_size``.

    >>> import os, tempfile, numpy as np, pyarrow as pa, pyarrow.parquet as pq
    >>> path = os.path.join(tempfile.mkdtemp(), "a.parquet")
    >>> pq.write_table(pa.table({"x": np.arange(5), "s": list("abcde")}), path, row_group_size=2)
    >>> ds = rebatch(read_fragments(path), 4)
    >>> type(ds).__name__, [b["x"].tolist() for b in ds]
    ('RebatchDataset', [[0, 1, 2, 3], [4]])
    """

    def __init__(self, parent: Dataset, batch_size: int, drop_last: bool) -> None:
        super().__init__()
        self._parents = (parent,)
        self.batch_size, self.drop_last = batch_size, drop_last

    @property
    def name(self) -> str:
        return f"rebatch({self.batch_size})"

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return _RebatchIterator(self._parents[0]._build(ctx), self.batch_size, self.drop_last)


def _length(chunk: Any) -> int:
    if not isinstance(chunk, dict) or not chunk:
        raise TypeError(f"rebatch needs dicts of equal-length arrays, got {type(chunk).__name__}")
    lengths = {name: len(a) for name, a in chunk.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"rebatch needs dicts of equal-length arrays, got lengths {lengths}")
    return next(iter(lengths.values()))


class _RebatchIterator(DatasetIterator):
    def __init__(self, parent: DatasetIterator, batch_size: int, drop_last: bool) -> None:
        self._parent = parent
        self._size, self._drop_last = batch_size, drop_last
        # pending inputs: [parent state before it (or the error getting it), chunk, offset, length]
        self._pending: list[list] = []
        self._resume_skip = 0
        self._done = False

    def _pull(self) -> bool:
        try:
            before: Any = self._parent.get_state()
        except StateNotSupportedError as exc:
            before = exc
        try:
            chunk = next(self._parent)
        except StopIteration:
            self._done = True
            return False
        n = _length(chunk)
        skip, self._resume_skip = min(self._resume_skip, n), 0
        if skip < n:
            self._pending.append([before, chunk, skip, n])
        return True

    def __next__(self) -> dict[str, Any]:
        pending, size = self._pending, self._size
        while not self._done and sum(p[3] - p[2] for p in pending) < size:
            self._pull()
        if not pending or (self._drop_last and sum(p[3] - p[2] for p in pending) < size):
            raise StopIteration
        pieces, need = [], size
        while pending and need:
            entry = pending[0]
            _, chunk, offset, n = entry
            take = min(need, n - offset)
            pieces.append({name: a[offset:offset + take] for name, a in chunk.items()})
            need -= take
            if offset + take == n:
                pending.pop(0)
            else:
                entry[2] = offset + take
        if len(pieces) == 1:
            return pieces[0]
        return {name: np.concatenate([p[name] for p in pieces]) for name in pieces[0]}

    def get_state(self) -> dict[str, Any]:
        if self._pending:
            before, _, offset, _ = self._pending[0]
            if isinstance(before, BaseException):
                raise before
            return {"type": "rebatch", "parent": before, "skip": offset}
        return {"type": "rebatch", "parent": self._parent.get_state(), "skip": self._resume_skip}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "rebatch", ("parent", "skip"))
        self._parent.set_state(state["parent"])
        self._resume_skip = non_negative_int("state['skip']", state["skip"])
        self._pending = []
        self._done = False

    def close(self) -> None:
        self._pending = []
        self._parent.close()
