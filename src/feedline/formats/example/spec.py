"""Feature specs and parse results of :mod:`feedline.example` (re-exported there).

>>> FixedLenFeature([2], "float32", default_value=0).default_value
array([0., 0.], dtype=float32)
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from feedline._internal.validate import check_bool

__all__ = [
    "FixedLenFeature",
    "VarLenFeature",
    "RaggedFeature",
    "FixedLenSequenceFeature",
    "SparseTensorValue",
    "RaggedTensorValue",
    "SPECS",
    "normalize_dtype",
]

# --------------------------------------------------------------------------- dtypes

_DTYPES = {
    "int64": "int64",
    "float32": "float32",
    "float": "float32",
    "string": "string",
    "bytes": "string",
    "str": "string",
}
_KIND = {"int64": "int64", "float32": "float", "string": "bytes"}
_KIND_NAME = {"int64": "int64", "float": "float32", "bytes": "string"}
_NP = {"int64": np.int64, "float32": np.float32, "string": object}


def normalize_dtype(value: Any) -> str:
    """Normalise a dtype to ``"int64"``, ``"float32"`` or ``"string"``.

    Args:
        value: ``int``/``np.int64``/``"int64"`` give ``"int64"``; ``float``/``np.float32``/
            ``"float32"``/``"float"`` give ``"float32"``; ``bytes``, ``str``, ``object``,
            ``"string"``, ``"bytes"`` and ``"str"`` give ``"string"``. Anything with one of
            these as its ``name`` (``np.dtype``, ``tf.int64``) is accepted too; any other
            value raises ``ValueError``.

    >>> normalize_dtype(int), normalize_dtype("float32"), normalize_dtype(bytes), normalize_dtype(np.int64)
    ('int64', 'float32', 'string', 'int64')
    >>> normalize_dtype(np.int32)
    Traceback (most recent call last):
    ...
    ValueError: `dtype` must be one of 'int64', 'float32', 'string', got <class 'numpy.int32'>
    """
    if value is int or value is np.int64:
        return "int64"
    if value is float or value is np.float32:
        return "float32"
    if value in (bytes, str, object):
        return "string"
    name = value if isinstance(value, str) else getattr(value, "name", None)
    if name is None:
        try:
            name = np.dtype(value).name
        except TypeError:
            name = None
    if isinstance(name, str) and name in _DTYPES:
        return _DTYPES[name]
    raise ValueError(f"`dtype` must be one of 'int64', 'float32', 'string', got {value!r}")


def _shape(value: Any, name: str = "shape") -> tuple[int, ...]:
    if isinstance(value, numbers.Integral):
        value = (value,)
    try:
        dims = tuple(value)
    except TypeError:
        raise TypeError(f"`{name}` must be a list of non-negative ints, got {value!r}") from None
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 0:
            raise ValueError(f"`{name}` must be a list of non-negative ints, got {value!r}")
    return tuple(int(d) for d in dims)


def _default(value: Any, dtype: str, shape: tuple[int, ...], what: str) -> np.ndarray | None:
    if value is None:
        return None
    if dtype == "string":
        arr = np.empty(np.shape(value), dtype=object)
        flat = np.asarray(value, dtype=object).reshape(arr.shape)
        for idx in np.ndindex(arr.shape):
            v = flat[idx]
            arr[idx] = v.encode("utf-8") if isinstance(v, str) else bytes(v)
    else:
        arr = np.asarray(value, dtype=_NP[dtype])
    size = math.prod(shape)
    if arr.size == size:
        return arr.reshape(shape)
    if arr.size == 1:
        return np.broadcast_to(arr.reshape(()), shape).copy()
    raise ValueError(
        f"`default_value` of {what} must have {size} values for shape {list(shape)}, got {arr.size}"
    )


# --------------------------------------------------------------------------- specs


@dataclass(frozen=True)
class FixedLenFeature:
    """A feature with exactly ``prod(shape)`` values in every record (see module doc).

    Args:
        shape: the shape of one record's value, a list of non-negative ints (an int ``n``
            means ``[n]``, ``[]`` a scalar); a record must hold exactly ``prod(shape)``
            values. Anything else raises ``TypeError``/``ValueError``.
        dtype: ``"int64"``, ``"float32"`` or ``"string"``, or anything
            :func:`normalize_dtype` accepts.
        default_value: the value of a record without the feature: ``prod(shape)`` values
            (reshaped to ``shape``) or one value (broadcast); ``None`` (the default) makes a
            missing feature raise :class:`~feedline.exceptions.MissingFeatureError`. Any
            other number of values raises ``ValueError``.

    >>> from feedline.example import encode_example, parse_example
    >>> records = [encode_example({"xy": [1.0, 2.0]}), encode_example({})]
    >>> parse_example(records, {"xy": FixedLenFeature([2], np.float32, default_value=[0.5, 0.5])})["xy"]
    array([[1. , 2. ],
           [0.5, 0.5]], dtype=float32)
    """

    shape: tuple[int, ...]
    dtype: str
    default_value: Any = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", _shape(self.shape))
        object.__setattr__(self, "dtype", normalize_dtype(self.dtype))
        object.__setattr__(
            self,
            "default_value",
            _default(self.default_value, self.dtype, self.shape, "FixedLenFeature"),
        )


@dataclass(frozen=True)
class VarLenFeature:
    """A feature with any number of values, parsed into a :class:`SparseTensorValue`.

    Args:
        dtype: ``"int64"``, ``"float32"`` or ``"string"``, or anything
            :func:`normalize_dtype` accepts.

    >>> from feedline.example import encode_example, parse_example
    >>> records = [encode_example({"tok": [1, 2, 3]}), encode_example({"tok": [4]})]
    >>> sparse = parse_example(records, {"tok": VarLenFeature(np.int64)})["tok"]
    >>> sparse.values.tolist(), sparse.dense_shape.tolist()
    ([1, 2, 3, 4], [2, 3])
    """

    dtype: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", normalize_dtype(self.dtype))


@dataclass(frozen=True)
class FixedLenSequenceFeature:
    """A feature of ``n * prod(shape)`` values, parsed to ``(n, *shape)`` per record and
    padded across the batch.

    Args:
        shape: the shape of one step, a list of non-negative ints (an int ``n`` means
            ``[n]``); a record's value count must be a multiple of ``prod(shape)``.
        dtype: ``"int64"``, ``"float32"`` or ``"string"``, or anything
            :func:`normalize_dtype` accepts.
        allow_missing: must be a bool (else ``TypeError``). In :func:`parse_example` it must
            be true (else ``ValueError``; a missing feature gives ``n = 0``); in
            :func:`parse_sequence_example` a missing feature list raises
            :class:`~feedline.exceptions.MissingFeatureError` unless it is true.
        default_value: one scalar, the padding; ``None`` (the default) pads with ``0`` or
            ``b""``.

    >>> from feedline.example import encode_example, parse_example
    >>> records = [encode_example({"tok": [1, 2, 3]}), encode_example({"tok": [4]})]
    >>> spec = FixedLenSequenceFeature([], np.int64, allow_missing=True, default_value=0)
    >>> parse_example(records, {"tok": spec})["tok"]       # padded with default_value
    array([[1, 2, 3],
           [4, 0, 0]])
    """

    shape: tuple[int, ...]
    dtype: str
    allow_missing: bool = False
    default_value: Any = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", _shape(self.shape))
        object.__setattr__(self, "dtype", normalize_dtype(self.dtype))
        check_bool("allow_missing", self.allow_missing)
        if self.default_value is not None:
            arr = _default(self.default_value, self.dtype, (), "FixedLenSequenceFeature")
            object.__setattr__(self, "default_value", arr)


@dataclass(frozen=True)
class _RowLengths:
    key: str


@dataclass(frozen=True)
class RowSplitsPartition:
    key: str


@dataclass(frozen=True)
class UniformRowLengthPartition:
    length: int

    def __post_init__(self) -> None:
        if isinstance(self.length, bool) or not isinstance(self.length, int) or self.length < 1:
            raise ValueError(f"`length` must be a positive int, got {self.length!r}")


@dataclass(frozen=True)
class RaggedFeature:
    """A feature parsed into a :class:`RaggedTensorValue`.

    Args:
        dtype: ``"int64"``, ``"float32"`` or ``"string"``, or anything
            :func:`normalize_dtype` accepts.
        value_key: the feature holding the values; ``None`` (the default) uses the output
            name. A non-str raises ``TypeError``.
        partitions: outermost first, split each record's values further:
            ``RaggedFeature.RowLengths(key)`` and ``RaggedFeature.RowSplits(key)`` read an
            int64 feature of the same record, ``RaggedFeature.UniformRowLength(n)`` cuts rows
            of ``n``. Anything else raises ``TypeError``; feature lists take no partitions.

    >>> from feedline.example import encode_example, parse_example
    >>> records = [encode_example({"tok": [1, 2, 3], "len": [2, 1]}), encode_example({"tok": [4], "len": [1]})]
    >>> parse_example(records, {"tok": RaggedFeature(np.int64)})["tok"].to_list()
    [[1, 2, 3], [4]]
    >>> nested = RaggedFeature(np.int64, partitions=[RaggedFeature.RowLengths("len")])
    >>> parse_example(records, {"tok": nested})["tok"].to_list()
    [[[1, 2], [3]], [[4]]]
    """

    dtype: str
    value_key: str | None = None
    partitions: tuple = field(default=())

    RowLengths = _RowLengths
    RowSplits = RowSplitsPartition
    UniformRowLength = UniformRowLengthPartition

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", normalize_dtype(self.dtype))
        if self.value_key is not None and not isinstance(self.value_key, str):
            raise TypeError(f"`value_key` must be a str or None, got {self.value_key!r}")
        parts = tuple(self.partitions)
        for p in parts:
            if not isinstance(p, (_RowLengths, RowSplitsPartition, UniformRowLengthPartition)):
                raise TypeError(
                    "`partitions` must hold RaggedFeature.RowLengths, RowSplits or "
                    f"UniformRowLength, got {p!r}"
                )
        object.__setattr__(self, "partitions", parts)


SPECS = (FixedLenFeature, VarLenFeature, RaggedFeature, FixedLenSequenceFeature)


# --------------------------------------------------------------------------- results


class SparseTensorValue(NamedTuple):
    """A sparse tensor in coordinate form (TF's ``SparseTensor``).

    ``indices``: int64 ``(nnz, rank)``, sorted row-major; ``values``: ``(nnz,)``;
    ``dense_shape``: int64 ``(rank,)``. For :func:`parse_example` the rank is 2
    (record, position); for feature lists 3 (record, step, position); for
    :func:`parse_single_example` 1.

    >>> sparse = SparseTensorValue(indices=np.array([[0, 0], [1, 2]]), values=np.array([7, 9]),
    ...                            dense_shape=np.array([2, 3]))
    >>> sparse.to_dense(0)
    array([[7, 0, 0],
           [0, 0, 9]])
    """

    indices: np.ndarray
    values: np.ndarray
    dense_shape: np.ndarray

    def to_dense(self, default_value: Any = None) -> np.ndarray:
        """The dense array of shape ``dense_shape``, holes filled with ``default_value``.

        Args:
            default_value: the value of every position not in ``indices``; ``None`` (the
                default) means ``b""`` for string values and ``0`` otherwise.
        """
        if default_value is None:
            default_value = b"" if self.values.dtype == object else 0
        out = np.full(tuple(self.dense_shape.tolist()), default_value, dtype=self.values.dtype)
        if len(self.values):
            out[tuple(self.indices.T)] = self.values
        return out


class RaggedTensorValue(NamedTuple):
    """A ragged tensor: flat ``values`` and ``row_lengths``, one int64 array per ragged
    dimension, outermost first (TF's ``RaggedTensor.nested_row_lengths()``).

    >>> ragged = RaggedTensorValue(values=np.array([1, 2, 3, 4]), row_lengths=(np.array([3, 1]),))
    >>> ragged.to_list(), ragged.row_splits[0].tolist()
    ([[1, 2, 3], [4]], [0, 3, 4])
    """

    values: np.ndarray
    row_lengths: tuple[np.ndarray, ...]

    @property
    def row_splits(self) -> tuple[np.ndarray, ...]:
        """Row splits (``[0, cumsum(lengths)]``) for each ragged dimension."""
        return tuple(np.concatenate(([0], np.cumsum(r))).astype(np.int64) for r in self.row_lengths)

    def to_list(self) -> list:
        """Nested Python lists."""
        items: list = self.values.tolist()
        for lengths in reversed(self.row_lengths):
            splits = np.concatenate(([0], np.cumsum(lengths))).tolist()
            items = [items[a:b] for a, b in zip(splits[:-1], splits[1:])]
        return items


for _cls in (
    FixedLenFeature,
    VarLenFeature,
    FixedLenSequenceFeature,
    RaggedFeature,
    SparseTensorValue,
    RaggedTensorValue,
):
    _cls.__module__ = "feedline.example"

# pytest's doctest finder skips objects whose __module__ is another module's: list them
__test__ = {
    cls.__name__: cls
    for cls in (FixedLenFeature, VarLenFeature, FixedLenSequenceFeature, RaggedFeature,
                SparseTensorValue, RaggedTensorValue)
}
