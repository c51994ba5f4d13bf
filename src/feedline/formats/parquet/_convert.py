"""Arrow columns to numpy arrays (batches) and to Python values (rows).

Batch columns (:func:`to_numpy`):

* integers and floats without nulls: a numpy array of the same dtype, a read-only view
  of Arrow's memory (no copy); booleans without nulls: a ``bool`` array (unpacked from
  Arrow's bits);
* fixed-size lists (nested too) of such values, without nulls: one ``(n, size, ...)``
  array;
* strings / binary: a numpy ``object`` array of ``str`` / ``bytes``;
* everything else (variable-length lists, structs, numbers with nulls, dates) follows
  ``pyarrow.Array.to_numpy(zero_copy_only=False)``: lists become an ``object`` array of
  1-D arrays, structs an ``object`` array of dicts, integers with nulls ``float64`` with
  NaN.

:func:`numpy_or_arrow` and :func:`slice_numpy` give the same arrays batch by batch: a
column whose array holds no Python objects is converted once per fragment and sliced
(views), any other column is kept as Arrow data and converted one batch at a time, so
that only one batch's worth of Python objects exists at once.

Row values (:func:`to_python`) are what ``pyarrow.Array.to_pylist`` gives (``int``,
``float``, ``str``, ``bytes``, ``list``, ``dict``, ``None`` for nulls, ``datetime``).

>>> import pyarrow as pa
>>> to_numpy(pa.array([1, 2, 3])).tolist()
[1, 2, 3]
>>> to_numpy(pa.array([[1, 2], [3, 4]], pa.list_(pa.int8(), 2))).shape
(2, 2)
>>> to_python(pa.array(["a", None]))
['a', None]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from feedline._internal.optional import require

__all__ = ["to_numpy", "to_python", "numpy_or_arrow", "slice_numpy"]


def _pa() -> Any:
    return require("pyarrow", extra="parquet")


def to_numpy(arr: Any) -> np.ndarray:
    """One Arrow array (or chunked array) as a numpy array; see the module docstring."""
    pa = _pa()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    if pa.types.is_fixed_size_list(t) and arr.null_count == 0:
        inner = to_numpy(arr.flatten())
        if inner.dtype != object:
            return inner.reshape(len(arr), t.list_size, *inner.shape[1:])
    return arr.to_numpy(zero_copy_only=False)


def _fast_python(t: Any) -> bool:
    pa = _pa()
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
            or pa.types.is_string(t) or pa.types.is_large_string(t)
            or pa.types.is_binary(t) or pa.types.is_large_binary(t))


def to_python(arr: Any) -> list:
    """One Arrow array (or chunked array) as a list of Python values (``to_pylist``
    semantics), through numpy where that is exact and faster."""
    pa = _pa()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if arr.null_count == 0 and _fast_python(arr.type):
        return arr.to_numpy(zero_copy_only=False).tolist()
    return arr.to_pylist()


def _vectorised(t: Any) -> bool:
    """True for types whose numpy array holds no Python objects."""
    pa = _pa()
    if pa.types.is_fixed_size_list(t):
        return _vectorised(t.value_type)
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
            or pa.types.is_temporal(t))


def numpy_or_arrow(arr: Any) -> Any:
    """A whole column kept for slicing: its numpy array when that holds no Python objects
    (numbers, booleans, times, fixed-size lists of them, no nulls), else the Arrow array
    itself, converted slice by slice by :func:`slice_numpy` so that only the rows of one
    batch become Python objects at a time."""
    pa = _pa()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if arr.null_count == 0 and _vectorised(arr.type):
        return to_numpy(arr)
    return arr


def slice_numpy(column: Any, lo: int, hi: int) -> np.ndarray:
    """Rows ``lo .. hi - 1`` of a column made by :func:`numpy_or_arrow`, as numpy."""
    if isinstance(column, np.ndarray):
        return column[lo:hi]
    return to_numpy(column.slice(lo, hi - lo))
