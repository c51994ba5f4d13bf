"""The values :class:`~feedline.feeder.DataFeeder` returns: :class:`SparseValue` (CSR)
and :class:`SequenceValue` (flat tokens with start positions), and helpers shared by
the feeder's modules (see :mod:`feedline.feeder`)."""

from __future__ import annotations

import reprlib
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

__all__ = ["SparseValue", "SequenceValue"]

short_repr = reprlib.Repr()
short_repr.maxstring = 40
short_repr.maxother = 40
short_repr.maxlist = 6
short_repr.maxtuple = 6


def describe(x: Any) -> str:
    if x is None:
        return "None"
    if isinstance(x, (bool, np.bool_)):
        return f"bool {x!r}"
    if isinstance(x, (int, float, np.integer, np.floating)):
        return repr(x.item() if isinstance(x, np.generic) else x)
    if isinstance(x, np.ndarray):
        return f"an array of shape {x.shape} and dtype {x.dtype}"
    return f"{type(x).__name__} {short_repr.repr(x)}"


def offsets_of(lengths: np.ndarray) -> np.ndarray:
    out = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def _arrays_equal(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, (SparseValue, SequenceValue)):
        return a == b
    return (
        isinstance(b, np.ndarray)
        and a.dtype == b.dtype
        and a.shape == b.shape
        and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
    )


# ====================================================================== result classes


@dataclass(frozen=True, eq=False)
class SparseValue:
    """A batch of sparse vectors as a CSR matrix of ``shape == (rows, dim)``.

    Row ``r`` holds ``values[indptr[r]:indptr[r + 1]]`` at the columns
    ``indices[indptr[r]:indptr[r + 1]]``. Made by the feeder, columns are sorted within a
    row and unique. ``==`` compares shapes, dtypes and contents. The constructor does not
    check its arrays; :meth:`check` does.

    Args:
        indptr: int64 row offsets, ``rows + 1`` entries.
        indices: int64 column index of each stored entry, ``nnz`` entries.
        values: the ``nnz`` stored values, or ``None`` for binary vectors (every stored
            entry is 1).
        shape: ``(rows, dim)``.

    >>> v = SparseValue(np.array([0, 2, 3]), np.array([1, 4, 0]), None, (2, 5))
    >>> v.to_dense().tolist()
    [[0.0, 1.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0, 0.0]]
    >>> v.nnz, v.row_lengths.tolist()
    (3, [2, 1])
    """

    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray | None
    shape: tuple[int, int]

    @property
    def nnz(self) -> int:
        """Number of stored entries."""
        return int(len(self.indices))

    @property
    def row_lengths(self) -> np.ndarray:
        """Stored entries per row, ``np.diff(indptr)``."""
        return np.diff(self.indptr)

    @property
    def is_binary(self) -> bool:
        """True when there are no values (a sparse binary vector)."""
        return self.values is None

    def data(self, dtype: Any = np.float32) -> np.ndarray:
        """``values``, or ones of ``dtype`` for a binary vector.

        Args:
            dtype: the dtype of the ones made for a binary vector; ``values`` are
                returned as they are.
        """
        if self.values is None:
            return np.ones(self.nnz, dtype=dtype)
        return self.values

    def check(self) -> SparseValue:
        """Check the CSR invariants (what torch's CSR kernels assume) and return ``self``.

        ``indptr`` starts at 0, never decreases and ends at ``nnz``; ``indices`` lie in
        ``[0, dim)``, sorted and unique within each row; ``values`` (if any) has ``nnz``
        entries. Raises ``ValueError`` naming the first broken rule.

        >>> SparseValue(np.array([0, 2]), np.array([3, 1]), None, (1, 4)).check()
        Traceback (most recent call last):
        ...
        ValueError: SparseValue: column indices must be sorted and unique within a row; row 0 is not
        """
        indptr = np.asarray(self.indptr)
        indices = np.asarray(self.indices)
        rows, dim = self.shape
        if indptr.shape != (rows + 1,) or indices.ndim != 1:
            raise ValueError(
                f"SparseValue: expected indptr of shape ({rows + 1},) and 1-D indices, "
                f"got {indptr.shape} and {indices.shape}"
            )
        if indptr[0] != 0 or indptr[-1] != len(indices) or (np.diff(indptr) < 0).any():
            raise ValueError(
                f"SparseValue: indptr must rise from 0 to nnz={len(indices)}, "
                f"got {indptr.tolist()[:8]}"
            )
        if len(indices) and (indices.min() < 0 or indices.max() >= dim):
            raise ValueError(f"SparseValue: column indices must lie in [0, {dim})")
        if self.values is not None and len(self.values) != len(indices):
            raise ValueError(
                f"SparseValue: expected {len(indices)} values, got {len(self.values)}"
            )
        if len(indices) > 1:
            row_ids = np.repeat(np.arange(rows), np.diff(indptr))
            bad = (np.diff(indices) <= 0) & (row_ids[1:] == row_ids[:-1])
            if bad.any():
                raise ValueError(
                    "SparseValue: column indices must be sorted and unique within a row; "
                    f"row {int(row_ids[int(bad.argmax()) + 1])} is not"
                )
        return self

    def to_dense(self, dtype: Any = None) -> np.ndarray:
        """The dense ``(rows, dim)`` array.

        Args:
            dtype: the result's dtype; ``None`` (the default) keeps the dtype of
                ``values``, float32 for binary vectors.
        """
        data = self.data(np.float32 if dtype is None else dtype)
        out = np.zeros(self.shape, dtype=data.dtype if dtype is None else dtype)
        rows = np.repeat(np.arange(self.shape[0]), self.row_lengths)
        np.add.at(out, (rows, self.indices), data)
        return out

    def to_csc(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """The same matrix in CSC form: ``(ccol_indices, row_indices, values)``.

        Column ``c`` holds ``values[ccol_indices[c]:ccol_indices[c + 1]]`` at the rows
        ``row_indices[ccol_indices[c]:ccol_indices[c + 1]]``, rows ascending (PaddlePaddle's
        ``SPARSE_CSC`` layout, torch's ``sparse_csc``). ``ccol_indices`` has ``dim + 1``
        int64 entries; ``values`` is ``None`` for binary vectors, like :attr:`values`.

        >>> v = SparseValue(np.array([0, 2, 3]), np.array([1, 4, 1]), np.array([5., 6., 7.]), (2, 5))
        >>> [a.tolist() for a in v.to_csc()]
        [[0, 0, 2, 2, 2, 3], [0, 1, 0], [5.0, 7.0, 6.0]]
        """
        indices = np.asarray(self.indices, dtype=np.int64)
        rows = np.repeat(np.arange(self.shape[0], dtype=np.int64), self.row_lengths)
        order = np.argsort(indices, kind="stable")  # rows stay ascending within a column
        ccol = offsets_of(np.bincount(indices, minlength=self.shape[1]))
        values = None if self.values is None else np.asarray(self.values)[order]
        return ccol, rows[order], values

    def to_scipy(self) -> Any:
        """A ``scipy.sparse.csr_array`` (needs scipy)."""
        from feedline._internal.optional import require

        sparse = require("scipy.sparse", extra="all")
        return sparse.csr_array((self.data(), self.indices, self.indptr), shape=self.shape)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SparseValue):
            return NotImplemented
        return (
            tuple(self.shape) == tuple(other.shape)
            and _arrays_equal(self.indptr, other.indptr)
            and _arrays_equal(self.indices, other.indices)
            and _arrays_equal(self.values, other.values)
        )

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True, eq=False)
class SequenceValue:
    """A batch of variable-length sequences in one flat value, without padding.

    Args:
        values: the tokens of every sample, one after another: a numpy array with one
            row per token (``(tokens, *shape)`` for dense, ``(tokens,)`` for ids), or a
            :class:`SparseValue` with one row per token.
        sequence_start_positions: int64, ``num_sequences + 1`` entries
            ``[0, l0, l0+l1, ...]``; sample ``i`` is tokens
            ``sequence_start_positions[i]:sequence_start_positions[i + 1]``.
        sub_sequence_start_positions: for sub-sequences only (else ``None``): int64, one
            entry per sub-sequence of the whole batch plus one, also indexing tokens.
            The sub-sequences of sample ``i`` are those that start in
            ``[sequence_start_positions[i], sequence_start_positions[i + 1])``. A
            sequence may be empty (no tokens, or no sub-sequences), but a sub-sequence
            may not: an empty one would have no position of its own in this format
            (Paddle's), so the feeder and :func:`from_ragged` reject it.

    >>> v = SequenceValue(np.array([1, 2, 3, 4, 5]), np.array([0, 3, 5]), np.array([0, 1, 3, 5]))
    >>> v.lengths.tolist(), v.sub_sequence_lengths.tolist(), v.num_sub_sequences.tolist()
    ([3, 2], [1, 2, 2], [2, 1])
    >>> [[s.tolist() for s in sample] for sample in v.sequences()]
    [[[1], [2, 3]], [[4, 5]]]
    """

    values: Any
    sequence_start_positions: np.ndarray
    sub_sequence_start_positions: np.ndarray | None = None

    @property
    def num_sequences(self) -> int:
        """Number of samples (sequences) in the batch."""
        return len(self.sequence_start_positions) - 1

    @property
    def num_tokens(self) -> int:
        """Total number of tokens, ``sequence_start_positions[-1]``."""
        return int(self.sequence_start_positions[-1])

    @property
    def lengths(self) -> np.ndarray:
        """Tokens per sample."""
        return np.diff(self.sequence_start_positions)

    @property
    def has_sub_sequences(self) -> bool:
        """True for a sub-sequence batch."""
        return self.sub_sequence_start_positions is not None

    @property
    def sub_sequence_lengths(self) -> np.ndarray:
        """Tokens per sub-sequence (sub-sequence batches only)."""
        self._need_sub()
        return np.diff(cast(np.ndarray, self.sub_sequence_start_positions))  # see _need_sub

    @property
    def num_sub_sequences(self) -> np.ndarray:
        """Sub-sequences per sample (sub-sequence batches only)."""
        self._need_sub()
        bounds = np.searchsorted(cast(np.ndarray, self.sub_sequence_start_positions),
                                 self.sequence_start_positions)
        return np.diff(bounds)

    def _need_sub(self) -> None:
        if self.sub_sequence_start_positions is None:
            raise ValueError("this SequenceValue has no sub-sequences")

    def _take(self, start: int, stop: int) -> Any:
        v = self.values
        if isinstance(v, SparseValue):
            indptr = v.indptr[start : stop + 1]
            lo, hi = int(indptr[0]), int(indptr[-1])
            return SparseValue(
                indptr - lo,
                v.indices[lo:hi],
                None if v.values is None else v.values[lo:hi],
                (stop - start, v.shape[1]),
            )
        return v[start:stop]

    def sequences(self) -> list:
        """Per sample: its tokens (a view of ``values``), or for sub-sequences the list of
        its sub-sequences' tokens."""
        starts = self.sequence_start_positions.tolist()
        if self.sub_sequence_start_positions is None:
            return [self._take(a, b) for a, b in zip(starts[:-1], starts[1:])]
        sub = self.sub_sequence_start_positions.tolist()
        bounds = np.searchsorted(self.sub_sequence_start_positions, starts).tolist()
        return [
            [self._take(sub[j], sub[j + 1]) for j in range(lo, hi)]
            for lo, hi in zip(bounds[:-1], bounds[1:])
        ]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SequenceValue):
            return NotImplemented
        return (
            _arrays_equal(self.sequence_start_positions, other.sequence_start_positions)
            and _arrays_equal(self.sub_sequence_start_positions, other.sub_sequence_start_positions)
            and _arrays_equal(self.values, other.values)
        )

    __hash__ = None  # type: ignore[assignment]
