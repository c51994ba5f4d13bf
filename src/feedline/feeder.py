"""``DataFeeder``: turn a batch of samples into the arrays a model takes.

A batch reader yields lists of samples; each sample is a tuple (or list) of columns. A
:class:`DataFeeder` knows the declared inputs — ``(name, type)`` pairs made with
:mod:`feedline.data_type` — and a *feeding map* saying which column holds which input.
Calling it on a batch returns ``{name: value}``, one value per declared input, in the
declaration order:

================================  =============================================================
input type                        value
================================  =============================================================
dense (``dense_vector/array``)    C-contiguous ``numpy`` array ``(batch, *shape)``, float32
one id (``integer_value``)        int64 vector ``(batch,)``
several ids (``integer_values``)  int64 array ``(batch, count)``
sparse (binary or float)          :class:`SparseValue`: CSR with ``indptr``, ``indices`` and
                                  ``values`` (``None`` for binary), ``shape == (batch, dim)``
``*_sequence``                    :class:`SequenceValue`: the tokens of all samples in one flat
                                  value (as above, one row per token) plus
                                  ``sequence_start_positions`` ``[0, l0, l0+l1, ...]``
``*_sub_sequence``                :class:`SequenceValue` that also has
                                  ``sub_sequence_start_positions``; both index *tokens*
================================  =============================================================

Each column is converted in two passes: the sizes first (lengths of samples,
sub-sequences and sparse rows, which give the start positions), then one vectorised
fill of a numpy array of the final size. Sparse rows come out canonical: column
indices sorted within each row, no duplicates.

>>> from feedline import data_type as dt
>>> feeder = DataFeeder([("image", dt.dense_vector(3)), ("label", dt.integer_value(10)),
...                      ("words", dt.integer_value_sequence(100))])
>>> out = feeder([([0.0, 0.5, 1.0], 7, [4, 5, 6]), ([1.0, 1.0, 1.0], 2, [9])])
>>> out["image"].shape, out["image"].dtype.name, out["label"].tolist()
((2, 3), 'float32', [7, 2])
>>> out["words"].values.tolist(), out["words"].sequence_start_positions.tolist()
([4, 5, 6, 9], [0, 3, 4])

**The feeding map** (``feeding=``) says where each input is in a sample:

* ``None`` (default): the declaration order, column ``i`` for the ``i``-th input (and,
  when the samples are dicts, the key equal to the input's name);
* a dict ``{name: column}``: columns may be reused by several inputs and columns nobody
  names are skipped; a string ``column`` is a key for samples that are dicts;
* a list of names, one per column (``None`` skips that column).

Every declared input must be fed: an input missing from the feeding map raises
``ValueError`` when the feeder is made (as an unfed placeholder does in TensorFlow), and so
does a name in the map that is not declared.

**Bad samples** raise :class:`~feedline.exceptions.FeedError` (a ``ValueError``) whose
message names the input, the sample's index in the batch (and the token / sub-sequence
/ element inside it), what was expected and what came:

>>> feeder([([0.0, 0.5], 7, [4])])
Traceback (most recent call last):
...
feedline.exceptions.FeedError: input 'image', sample 0 in the batch: expected a dense value of shape (3,), got shape (2,)

Values must be numbers — Python or numpy ints and floats (bools count as 0 and 1, as
in Python): strings (even ``"2.5"``), ``None`` and other objects raise. Ids must be integral
(``3.0`` is id 3, ``3.5`` raises) and lie in ``[0, value_range)``; sparse indices in
``[0, dim)``.

Variable-length features parsed from TFRecord ``Example`` protos plug into the same
structures: :func:`from_sparse_tensor` takes TensorFlow's sparse layout
(``indices``/``values``/``dense_shape``), :func:`from_ragged` takes ragged values with
row lengths, and :func:`from_parsed` takes either as :mod:`feedline.example` returns it.
"""

from __future__ import annotations

import itertools
import math
import operator
import reprlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from feedline._validate import one_of
from feedline.data_type import (
    DENSE,
    INTEGER,
    INTEGERS,
    SPARSE_BINARY,
    InputType,
)
from feedline.exceptions import FeedError

__all__ = [
    "DataFeeder",
    "SparseValue",
    "SequenceValue",
    "from_sparse_tensor",
    "from_ragged",
    "from_parsed",
]

_chain = itertools.chain.from_iterable
_first = operator.itemgetter(0)
_second = operator.itemgetter(1)
_repr = reprlib.Repr()
_repr.maxstring = 40
_repr.maxother = 40
_repr.maxlist = 6
_repr.maxtuple = 6


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
    ``indices[indptr[r]:indptr[r + 1]]``. ``indptr`` (``rows + 1``) and ``indices``
    (``nnz``) are int64; ``values`` is ``None`` for binary vectors (every stored entry is
    1). Made by the feeder, columns are sorted within a row and unique. ``==`` compares
    shapes, dtypes and contents.

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
        """``values``, or ones of ``dtype`` for a binary vector."""
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
        """The dense ``(rows, dim)`` array (float32 for binary unless ``dtype`` says)."""
        data = self.data(np.float32 if dtype is None else dtype)
        out = np.zeros(self.shape, dtype=data.dtype if dtype is None else dtype)
        rows = np.repeat(np.arange(self.shape[0]), self.row_lengths)
        np.add.at(out, (rows, self.indices), data)
        return out

    def to_scipy(self) -> Any:
        """A ``scipy.sparse.csr_array`` (needs scipy)."""
        from feedline._optional import require

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

    * ``values``: the tokens of every sample, one after another: a numpy array with
      one row per token (``(tokens, *shape)`` for dense, ``(tokens,)`` for ids), or a
      :class:`SparseValue` with one row per token.
    * ``sequence_start_positions``: int64, ``num_sequences + 1`` entries
      ``[0, l0, l0+l1, ...]``; sample ``i`` is tokens
      ``sequence_start_positions[i]:sequence_start_positions[i + 1]``.
    * ``sub_sequence_start_positions``: for sub-sequences only (else ``None``): int64,
      one entry per sub-sequence of the whole batch plus one, also indexing tokens.
      The sub-sequences of sample ``i`` are those that start in
      ``[sequence_start_positions[i], sequence_start_positions[i + 1])``. A sequence may
      be empty (no tokens, or no sub-sequences), but a sub-sequence may not: an empty one
      would have no position of its own in this format (Paddle's), so the feeder and
      :func:`from_ragged` reject it.

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
        return np.diff(self.sub_sequence_start_positions)

    @property
    def num_sub_sequences(self) -> np.ndarray:
        """Sub-sequences per sample (sub-sequence batches only)."""
        self._need_sub()
        bounds = np.searchsorted(self.sub_sequence_start_positions, self.sequence_start_positions)
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


# ====================================================================== conversion core


class _Bad(Exception):
    """A token that does not convert: ``pos`` is its index in the flat token list,
    ``element`` its index inside a sparse row (or ``None``)."""

    def __init__(self, pos: int, expected: str, got: str, element: int | None = None) -> None:
        super().__init__(pos, expected, got, element)
        self.pos = pos
        self.expected = expected
        self.got = got
        self.element = element


def _describe(x: Any) -> str:
    if x is None:
        return "None"
    if isinstance(x, (bool, np.bool_)):
        return f"bool {x!r}"
    if isinstance(x, (int, float, np.integer, np.floating)):
        return repr(x.item() if isinstance(x, np.generic) else x)
    if isinstance(x, np.ndarray):
        return f"an array of shape {x.shape} and dtype {x.dtype}"
    return f"{type(x).__name__} {_repr.repr(x)}"


_NUMERIC = "biuf"


def _as_numbers(x: Any) -> np.ndarray | None:
    """``np.asarray(x)`` when ``x`` holds only numbers (bools count), else ``None``."""
    try:
        a = np.asarray(x)
    except (TypeError, ValueError, OverflowError):  # ragged nesting, odd objects
        return None
    return a if a.dtype.kind in _NUMERIC else None


def _is_real(x: Any) -> bool:
    """A Python or numpy number (bools included, as Python counts them), not a string."""
    if isinstance(x, np.ndarray):
        return x.ndim == 0 and x.dtype.kind in _NUMERIC
    return isinstance(x, (int, float, np.integer, np.floating, np.bool_))


def _integral_in_range(f: np.ndarray, hi: int) -> np.ndarray:
    """Boolean mask of entries of float array ``f`` that are NOT integers in [0, hi)."""
    with np.errstate(invalid="ignore"):
        return ~((f >= 0) & (f < hi) & (np.floor(f) == f))


def _id_ok(x: Any, hi: int) -> bool:
    if not _is_real(x):
        return False
    v = float(x)
    return math.isfinite(v) and v == math.floor(v) and 0 <= int(x) < hi


def _ids(tokens: Sequence, hi: int, dtype: np.dtype, what: str) -> np.ndarray:
    """Convert a sequence of scalars to ids in [0, hi); raise _Bad at the first bad one.

    Ints (Python or numpy, bools as 0/1) and integral floats pass; strings, ``None``,
    nested lists and everything else raise."""
    n = len(tokens)
    a = _as_numbers(tokens)
    if a is not None and a.shape == (n,):
        if a.dtype.kind == "f":
            bad = _integral_in_range(a, hi)
        else:
            bad = (a < 0) | (a >= hi)
        if not bad.any():
            return a.astype(dtype, copy=False)
        pos = int(bad.argmax())
        raise _Bad(pos, f"{what} in [0, {hi})", _describe(tokens[pos]))
    for pos, x in enumerate(tokens):
        if not _id_ok(x, hi):
            raise _Bad(pos, f"{what} in [0, {hi})", _describe(x))
    raise AssertionError("unreachable")  # pragma: no cover


def _dense(t: InputType, tokens: list) -> np.ndarray:
    dtype = t.np_dtype
    shape = (len(tokens), *t.shape)
    if not tokens:
        return np.empty(shape, dtype=dtype)
    a = _as_numbers(tokens)
    if a is not None and a.shape == shape:
        return np.ascontiguousarray(a, dtype=dtype)
    expected = f"a dense value of shape {t.shape}"
    rows = []
    for pos, x in enumerate(tokens):
        if x is None or isinstance(x, (str, bytes, Mapping)):
            raise _Bad(pos, expected, _describe(x))
        try:
            b = np.asarray(x)
        except (TypeError, ValueError, OverflowError):  # ragged nested lists
            raise _Bad(pos, expected, f"a ragged {_describe(x)}") from None
        if b.shape != t.shape:
            raise _Bad(pos, expected, f"shape {b.shape}" if b.ndim else _describe(x))
        if b.dtype.kind not in _NUMERIC:
            raise _Bad(pos, f"{expected} of numbers", _describe(x))
        rows.append(b)
    # Every token converts on its own (e.g. arrays of mixed dtypes): stack them.
    out = np.empty(shape, dtype=dtype)
    np.stack(rows, out=out, casting="unsafe")
    return out


def _integers(t: InputType, tokens: list) -> np.ndarray:
    hi = t.value_range
    count = t.shape[0]
    n = len(tokens)
    if count is None:
        if not tokens:
            return np.empty((0, 0), dtype=t.np_dtype)
        try:
            count = len(tokens[0])
        except TypeError:
            raise _Bad(0, "a list of integer ids", _describe(tokens[0])) from None
    expected = f"{count} integer ids" + ("" if t.shape[0] is not None else " (as in sample 0)")
    a = _as_numbers(tokens)
    if a is None or a.shape != (n, count):
        for pos, x in enumerate(tokens):
            if x is None or isinstance(x, (str, bytes, Mapping)):
                raise _Bad(pos, expected, _describe(x))
            try:
                b = np.asarray(x)
            except (TypeError, ValueError, OverflowError):
                raise _Bad(pos, expected, f"a ragged {_describe(x)}") from None
            if b.shape != (count,):
                raise _Bad(pos, expected, f"shape {b.shape}" if b.ndim else _describe(x))
            for k, v in enumerate(x.tolist() if isinstance(x, np.ndarray) else x):
                if not _id_ok(v, hi):
                    raise _Bad(pos, f"integer ids in [0, {hi})", _describe(v), element=k)
        raise AssertionError("unreachable")  # pragma: no cover
    flat = a.reshape(-1)
    bad = _integral_in_range(flat, hi) if a.dtype.kind == "f" else (flat < 0) | (flat >= hi)
    if bad.any():
        pos, k = divmod(int(bad.argmax()), count)
        raise _Bad(pos, f"integer ids in [0, {hi})", _describe(tokens[pos][k]), element=k)
    return a.astype(t.np_dtype, copy=False)


def _lengths(items: list, expected: str) -> np.ndarray:
    """int64 lengths of ``items``; raise _Bad at an item that is not a sized collection."""
    try:
        lengths = np.fromiter(map(len, items), dtype=np.int64, count=len(items))
    except TypeError:
        lengths = None
    if lengths is None or any(isinstance(x, (str, bytes)) for x in items):
        for pos, x in enumerate(items):
            if isinstance(x, (str, bytes)) or not hasattr(x, "__len__") or \
                    isinstance(x, np.ndarray) and x.ndim == 0:
                raise _Bad(pos, expected, _describe(x))
        raise AssertionError("unreachable")  # pragma: no cover
    return lengths


def _offsets(lengths: np.ndarray) -> np.ndarray:
    out = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def _row_of(pos: int, indptr: np.ndarray) -> int:
    return int(np.searchsorted(indptr, pos, side="right")) - 1


def _sparse(t: InputType, rows: list) -> SparseValue:
    dim = t.shape[0]
    binary = t.kind == SPARSE_BINARY
    n = len(rows)
    row_what = "a list of sparse indices" if binary else "(index, value) pairs or a dict"
    lengths = _lengths(rows, row_what)
    indptr = _offsets(lengths)
    nnz = int(indptr[-1])
    values = None
    try:
        if binary:
            flat = list(_chain(rows))
            indices = _ids(flat, dim, np.dtype(np.int64), "a sparse index")
        else:
            indices, values = _sparse_pairs(t, rows, nnz)
    except _Bad as bad:
        row = _row_of(bad.pos, indptr)
        raise _Bad(row, bad.expected, bad.got, element=bad.pos - int(indptr[row])) from None
    if nnz > 1:
        row_ids = np.repeat(np.arange(n, dtype=np.int64), lengths)
        same_row = row_ids[1:] == row_ids[:-1]
        if (np.diff(indices)[same_row] <= 0).any():
            if n * dim < 2**62:  # one int64 key: a stable sort is several times faster
                order = np.argsort(row_ids * dim + indices, kind="stable")
            else:  # pragma: no cover - astronomically large batches
                order = np.lexsort((indices, row_ids))
            indices = indices[order]
            if values is not None:
                values = values[order]
            dup = same_row & (np.diff(indices) == 0)
            if dup.any():
                k = int(dup.argmax()) + 1
                raise _Bad(
                    int(row_ids[k]), "distinct sparse indices",
                    f"index {int(indices[k])} more than once",
                )
    return SparseValue(indptr, indices, values, (n, dim))


def _sparse_pairs(t: InputType, rows: list, nnz: int) -> tuple[np.ndarray, np.ndarray]:
    dim = t.shape[0]
    if nnz == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=t.np_dtype)
    pairs = list(_chain(r.items() if isinstance(r, Mapping) else r for r in rows))
    # itemgetter + map make no per-pair objects the garbage collector tracks (zip(*pairs)
    # would make one iterator per pair, and trigger collections over the whole batch)
    try:
        idx = list(map(_first, pairs))
        val = list(map(_second, pairs))  # IndexError for a pair shorter than 2
        if sum(map(len, pairs)) != 2 * nnz:  # so no pair is longer than 2 either
            raise ValueError("not a pair")
        v = _as_numbers(val)
    except (TypeError, ValueError, KeyError, IndexError):
        v = None
    if v is None or v.shape != (nnz,):
        for pos, p in enumerate(pairs):
            if isinstance(p, (str, bytes, Mapping)):
                raise _Bad(pos, "an (index, value) pair", _describe(p))
            try:
                _, x = p
            except (TypeError, ValueError):
                raise _Bad(pos, "an (index, value) pair", _describe(p)) from None
            if not _is_real(x):
                raise _Bad(pos, "a numeric value", _describe(x))
        raise AssertionError("unreachable")  # pragma: no cover
    indices = _ids(idx, dim, np.dtype(np.int64), "a sparse index")
    return indices, v.astype(t.np_dtype, copy=False)


def _convert_tokens(t: InputType, tokens: list) -> Any:
    if t.kind == DENSE:
        return _dense(t, tokens)
    if t.kind == INTEGER:
        return _ids(tokens, t.value_range, t.np_dtype, "an integer id")
    if t.kind == INTEGERS:
        return _integers(t, tokens)
    return _sparse(t, tokens)


def _convert_column(name: str, t: InputType, col: list) -> Any:
    """Convert one column (a list of samples) of input ``name``; FeedError on bad data."""
    where = f"input {name!r}, sample"
    try:
        if t.seq_type == 0:
            try:
                return _convert_tokens(t, col)
            except _Bad as bad:
                elem = "" if bad.element is None else f", element {bad.element}"
                raise FeedError(
                    f"{where} {bad.pos} in the batch{elem}: expected {bad.expected}, got {bad.got}"
                ) from None
        seq_what = "a sequence (a list of tokens)" if t.seq_type == 1 else \
            "a list of sub-sequences"
        try:
            seq_lengths = _lengths(col, seq_what)
        except _Bad as bad:
            raise FeedError(
                f"{where} {bad.pos} in the batch: expected {bad.expected}, got {bad.got}"
            ) from None
        if t.seq_type == 1:
            starts = _offsets(seq_lengths)
            tokens = list(_chain(col))
            try:
                values = _convert_tokens(t, tokens)
            except _Bad as bad:
                i = _row_of(bad.pos, starts)
                elem = "" if bad.element is None else f", element {bad.element}"
                raise FeedError(
                    f"{where} {i} in the batch, token {bad.pos - int(starts[i])}{elem}: "
                    f"expected {bad.expected}, got {bad.got}"
                ) from None
            return SequenceValue(values, starts)
        # sub-sequences: samples -> sub-sequences -> tokens
        sample_subs = _offsets(seq_lengths)
        subs = list(_chain(col))
        try:
            sub_lengths = _lengths(subs, "a sub-sequence (a list of tokens)")
        except _Bad as bad:
            i = _row_of(bad.pos, sample_subs)
            raise FeedError(
                f"{where} {i} in the batch, sub-sequence {bad.pos - int(sample_subs[i])}: "
                f"expected {bad.expected}, got {bad.got}"
            ) from None
        if not sub_lengths.all():
            s = int(np.argmin(sub_lengths))
            i = _row_of(s, sample_subs)
            raise FeedError(
                f"{where} {i} in the batch, sub-sequence {s - int(sample_subs[i])}: "
                "expected a non-empty sub-sequence, got an empty one"
            )
        sub_starts = _offsets(sub_lengths)
        tokens = list(_chain(subs))
        try:
            values = _convert_tokens(t, tokens)
        except _Bad as bad:
            s = _row_of(bad.pos, sub_starts)
            i = _row_of(s, sample_subs)
            elem = "" if bad.element is None else f", element {bad.element}"
            raise FeedError(
                f"{where} {i} in the batch, sub-sequence {s - int(sample_subs[i])}, "
                f"token {bad.pos - int(sub_starts[s])}{elem}: "
                f"expected {bad.expected}, got {bad.got}"
            ) from None
        return SequenceValue(values, sub_starts[sample_subs], sub_starts)
    except FeedError:
        raise
    except (TypeError, ValueError) as exc:  # pragma: no cover - a case the checks missed
        raise FeedError(f"input {name!r}: {exc}") from exc


# ====================================================================== the feeder


class DataFeeder:
    """Convert batches of samples into ``{name: value}`` for the declared inputs.

    ``data_types``: a list of ``(name, type)`` pairs, types from :mod:`feedline.data_type`.
    ``feeding``: where each input sits in a sample; see the module docstring.

    >>> from feedline import data_type as dt
    >>> feeder = DataFeeder([("label", dt.integer_value(3)), ("x", dt.dense_vector(1))],
    ...                     feeding={"x": 0, "label": 2})
    >>> out = feeder([([0.5], "ignored", 2), ([1.5], "ignored", 0)])
    >>> list(out), out["label"].tolist(), out["x"].ravel().tolist()
    (['label', 'x'], [2, 0], [0.5, 1.5])
    """

    def __init__(
        self,
        data_types: Sequence[tuple[str, InputType]],
        feeding: Mapping[str, int | str] | Sequence[str | None] | None = None,
    ) -> None:
        types: dict[str, InputType] = {}
        if isinstance(data_types, (str, bytes, Mapping)) or not isinstance(data_types, Sequence):
            raise TypeError(
                f"`data_types` must be a list of (name, type) pairs, got {type(data_types).__name__}"
            )
        for entry in data_types:
            if not (isinstance(entry, (tuple, list)) and len(entry) == 2):
                raise TypeError(f"`data_types` entries must be (name, type) pairs, got {entry!r}")
            name, tp = entry
            if not isinstance(name, str):
                raise TypeError(f"input names must be str, got {name!r}")
            if not isinstance(tp, InputType):
                raise TypeError(
                    f"the type of input {name!r} must be a feedline.data_type InputType, got {tp!r}"
                )
            if name in types:
                raise ValueError(f"input {name!r} is declared twice in `data_types`")
            types[name] = tp
        self.data_types: tuple[tuple[str, InputType], ...] = tuple(types.items())
        self._by_default = feeding is None
        self.feeding: dict[str, int | str] = self._feeding_map(types, feeding)

    @staticmethod
    def _feeding_map(types: dict, feeding: Any) -> dict[str, int | str]:
        if feeding is None:
            return {name: i for i, name in enumerate(types)}
        if isinstance(feeding, Mapping):
            fmap = {}
            for name, key in feeding.items():
                if isinstance(key, bool) or not isinstance(key, (int, str)):
                    raise TypeError(
                        f"`feeding[{name!r}]` must be a column index (int) or a key (str), got {key!r}"
                    )
                if isinstance(key, int) and key < 0:
                    raise ValueError(f"`feeding[{name!r}]` must be a non-negative int, got {key!r}")
                fmap[name] = key
        elif isinstance(feeding, Sequence) and not isinstance(feeding, (str, bytes)):
            fmap = {}
            for i, name in enumerate(feeding):
                if name is None:
                    continue
                if name in fmap:
                    raise ValueError(f"`feeding` names {name!r} twice")
                fmap[name] = i
        else:
            raise TypeError(
                f"`feeding` must be None, a dict name -> column or a list of names, got {feeding!r}"
            )
        unknown = [n for n in fmap if n not in types]
        if unknown:
            raise ValueError(
                f"`feeding` names {', '.join(map(repr, unknown))}, which is not a declared input "
                f"(declared: {', '.join(map(repr, types))})"
            )
        unfed = [n for n in types if n not in fmap]
        if unfed:
            raise ValueError(
                f"input {', '.join(map(repr, unfed))} is declared but not fed: "
                "`feeding` has no column for it"
            )
        return {name: fmap[name] for name in types}

    @property
    def input_names(self) -> list[str]:
        """The declared input names, in declaration order."""
        return [name for name, _ in self.data_types]

    def __repr__(self) -> str:
        inner = ", ".join(f"({n!r}, {t!r})" for n, t in self.data_types)
        return f"DataFeeder([{inner}], feeding={self.feeding!r})"

    def __call__(self, batch: Sequence) -> dict[str, Any]:
        """Convert ``batch`` (a list of samples) to ``{name: value}``."""
        if isinstance(batch, (str, bytes, Mapping)):
            raise TypeError(f"a batch must be a list of samples, got {type(batch).__name__}")
        if not isinstance(batch, Sequence):
            batch = list(batch)
        by_name = self._by_default and len(batch) > 0 and isinstance(batch[0], Mapping)
        out = {}
        for name, tp in self.data_types:
            key = name if by_name else self.feeding[name]
            out[name] = _convert_column(name, tp, self._column(batch, name, key))
        return out

    convert = __call__

    @staticmethod
    def _column(batch: Sequence, name: str, key: int | str) -> list:
        try:
            return [s[key] for s in batch]
        except (IndexError, KeyError, TypeError):
            pass
        for i, s in enumerate(batch):
            try:
                s[key]
                continue
            except (IndexError, KeyError, TypeError):
                pass
            where = f"input {name!r}, sample {i} in the batch"
            got = f"{type(s).__name__} {_repr.repr(s)}"
            if isinstance(key, int):
                if isinstance(s, (Mapping, str, bytes)) or not isinstance(s, Sequence):
                    raise FeedError(f"{where}: expected a tuple or list of columns, got {got}")
                raise FeedError(
                    f"{where}: expected a sample with at least {key + 1} columns "
                    f"(the feeding map reads column {key}), got {len(s)} columns"
                )
            if not isinstance(s, Mapping):
                raise FeedError(f"{where}: expected a dict with key {key!r}, got {got}")
            keys = ", ".join(map(repr, list(s)[:8]))
            raise FeedError(f"{where}: expected a dict with key {key!r}, got keys [{keys}]")
        raise AssertionError("unreachable")  # pragma: no cover


# ====================================================================== TF layouts


def from_sparse_tensor(
    indices: Any, values: Any, dense_shape: Any, *, layout: str = "csr", name: str | None = None
) -> SparseValue | SequenceValue:
    """Convert a rank-2 sparse tensor in TensorFlow's layout to a feedline value.

    ``indices`` is ``(nnz, 2)`` (row, column) pairs, ``values`` is ``(nnz,)``, and
    ``dense_shape`` is ``(rows, columns)`` — what TF's ``VarLenFeature`` parsing (and the
    Example parser's sparse results) produce for a batch. Entries may come in any order.

    * ``layout="csr"``: a :class:`SparseValue` of ``shape == dense_shape`` whose
      ``values`` keep their dtype (feed it as a sparse float vector);
    * ``layout="sequence"``: a :class:`SequenceValue` with one sequence per row — the
      values of row ``r`` in column order. The tensor must be *ragged-right* (row ``r``
      fills columns ``0 .. len_r - 1`` with no gaps), as VarLen features are.

    Duplicate entries, entries outside ``dense_shape`` and gaps (``"sequence"``) raise
    :class:`~feedline.exceptions.FeedError`; ``name`` names the input in messages.

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
        raise FeedError(f"{label}: expected a dense_shape of 2 ints, got {_describe(dense_shape)}")
    rows, cols = (int(s) for s in shape)
    if rows < 0 or cols < 0:
        raise FeedError(f"{label}: expected a non-negative dense_shape, got {shape.tolist()}")
    if idx.size == 0:
        idx = idx.reshape(0, 2).astype(np.int64)
    if idx.ndim != 2 or idx.shape[1] != 2 or idx.dtype.kind not in "iu":
        raise FeedError(f"{label}: expected integer indices of shape (nnz, 2), got {_describe(idx)}")
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
    indptr = _offsets(np.bincount(r, minlength=rows))
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

    ``values`` holds the tokens of every row one after another (axis 0); ``row_lengths[i]``
    is the number of tokens of sample ``i``. For two ragged levels pass
    ``sub_row_lengths``: then ``row_lengths[i]`` counts the sub-sequences of sample ``i``
    and ``sub_row_lengths[j]`` the tokens of sub-sequence ``j`` (TF's
    ``nested_row_lengths``, outermost first); sub-sequences must not be empty (see
    :class:`SequenceValue`). ``row_lengths`` may also be TF's ``nested_row_lengths``
    itself — a tuple of one or two 1-D arrays, outermost first — as the Example parser's
    ``RaggedValue.row_lengths`` is. ``values`` is kept as it is (no copy when it is
    already an array).

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
            raise FeedError(f"{label}: expected `{what}` to be 1-D ints, got {_describe(a)}")
        if (a < 0).any():
            raise FeedError(f"{label}: expected non-negative `{what}`, got {a.tolist()[:8]}")
        if int(a.sum()) != total:
            raise FeedError(
                f"{label}: expected `{what}` to sum to {total}, got {int(a.sum())}"
            )
        return a.astype(np.int64, copy=False)

    if sub_row_lengths is None:
        lengths = lengths_of(row_lengths, "row_lengths", len(vals))
        return SequenceValue(vals, _offsets(lengths))
    sub = lengths_of(sub_row_lengths, "sub_row_lengths", len(vals))
    if not sub.all():
        raise FeedError(
            f"{label}: expected non-empty sub-sequences, got sub-sequence "
            f"{int(np.argmin(sub))} of length 0"
        )
    outer = lengths_of(row_lengths, "row_lengths", len(sub))
    sub_starts = _offsets(sub)
    return SequenceValue(vals, sub_starts[_offsets(outer)], sub_starts)


def _is_nested_lengths(x: Any) -> bool:
    return (
        isinstance(x, (tuple, list))
        and len(x) > 0
        and all(isinstance(r, (np.ndarray, list, tuple)) for r in x)
    )


def from_parsed(value: Any, *, layout: str = "sequence", name: str | None = None) -> Any:
    """Convert one parsed feature of :mod:`feedline.example` to a feeder value.

    * a sparse result (``indices``, ``values``, ``dense_shape``; a ``VarLenFeature`` of a
      batch, rank 2) -> :func:`from_sparse_tensor` with ``layout`` (``"sequence"``:
      one sequence per record; ``"csr"``: a :class:`SparseValue`);
    * a ragged result (``values``, ``row_lengths``; a ``RaggedFeature``) ->
      :func:`from_ragged`, one or two ragged levels;
    * a numpy array (a ``FixedLenFeature``) is returned as it is.

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
