"""The :class:`DataFeeder` class and its column converters; documented in
:mod:`feedline.feeder`.

>>> from feedline import data_type
>>> DataFeeder([("x", data_type.dense_vector(2))], {"x": 0})([([1, 2],)])["x"].shape
(1, 2)
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import numpy as np

from feedline.data_type import (
    DENSE,
    INTEGER,
    INTEGERS,
    SPARSE_BINARY,
    InputType,
)
from feedline.exceptions import FeedError
from feedline.feeder.parsed import from_parsed, from_ragged, from_sparse_tensor
from feedline.feeder.values import SequenceValue, SparseValue, describe, offsets_of, short_repr

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

    def feed_error(self, place: str) -> FeedError:
        """The FeedError for this token at ``place`` (the sample, sub-sequence, token)."""
        elem = "" if self.element is None else f", element {self.element}"
        return FeedError(f"{place}{elem}: expected {self.expected}, got {self.got}")


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
        raise _Bad(pos, f"{what} in [0, {hi})", describe(tokens[pos]))
    for pos, x in enumerate(tokens):
        if not _id_ok(x, hi):
            raise _Bad(pos, f"{what} in [0, {hi})", describe(x))
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
            raise _Bad(pos, expected, describe(x))
        try:
            b = np.asarray(x)
        except (TypeError, ValueError, OverflowError):  # ragged nested lists
            raise _Bad(pos, expected, f"a ragged {describe(x)}") from None
        if b.shape != t.shape:
            raise _Bad(pos, expected, f"shape {b.shape}" if b.ndim else describe(x))
        if b.dtype.kind not in _NUMERIC:
            raise _Bad(pos, f"{expected} of numbers", describe(x))
        rows.append(b)
    # Every token converts on its own (e.g. arrays of mixed dtypes): stack them.
    out = np.empty(shape, dtype=dtype)
    np.stack(rows, out=out, casting="unsafe")
    return out


def _integers(t: InputType, tokens: list) -> np.ndarray:
    hi = t.value_range
    assert hi is not None  # integer inputs have a value range (checked by InputType)
    count = t.shape[0]
    n = len(tokens)
    if count is None:
        if not tokens:
            return np.empty((0, 0), dtype=t.np_dtype)
        try:
            count = len(tokens[0])
        except TypeError:
            raise _Bad(0, "a list of integer ids", describe(tokens[0])) from None
    expected = f"{count} integer ids" + ("" if t.shape[0] is not None else " (as in sample 0)")
    a = _as_numbers(tokens)
    if a is None or a.shape != (n, count):
        for pos, x in enumerate(tokens):
            if x is None or isinstance(x, (str, bytes, Mapping)):
                raise _Bad(pos, expected, describe(x))
            try:
                b = np.asarray(x)
            except (TypeError, ValueError, OverflowError):
                raise _Bad(pos, expected, f"a ragged {describe(x)}") from None
            if b.shape != (count,):
                raise _Bad(pos, expected, f"shape {b.shape}" if b.ndim else describe(x))
            for k, v in enumerate(x.tolist() if isinstance(x, np.ndarray) else x):
                if not _id_ok(v, hi):
                    raise _Bad(pos, f"integer ids in [0, {hi})", describe(v), element=k)
        raise AssertionError("unreachable")  # pragma: no cover
    flat = a.reshape(-1)
    bad = _integral_in_range(flat, hi) if a.dtype.kind == "f" else (flat < 0) | (flat >= hi)
    if bad.any():
        pos, k = divmod(int(bad.argmax()), count)
        raise _Bad(pos, f"integer ids in [0, {hi})", describe(tokens[pos][k]), element=k)
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
                raise _Bad(pos, expected, describe(x))
        raise AssertionError("unreachable")  # pragma: no cover
    return lengths


def _row_of(pos: int, indptr: np.ndarray) -> int:
    return int(np.searchsorted(indptr, pos, side="right")) - 1


def _sparse(t: InputType, rows: list) -> SparseValue:
    dim = t.shape[0]
    binary = t.kind == SPARSE_BINARY
    n = len(rows)
    row_what = "a list of sparse indices" if binary else "(index, value) pairs or a dict"
    lengths = _lengths(rows, row_what)
    indptr = offsets_of(lengths)
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
                raise _Bad(pos, "an (index, value) pair", describe(p))
            try:
                _, x = p
            except (TypeError, ValueError):
                raise _Bad(pos, "an (index, value) pair", describe(p)) from None
            if not _is_real(x):
                raise _Bad(pos, "a numeric value", describe(x))
        raise AssertionError("unreachable")  # pragma: no cover
    indices = _ids(idx, dim, np.dtype(np.int64), "a sparse index")
    return indices, v.astype(t.np_dtype, copy=False)


def _convert_tokens(t: InputType, tokens: list) -> Any:
    if t.kind == DENSE:
        return _dense(t, tokens)
    if t.kind == INTEGER:
        # integer inputs have a value range and a dtype (checked by InputType)
        return _ids(tokens, cast(int, t.value_range), cast(np.dtype, t.np_dtype), "an integer id")
    if t.kind == INTEGERS:
        return _integers(t, tokens)
    return _sparse(t, tokens)


def _tokens_or_feed_error(t: InputType, tokens: list, place: Callable[[int], str]) -> Any:
    """``_convert_tokens``; a bad token raises FeedError at ``place(its position)``."""
    try:
        return _convert_tokens(t, tokens)
    except _Bad as bad:
        raise bad.feed_error(place(bad.pos)) from None


def _convert_column(name: str, t: InputType, col: list) -> Any:
    """Convert one column (a list of samples) of input ``name``; FeedError on bad data."""
    where = f"input {name!r}, sample"
    try:
        if t.seq_type == 0:
            return _tokens_or_feed_error(t, col, lambda pos: f"{where} {pos} in the batch")
        seq_what = "a sequence (a list of tokens)" if t.seq_type == 1 else \
            "a list of sub-sequences"
        try:
            seq_lengths = _lengths(col, seq_what)
        except _Bad as bad:
            raise bad.feed_error(f"{where} {bad.pos} in the batch") from None
        if t.seq_type == 1:
            starts = offsets_of(seq_lengths)
            def token_place(pos: int) -> str:
                i = _row_of(pos, starts)
                return f"{where} {i} in the batch, token {pos - int(starts[i])}"

            return SequenceValue(_tokens_or_feed_error(t, list(_chain(col)), token_place), starts)
        # sub-sequences: samples -> sub-sequences -> tokens
        sample_subs = offsets_of(seq_lengths)
        subs = list(_chain(col))
        try:
            sub_lengths = _lengths(subs, "a sub-sequence (a list of tokens)")
        except _Bad as bad:
            i = _row_of(bad.pos, sample_subs)
            raise bad.feed_error(
                f"{where} {i} in the batch, sub-sequence {bad.pos - int(sample_subs[i])}"
            ) from None
        if not sub_lengths.all():
            s = int(np.argmin(sub_lengths))
            i = _row_of(s, sample_subs)
            raise FeedError(
                f"{where} {i} in the batch, sub-sequence {s - int(sample_subs[i])}: "
                "expected a non-empty sub-sequence, got an empty one"
            )
        sub_starts = offsets_of(sub_lengths)

        def sub_token_place(pos: int) -> str:
            s = _row_of(pos, sub_starts)
            i = _row_of(s, sample_subs)
            return (f"{where} {i} in the batch, sub-sequence {s - int(sample_subs[i])}, "
                    f"token {pos - int(sub_starts[s])}")

        values = _tokens_or_feed_error(t, list(_chain(subs)), sub_token_place)
        return SequenceValue(values, sub_starts[sample_subs], sub_starts)
    except FeedError:
        raise
    except (TypeError, ValueError) as exc:  # pragma: no cover - a case the checks missed
        raise FeedError(f"input {name!r}: {exc}") from exc


# ====================================================================== the feeder


class DataFeeder:
    """Convert batches of samples into ``{name: value}`` for the declared inputs.

    Args:
        data_types: a list of ``(name, type)`` pairs, names str and types from
            :mod:`feedline.data_type`; anything else raises ``TypeError``, a name declared
            twice ``ValueError``.
        feeding: where each input sits in a sample (see :mod:`feedline.feeder`): ``None``
            (the declaration order), a dict ``{name: column or key}`` or a list of names,
            one per column (``None`` skips one). A name that is not declared, or a
            declared input with no column, raises ``ValueError``.

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
        """Convert ``batch`` (a list of samples) to ``{name: value}``.

        Args:
            batch: a list of samples, each a tuple or list of columns (or a dict, keyed as
                the feeding map says); a bad sample raises
                :class:`~feedline.exceptions.FeedError` naming the input and the sample.
        """
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
            got = f"{type(s).__name__} {short_repr.repr(s)}"
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
