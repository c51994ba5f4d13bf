"""SequenceToBatch: reorder a sequence batch into time-major steps for an RNN.

A :class:`~feedline.feeder.SequenceValue` stores its sequences one after another. An
RNN wants them *time-major*: first the first token of every sequence, then the second
token of every sequence that is still running, and so on. As PaddlePaddle's RNN layers
do, the sequences are first sorted by length, longest first; step ``t`` then holds one
row for each of the ``batch_sizes[t]`` longest sequences (those longer than ``t``), in
that order. With ``reverse=True`` each sequence is read from its last token backwards
(step ``t`` holds token ``length - 1 - t``).

The result is exactly what ``torch.nn.utils.rnn.pack_sequence(seqs,
enforce_sorted=False)`` makes (``data``, ``batch_sizes``, ``sorted_indices``,
``unsorted_indices``) when both order sequences of equal length the same way. Here ties
keep their batch order (a stable sort); torch's ``torch.sort`` is not stable, so
:func:`feedline.pytorch.convert.to_torch` passes torch's own order as ``sorted_indices`` when it
builds a ``PackedSequence``.

>>> import numpy as np
>>> from feedline.feeder import SequenceValue
>>> seqs = SequenceValue(np.array([10, 11, 12, 20, 21, 22, 23, 30]), np.array([0, 3, 7, 8]))
>>> packed = sequence_to_batch(seqs)
>>> packed.data.tolist(), packed.batch_sizes.tolist()
([20, 10, 30, 21, 11, 22, 12, 23], [3, 2, 2, 1])
>>> packed.sorted_indices.tolist(), packed.unsorted_indices.tolist()
([1, 0, 2], [1, 0, 2])
>>> batch_to_sequence(packed) == seqs
True
>>> sequence_to_batch(seqs, reverse=True).data.tolist()
[23, 12, 30, 22, 11, 21, 10, 20]

Everything is vectorised numpy: building the order costs a sort of the sequence lengths
and a few passes over the token count, with no Python loop over tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from feedline._internal.validate import one_of
from feedline.feeder import SequenceValue, SparseValue

__all__ = ["SequenceToBatch", "PackedBatch", "sequence_to_batch", "batch_to_sequence", "take_rows"]


def take_rows(values: Any, index: np.ndarray) -> Any:
    """``values[index]`` along the token axis, for numpy arrays and :class:`SparseValue`.

    Args:
        values: one row per token: a numpy array or a :class:`SparseValue` (whose rows
            are gathered into a new CSR value).
        index: int array of the rows to take, in the result's order.

    >>> v = SparseValue(np.array([0, 1, 3]), np.array([2, 0, 1]), None, (2, 3))
    >>> take_rows(v, np.array([1, 0])).to_dense().tolist()
    [[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    """
    if not isinstance(values, SparseValue):
        return values[index]
    lengths = values.row_lengths[index]
    indptr = np.zeros(len(index) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    total = int(indptr[-1])
    src = np.repeat(values.indptr[:-1][index] - indptr[:-1], lengths) + np.arange(total)
    return SparseValue(
        indptr,
        values.indices[src],
        None if values.values is None else values.values[src],
        (len(index), values.shape[1]),
    )


def _put_rows(batch_values: Any, index: np.ndarray, count: int) -> Any:
    """The inverse of :func:`take_rows` for a permutation ``index`` of ``range(count)``."""
    inverse = np.empty(count, dtype=np.int64)
    inverse[index] = np.arange(count, dtype=np.int64)
    return take_rows(batch_values, inverse)


class SequenceToBatch:
    """The time-major order of a sequence batch (a reusable plan).

    Made from ``sequence_start_positions`` (``[0, l0, l0+l1, ...]``). Attributes, all
    int64 numpy arrays:

    * ``sorted_indices``: the sequences, longest first (ties in batch order unless
      ``sorted_indices`` was passed in).
    * ``unsorted_indices``: the inverse permutation of ``sorted_indices``.
    * ``batch_sizes``: ``batch_sizes[t]`` is the number of sequences longer than ``t``;
      ``len(batch_sizes)`` is the longest length.
    * ``batch_start_positions``: ``[0, b0, b0+b1, ...]`` — rows of step ``t`` are
      ``batch_start_positions[t]:batch_start_positions[t + 1]``.
    * ``index``: ``index[r]`` is the token (row of the flat sequence buffer) that
      time-major row ``r`` takes (Paddle's ``seq2BatchIdx``).

    Args:
        sequence_start_positions: ``[0, l0, l0+l1, ...]``, a 1-D int array that starts at
            0 and never decreases, else ``ValueError``.
        reverse: read each sequence from its last token backwards (step ``t`` holds
            token ``length - 1 - t``); ``False`` (the default) reads forwards.
        sorted_indices: fixes the order of equal-length sequences: a permutation of the
            sequences that sorts the lengths in non-increasing order, else
            ``ValueError``. ``None`` (the default) sorts stably, ties in batch order.

    >>> plan = SequenceToBatch([0, 2, 3])
    >>> plan.index.tolist(), plan.batch_sizes.tolist()
    ([0, 2, 1], [2, 1])
    >>> plan.to_batch(np.array([5, 6, 7])).tolist()
    [5, 7, 6]
    """

    def __init__(
        self,
        sequence_start_positions: Any,
        *,
        reverse: bool = False,
        sorted_indices: Any = None,
    ) -> None:
        starts = np.asarray(sequence_start_positions)
        if starts.ndim != 1 or len(starts) < 1 or (starts.size and starts.dtype.kind not in "iu"):
            raise ValueError(
                "`sequence_start_positions` must be a 1-D int array [0, l0, l0+l1, ...], "
                f"got {starts!r}"
            )
        starts = starts.astype(np.int64, copy=False)
        lengths = np.diff(starts)
        if starts[0] != 0 or (lengths < 0).any():
            raise ValueError(
                "`sequence_start_positions` must start at 0 and never decrease, "
                f"got {starts.tolist()[:10]}"
            )
        n = len(lengths)
        if sorted_indices is None:
            order = np.argsort(-lengths, kind="stable")
        else:
            order = np.asarray(sorted_indices).astype(np.int64, copy=False)
            if order.shape != (n,) or not np.array_equal(np.sort(order), np.arange(n)):
                raise ValueError(f"`sorted_indices` must be a permutation of range({n})")
            if (np.diff(lengths[order]) > 0).any():
                raise ValueError("`sorted_indices` must order the sequences longest first")
        sorted_lengths = lengths[order]
        steps = int(sorted_lengths[0]) if n else 0
        # batch_sizes[t] = number of sequences longer than t
        at_most = np.cumsum(np.bincount(sorted_lengths, minlength=steps + 1))
        batch_sizes = (n - at_most[:steps]).astype(np.int64)
        bstarts = np.zeros(steps + 1, dtype=np.int64)
        np.cumsum(batch_sizes, out=bstarts[1:])
        total = int(bstarts[-1])
        step = np.repeat(np.arange(steps, dtype=np.int64), batch_sizes)
        seq = order[np.arange(total, dtype=np.int64) - bstarts[:-1][step]]
        if reverse:
            index = starts[seq + 1] - 1 - step
        else:
            index = starts[seq] + step
        unsorted = np.empty(n, dtype=np.int64)
        unsorted[order] = np.arange(n, dtype=np.int64)

        self.sequence_start_positions = starts
        self.reverse = bool(reverse)
        self.sorted_indices = order
        self.unsorted_indices = unsorted
        self.batch_sizes = batch_sizes
        self.batch_start_positions = bstarts
        self.index = index

    @property
    def num_tokens(self) -> int:
        """Rows in the time-major batch (= tokens in the sequence batch)."""
        return len(self.index)

    def to_batch(self, values: Any) -> Any:
        """Rows of ``values`` (one per token, sequence order) in time-major order.

        Args:
            values: a numpy array or :class:`SparseValue` with one row per token, in
                sequence order; another row count raises ``ValueError``.
        """
        self._check_rows(values)
        return take_rows(values, self.index)

    def to_sequence(self, batch_values: Any) -> Any:
        """The inverse of :meth:`to_batch`: time-major rows back in sequence order.

        Args:
            batch_values: a numpy array or :class:`SparseValue` with one row per token, in
                time-major order; another row count raises ``ValueError``.
        """
        self._check_rows(batch_values)
        return _put_rows(batch_values, self.index, self.num_tokens)

    def _check_rows(self, values: Any) -> None:
        rows = values.shape[0] if isinstance(values, SparseValue) else len(values)
        if rows != self.num_tokens:
            raise ValueError(f"expected {self.num_tokens} rows (one per token), got {rows}")

    def __repr__(self) -> str:
        return (
            f"SequenceToBatch(sequences={len(self.sorted_indices)}, tokens={self.num_tokens}, "
            f"steps={len(self.batch_sizes)}, reverse={self.reverse})"
        )


@dataclass(frozen=True, eq=False)
class PackedBatch:
    """A sequence batch in time-major order, the numpy twin of torch's ``PackedSequence``.

    ``batch_sizes``, ``sorted_indices`` and ``unsorted_indices`` are as in
    :class:`SequenceToBatch`. Made by :func:`sequence_to_batch`.

    Args:
        data: the time-major rows (ndarray or :class:`SparseValue`).
        plan: the :class:`SequenceToBatch` that made it.
        source_starts: the start positions of the :class:`SequenceValue` it came from
            (``sequence`` and ``sub_sequence`` ones), so that :func:`batch_to_sequence`
            restores both levels; ``()`` (the default) restores the plan's own
            sequence start positions only.

    >>> v = SequenceValue(np.array([1, 2, 3, 4, 5]), np.array([0, 2, 5]))
    >>> packed = sequence_to_batch(v)
    >>> type(packed).__name__, packed.data.tolist(), packed.batch_sizes.tolist()
    ('PackedBatch', [3, 1, 4, 2, 5], [2, 2, 1])
    >>> packed.sorted_indices.tolist(), packed.unsorted_indices.tolist()
    ([1, 0], [1, 0])
    """

    data: Any
    plan: SequenceToBatch
    source_starts: tuple = ()

    @property
    def batch_sizes(self) -> np.ndarray:
        return self.plan.batch_sizes

    @property
    def sorted_indices(self) -> np.ndarray:
        return self.plan.sorted_indices

    @property
    def unsorted_indices(self) -> np.ndarray:
        return self.plan.unsorted_indices


def sequence_to_batch(
    value: SequenceValue,
    *,
    reverse: bool = False,
    level: str = "sequence",
    sorted_indices: Any = None,
) -> PackedBatch:
    """Reorder ``value`` time-major; see the module docstring.

    Args:
        value: the sequence batch, a :class:`SequenceValue` (else ``TypeError``).
        reverse: read each sequence from its last token backwards; see
            :class:`SequenceToBatch`.
        level: ``"sequence"`` (the default) reorders the samples' sequences;
            ``"sub_sequence"`` treats every sub-sequence of a sub-sequence batch as one
            sequence (the inner level of a nested RNN) and raises ``ValueError`` for a
            batch without sub-sequences.
        sorted_indices: the order of the sequences, longest first; see
            :class:`SequenceToBatch`. ``None`` sorts stably.

    >>> v = SequenceValue(np.array([1, 2, 3]), np.array([0, 3]), np.array([0, 1, 3]))
    >>> sequence_to_batch(v, level="sub_sequence").data.tolist()
    [2, 1, 3]
    """
    if not isinstance(value, SequenceValue):
        raise TypeError(f"`value` must be a SequenceValue, got {type(value).__name__}")
    one_of("level", level, ("sequence", "sub_sequence"))
    if level == "sequence":
        starts = value.sequence_start_positions
    else:
        if value.sub_sequence_start_positions is None:
            raise ValueError("level='sub_sequence' needs a batch with sub-sequences")
        starts = value.sub_sequence_start_positions
    plan = SequenceToBatch(starts, reverse=reverse, sorted_indices=sorted_indices)
    source = (value.sequence_start_positions, value.sub_sequence_start_positions)
    return PackedBatch(plan.to_batch(value.values), plan, source)


def batch_to_sequence(packed: PackedBatch, data: Any = None) -> SequenceValue:
    """The inverse of :func:`sequence_to_batch`: a :class:`SequenceValue` in batch order.

    The start positions are the ones the batch was made from.

    Args:
        packed: what :func:`sequence_to_batch` returned (else ``TypeError``).
        data: replaces ``packed.data`` (e.g. an RNN's time-major output with the same
            rows); ``None`` (the default) uses ``packed.data``.

    >>> v = SequenceValue(np.array([1, 2, 3]), np.array([0, 1, 3]))
    >>> out = batch_to_sequence(sequence_to_batch(v), np.array([10, 30, 20]))
    >>> out.values.tolist()
    [30, 10, 20]
    """
    if not isinstance(packed, PackedBatch):
        raise TypeError(f"`packed` must be a PackedBatch, got {type(packed).__name__}")
    rows = packed.plan.to_sequence(packed.data if data is None else data)
    if packed.source_starts:
        return SequenceValue(rows, *packed.source_starts)
    return SequenceValue(rows, packed.plan.sequence_start_positions)
