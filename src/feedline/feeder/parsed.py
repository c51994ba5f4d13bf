"""TensorFlow's parsed layouts as feeder values: :func:`from_sparse_tensor`,
:func:`from_ragged`, :func:`from_parsed` (see :mod:`feedline.feeder`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from feedline._internal.validate import one_of
from feedline.exceptions import FeedError
from feedline.feeder.values import SequenceValue, SparseValue, describe, offsets_of

__all__ = ["from_sparse_tensor", "from_ragged", "from_parsed"]


def from_sparse_tensor(
    indices: Any, values: Any, dense_shape: Any, *, layout: str = "csr", name: str | None = None
) -> SparseValue | SequenceValue:
    """Convert a rank-2 sparse tensor in TensorFlow's layout to a feedline value.

    The three arrays are what TF's ``VarLenFeature`` parsing (and the Example parser's
    sparse results) produce for a batch. Entries may come in any order. Duplicate
    entries, entries outside ``dense_shape`` and gaps (``"sequence"``) raise
    :class:`~feedline.exceptions.FeedError`.

    Args:
        indices: ``(nnz, 2)`` integer (row, column) pairs.
        values: ``(nnz,)`` values, one per entry of ``indices``.
        dense_shape: ``(rows, columns)``, two non-negative ints.
        layout: ``"csr"`` (the default) gives a :class:`SparseValue` of
            ``shape == dense_shape`` whose ``values`` keep their dtype (feed it as a
            sparse float vector); ``"sequence"`` gives a :class:`SequenceValue` with one
            sequence per row, the values of row ``r`` in column order, and needs a
            *ragged-right* tensor (row ``r`` fills columns ``0 .. len_r - 1`` with no
            gaps), as VarLen features are. Anything else raises ``ValueError``.
        name: the input's name, used in error messages (``None``: "sparse tensor").

    >>> idx = [[0, 0], [0, 1], [2, 0]]
    >>> seq = from_sparse_tensor(idx, [7, 8, 9], [3, 2], layout="sequence")
    >>> seq.values.tolist(), seq.sequence_start_positions.tolist()
    ([7, 8, 9], [0, 2, 2, 3])
    >>> from_sparse_tensor(idx, [1.0, 2.0, 3.0], [3, 2]).to_dense().tolist()
    [[1.0, 2.0], [0.0, 0.0], [3.0, 0.0]]
    """
    one_of("layout", layout, ("csr", "sequence"))
    label = "sparse tensor" if name is None else f"input {name!r}"
    idx = np.asarray(indices)
    vals = np.asarray(values)
    shape = np.asarray(dense_shape)
    if shape.shape != (2,) or shape.dtype.kind not in "iu":
        raise FeedError(f"{label}: expected a dense_shape of 2 ints, got {describe(dense_shape)}")
    rows, cols = (int(s) for s in shape)
    if rows < 0 or cols < 0:
        raise FeedError(f"{label}: expected a non-negative dense_shape, got {shape.tolist()}")
    if idx.size == 0:
        idx = idx.reshape(0, 2).astype(np.int64)
    if idx.ndim != 2 or idx.shape[1] != 2 or idx.dtype.kind not in "iu":
        raise FeedError(f"{label}: expected integer indices of shape (nnz, 2), got {describe(idx)}")
    if vals.ndim != 1 or len(vals) != len(idx):
        raise FeedError(
            f"{label}: expected values of shape ({len(idx)},) to match the indices, "
            f"got shape {vals.shape}"
        )
    idx = idx.astype(np.int64, copy=False)
    r, c = idx[:, 0], idx[:, 1]
    outside = (r < 0) | (r >= rows) | (c < 0) | (c >= cols)
    if outside.any():
        k = int(outside.argmax())
        raise FeedError(
            f"{label}: entry {k}: expected an index inside dense_shape {[rows, cols]}, "
            f"got {idx[k].tolist()}"
        )
    order = np.lexsort((c, r))
    r, c, vals = r[order], c[order], vals[order]
    dup = (np.diff(r) == 0) & (np.diff(c) == 0)
    if dup.any():
        k = int(dup.argmax()) + 1
        raise FeedError(f"{label}: expected distinct indices, got {[int(r[k]), int(c[k])]} twice")
    indptr = offsets_of(np.bincount(r, minlength=rows))
    if layout == "csr":
        return SparseValue(indptr, np.ascontiguousarray(c), vals, (rows, cols))
    expected_col = np.arange(len(c), dtype=np.int64) - indptr[r]
    gap = c != expected_col
    if gap.any():
        k = int(gap.argmax())
        raise FeedError(
            f"{label}: expected a ragged-right tensor, got row {int(r[k])} with a value at "
            f"column {int(c[k])} but none at column {int(expected_col[k])}"
        )
    return SequenceValue(vals, indptr)


def from_ragged(
    values: Any, row_lengths: Any, *, sub_row_lengths: Any = None, name: str | None = None
) -> SequenceValue:
    """Wrap ragged values (TensorFlow's ``RaggedTensor`` layout) as a :class:`SequenceValue`.

    Lengths that are not 1-D non-negative ints, or do not sum to the number of tokens
    (sub-sequences), raise :class:`~feedline.exceptions.FeedError`.

    Args:
        values: the tokens of every row one after another (axis 0); kept as it is (no
            copy when it is already an array).
        row_lengths: ``row_lengths[i]`` is the number of tokens of sample ``i`` (with
            ``sub_row_lengths``: its number of sub-sequences). It may also be TF's
            ``nested_row_lengths`` itself, a tuple of one or two 1-D arrays, outermost
            first, as the Example parser's ``RaggedValue.row_lengths`` is.
        sub_row_lengths: for two ragged levels, ``sub_row_lengths[j]`` is the number of
            tokens of sub-sequence ``j`` (TF's ``nested_row_lengths``, outermost first);
            sub-sequences must not be empty (see :class:`SequenceValue`). Giving it with
            nested ``row_lengths`` raises ``TypeError``.
        name: the input's name, used in error messages (``None``: "ragged value").

    >>> v = from_ragged([1, 2, 3, 4], [3, 0, 1])
    >>> v.sequence_start_positions.tolist()
    [0, 3, 3, 4]
    >>> v = from_ragged([1, 2, 3, 4], [2, 1], sub_row_lengths=[1, 2, 1])
    >>> v.sequence_start_positions.tolist(), v.sub_sequence_start_positions.tolist()
    ([0, 3, 4], [0, 1, 3, 4])
    >>> from_ragged([1, 2, 3, 4], (np.array([2, 1]), np.array([1, 2, 1]))) == v
    True
    """
    label = "ragged value" if name is None else f"input {name!r}"
    if _is_nested_lengths(row_lengths):
        if sub_row_lengths is not None:
            raise TypeError("give nested `row_lengths` or `sub_row_lengths`, not both")
        if len(row_lengths) > 2:
            raise FeedError(
                f"{label}: expected one or two ragged dimensions, got {len(row_lengths)}"
            )
        row_lengths, sub_row_lengths = (
            (row_lengths[0], None) if len(row_lengths) == 1 else tuple(row_lengths)
        )
    vals = np.asarray(values)
    if vals.ndim == 0:
        raise FeedError(f"{label}: expected values with a token axis, got a scalar")

    def lengths_of(arg: Any, what: str, total: int) -> np.ndarray:
        a = np.asarray(arg)
        if a.size == 0:
            a = a.reshape(0).astype(np.int64)
        if a.ndim != 1 or a.dtype.kind not in "iu":
            raise FeedError(f"{label}: expected `{what}` to be 1-D ints, got {describe(a)}")
        if (a < 0).any():
            raise FeedError(f"{label}: expected non-negative `{what}`, got {a.tolist()[:8]}")
        if int(a.sum()) != total:
            raise FeedError(
                f"{label}: expected `{what}` to sum to {total}, got {int(a.sum())}"
            )
        return a.astype(np.int64, copy=False)

    if sub_row_lengths is None:
        lengths = lengths_of(row_lengths, "row_lengths", len(vals))
        return SequenceValue(vals, offsets_of(lengths))
    sub = lengths_of(sub_row_lengths, "sub_row_lengths", len(vals))
    if not sub.all():
        raise FeedError(
            f"{label}: expected non-empty sub-sequences, got sub-sequence "
            f"{int(np.argmin(sub))} of length 0"
        )
    outer = lengths_of(row_lengths, "row_lengths", len(sub))
    sub_starts = offsets_of(sub)
    return SequenceValue(vals, sub_starts[offsets_of(outer)], sub_starts)


def _is_nested_lengths(x: Any) -> bool:
    return (
        isinstance(x, (tuple, list))
        and len(x) > 0
        and all(isinstance(r, (np.ndarray, list, tuple)) for r in x)
    )


def from_parsed(value: Any, *, layout: str = "sequence", name: str | None = None) -> Any:
    """Convert one parsed feature of :mod:`feedline.example` to a feeder value.

    Args:
        value: a sparse result (``indices``, ``values``, ``dense_shape``; a
            ``VarLenFeature`` of a batch, rank 2) goes to :func:`from_sparse_tensor`; a
            ragged result (``values``, ``row_lengths``; a ``RaggedFeature``) to
            :func:`from_ragged`, one or two ragged levels; a numpy array (a
            ``FixedLenFeature``) is returned as it is. Anything else raises ``TypeError``.
        layout: for a sparse result only: ``"sequence"`` (the default), one sequence per
            record, or ``"csr"``, a :class:`SparseValue`.
        name: the input's name, used in error messages.

    >>> from types import SimpleNamespace
    >>> varlen = SimpleNamespace(indices=np.array([[0, 0], [0, 1], [1, 0]]),
    ...                          values=np.array([7, 8, 9]), dense_shape=np.array([2, 2]))
    >>> from_parsed(varlen).sequence_start_positions.tolist()
    [0, 2, 3]
    """
    if isinstance(value, np.ndarray):
        return value
    if all(hasattr(value, a) for a in ("indices", "values", "dense_shape")):
        return from_sparse_tensor(
            value.indices, value.values, value.dense_shape, layout=layout, name=name
        )
    if hasattr(value, "values") and hasattr(value, "row_lengths"):
        return from_ragged(value.values, tuple(value.row_lengths), name=name)
    raise TypeError(
        "`value` must be a parsed sparse value (indices, values, dense_shape), a ragged "
        f"value (values, row_lengths) or a numpy array, got {type(value).__name__}"
    )
