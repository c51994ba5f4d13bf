"""Input types: what one model input looks like, with PaddlePaddle's names.

An input type says how :class:`~feedline.feeder.DataFeeder` converts one column of a
batch. There are five kinds of value, and each comes in three nestings:

==========================  ======================================  =====================
factory                     one sample is                           converted batch
==========================  ======================================  =====================
``dense_vector(dim)``       ``dim`` numbers                         float32 ``(batch, dim)``
``dense_array(shape)``      an array of ``shape``                   float32 ``(batch, *shape)``
``integer_value(range)``    one id in ``[0, range)``                int64 ``(batch,)``
``integer_values(range)``   ``count`` ids in ``[0, range)``         int64 ``(batch, count)``
``sparse_binary_vector(d)`` the column indices of the ones          CSR ``(batch, d)``, no values
``sparse_float_vector(d)``  ``(index, value)`` pairs or a dict      CSR ``(batch, d)`` float32
==========================  ======================================  =====================

``<factory>_sequence`` (e.g. :func:`integer_value_sequence`) declares that a sample is
a *list* of such values (tokens); ``<factory>_sub_sequence`` declares a list of lists
(sub-sequences of tokens). Sequences are converted without padding: the tokens of the
whole batch lie in one flat value, and start positions say where each sample (and each
sub-sequence) begins; see :class:`~feedline.feeder.SequenceValue`.

Types are small frozen objects, validated when made, and compare by value:

>>> from feedline import data_type
>>> data_type.dense_vector(784)
dense_vector(784)
>>> data_type.integer_value_sequence(30000).value_range
30000
>>> data_type.sparse_vector(10) == data_type.sparse_float_vector(10)
True
>>> data_type.dense_vector(0)
Traceback (most recent call last):
...
ValueError: `dim` must be a positive int, got 0

``dim`` keeps Paddle's meaning: the width of a dense or sparse vector (the product of
the shape for ``dense_array``), and the value range for ids.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from feedline._internal.validate import one_of, optional_positive_int, positive_int

__all__ = [
    "InputType",
    "SequenceType",
    "DENSE",
    "INTEGER",
    "INTEGERS",
    "SPARSE_BINARY",
    "SPARSE_FLOAT",
    "dense_vector",
    "dense_vector_sequence",
    "dense_vector_sub_sequence",
    "dense_array",
    "dense_array_sequence",
    "dense_array_sub_sequence",
    "integer_value",
    "integer_value_sequence",
    "integer_value_sub_sequence",
    "integer_sequence",
    "integer_values",
    "integer_values_sequence",
    "integer_values_sub_sequence",
    "sparse_binary_vector",
    "sparse_binary_vector_sequence",
    "sparse_binary_vector_sub_sequence",
    "sparse_float_vector",
    "sparse_float_vector_sequence",
    "sparse_float_vector_sub_sequence",
    "sparse_vector",
    "sparse_vector_sequence",
    "sparse_vector_sub_sequence",
]

DENSE = "dense"
INTEGER = "integer"
INTEGERS = "integers"
SPARSE_BINARY = "sparse_binary"
SPARSE_FLOAT = "sparse_float"
_KINDS = (DENSE, INTEGER, INTEGERS, SPARSE_BINARY, SPARSE_FLOAT)

# Ids pass through float64 on the fast conversion path, which is exact up to 2**53.
_MAX_RANGE = 2**53

_FLOAT_DTYPES = ("float16", "float32", "float64")
_INT_DTYPES = ("int32", "int64")


class SequenceType:
    """Nesting levels, numbered as in PaddlePaddle: 0 none, 1 sequence, 2 sub-sequence.

    >>> SequenceType.NO_SEQUENCE, SequenceType.SEQUENCE, SequenceType.SUB_SEQUENCE
    (0, 1, 2)
    >>> integer_value_sub_sequence(5).seq_type == SequenceType.SUB_SEQUENCE
    True
    """

    NO_SEQUENCE = 0
    SEQUENCE = 1
    SUB_SEQUENCE = 2


_SUFFIX = {0: "", 1: "_sequence", 2: "_sub_sequence"}


@dataclass(frozen=True)
class InputType:
    """One declared input. Make it with the factory functions of this module.

    The constructor checks every field and raises ``ValueError`` (``TypeError`` for a
    wrong type) when they do not fit together.

    Args:
        kind: one of ``"dense"``, ``"integer"``, ``"integers"``, ``"sparse_binary"``,
            ``"sparse_float"``.
        shape: the shape of one token's converted value, a tuple: ``(dim,)`` or the
            ``dense_array`` shape for dense, ``()`` for one id, ``(count,)`` for several
            ids (``(None,)`` when the count is taken from the batch), ``(dim,)`` for
            sparse.
        value_range: ids must lie in ``[0, value_range)`` (a positive int of at most
            ``2**53``); must be ``None`` for the other kinds.
        seq_type: :class:`SequenceType` level (0, 1 or 2).
        dtype: numpy dtype name of the converted values: int32 or int64 for ids,
            float16, float32 or float64 for dense and sparse float, ``None`` for sparse
            binary (which has no values).

    >>> t = integer_value_sequence(10)
    >>> t.kind, t.shape, t.value_range, t.seq_type, t.dtype
    ('integer', (), 10, 1, 'int64')
    >>> t.is_sequence, t.is_sub_sequence, t.is_sparse, t.dim
    (True, False, False, 10)
    >>> d = dense_vector(3)
    >>> d, d.shape, d.np_dtype
    (dense_vector(3), (3,), dtype('float32'))
    """

    kind: str
    shape: tuple
    value_range: int | None = None
    seq_type: int = SequenceType.NO_SEQUENCE
    dtype: str | None = "float32"

    def __post_init__(self) -> None:
        one_of("kind", self.kind, _KINDS)
        one_of("seq_type", self.seq_type, (0, 1, 2))
        if not isinstance(self.shape, tuple):
            raise TypeError(f"`shape` must be a tuple, got {self.shape!r}")
        if self.kind == INTEGER:
            if self.shape != ():
                raise ValueError(f"`shape` of an integer input must be (), got {self.shape!r}")
        elif self.kind == INTEGERS:
            if len(self.shape) != 1:
                raise ValueError(f"`shape` of an integers input must be (count,), got {self.shape!r}")
            optional_positive_int("count", self.shape[0])
        else:
            if len(self.shape) == 0:
                raise ValueError("`shape` must have at least one dimension, got ()")
            if self.kind != DENSE and len(self.shape) != 1:
                raise ValueError(f"`shape` of a sparse input must be (dim,), got {self.shape!r}")
            for d in self.shape:
                positive_int("dim", d)
        if self.kind in (INTEGER, INTEGERS):
            if positive_int("value_range", self.value_range) > _MAX_RANGE:
                raise ValueError(
                    f"`value_range` must be at most 2**53, got {self.value_range!r}"
                )
            one_of("dtype", self.dtype, _INT_DTYPES)
        else:
            if self.value_range is not None:
                raise ValueError(
                    f"`value_range` applies to integer inputs only, got {self.value_range!r}"
                )
            if self.kind == SPARSE_BINARY:
                if self.dtype is not None:
                    raise ValueError(f"`dtype` of a sparse binary input must be None, got {self.dtype!r}")
            else:
                one_of("dtype", self.dtype, _FLOAT_DTYPES)

    @property
    def dim(self) -> int | None:
        """Paddle's ``dim``: the width (dense, sparse) or the value range (ids)."""
        if self.kind in (INTEGER, INTEGERS):
            return self.value_range
        return math.prod(self.shape)

    @property
    def is_sequence(self) -> bool:
        """True for ``_sequence`` and ``_sub_sequence`` types."""
        return self.seq_type >= SequenceType.SEQUENCE

    @property
    def is_sub_sequence(self) -> bool:
        """True for ``_sub_sequence`` types."""
        return self.seq_type == SequenceType.SUB_SEQUENCE

    @property
    def is_sparse(self) -> bool:
        """True for sparse binary and sparse float inputs."""
        return self.kind in (SPARSE_BINARY, SPARSE_FLOAT)

    @property
    def np_dtype(self) -> np.dtype | None:
        """The numpy dtype of converted values (``None`` for sparse binary)."""
        return None if self.dtype is None else np.dtype(self.dtype)

    def base(self) -> InputType:
        """The same type without nesting (what one token is)."""
        return InputType(self.kind, self.shape, self.value_range, 0, self.dtype)

    def __repr__(self) -> str:
        suffix = _SUFFIX[self.seq_type]
        if self.kind == DENSE:
            if len(self.shape) == 1:
                head, arg = "dense_vector", f"{self.shape[0]}"
            else:
                head, arg = "dense_array", f"{self.shape!r}"
        elif self.kind == INTEGER:
            head, arg = "integer_value", f"{self.value_range}"
        elif self.kind == INTEGERS:
            head, arg = "integer_values", f"{self.value_range}"
            if self.shape[0] is not None:
                arg += f", count={self.shape[0]}"
        elif self.kind == SPARSE_BINARY:
            head, arg = "sparse_binary_vector", f"{self.shape[0]}"
        else:
            head, arg = "sparse_float_vector", f"{self.shape[0]}"
        default = {DENSE: "float32", SPARSE_FLOAT: "float32", INTEGER: "int64", INTEGERS: "int64"}
        if self.kind in default and self.dtype != default[self.kind]:
            arg += f", dtype={self.dtype!r}"
        return f"{head}{suffix}({arg})"


def _dtype_name(name: str, value: Any, default: str) -> str:
    if value is None:
        return default
    try:
        return np.dtype(value).name
    except TypeError:
        raise TypeError(f"`{name}` must be a numpy dtype, got {value!r}") from None


def _shape(value: Any) -> tuple:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (int(value),)
    try:
        shape = tuple(value)
    except TypeError:
        raise TypeError(f"`shape` must be an int or a tuple of positive ints, got {value!r}") from None
    if not shape:
        raise ValueError("`shape` must have at least one dimension, got ()")
    return tuple(positive_int("shape", int(d) if isinstance(d, np.integer) else d) for d in shape)


# ---------------------------------------------------------------- dense

def dense_vector(dim: int, *, dtype: Any = "float32", seq_type: int = 0) -> InputType:
    """A vector of ``dim`` numbers per sample -> ``(batch, dim)`` array of ``dtype``.

    Args:
        dim: the width of one vector; a positive int, else ``ValueError``/``TypeError``.
        dtype: numpy dtype of the converted values (anything ``numpy.dtype`` accepts;
            ``None`` means the default); it must be float16, float32 or float64, else
            ``ValueError``, and a non-dtype raises ``TypeError``.
        seq_type: the :class:`SequenceType` nesting level: 0 (the default) none, 1 a
            sequence, 2 a sub-sequence; anything else raises ``ValueError``.

    >>> dense_vector(3)
    dense_vector(3)
    """
    positive_int("dim", dim)
    return InputType(DENSE, (dim,), None, seq_type, _dtype_name("dtype", dtype, "float32"))


def dense_array(shape: int | tuple, *, dtype: Any = "float32", seq_type: int = 0) -> InputType:
    """An array of fixed ``shape`` per sample (e.g. ``(3, 32, 32)``) -> ``(batch, *shape)``.

    Args:
        shape: the shape of one array (an int means ``(shape,)``); positive ints, at
            least one dimension, else ``ValueError``/``TypeError``.
        dtype: numpy dtype of the converted values (anything ``numpy.dtype`` accepts;
            ``None`` means the default); it must be float16, float32 or float64, else
            ``ValueError``, and a non-dtype raises ``TypeError``.
        seq_type: the :class:`SequenceType` nesting level: 0 (the default) none, 1 a
            sequence, 2 a sub-sequence; anything else raises ``ValueError``.

    >>> dense_array((2, 3)).dim
    6
    """
    return InputType(DENSE, _shape(shape), None, seq_type, _dtype_name("dtype", dtype, "float32"))


def dense_vector_sequence(dim: int, *, dtype: Any = "float32") -> InputType:
    """A sequence of ``dim``-wide dense vectors per sample.

    Args:
        dim: the width of one vector, as for :func:`dense_vector`.
        dtype: float16, float32 (the default) or float64, as for :func:`dense_vector`.

    >>> dense_vector_sequence(4).is_sequence
    True
    """
    return dense_vector(dim, dtype=dtype, seq_type=SequenceType.SEQUENCE)


def dense_vector_sub_sequence(dim: int, *, dtype: Any = "float32") -> InputType:
    """A list of sequences of ``dim``-wide dense vectors per sample.

    Args:
        dim: the width of one vector, as for :func:`dense_vector`.
        dtype: float16, float32 (the default) or float64, as for :func:`dense_vector`.

    >>> dense_vector_sub_sequence(4).is_sub_sequence
    True
    """
    return dense_vector(dim, dtype=dtype, seq_type=SequenceType.SUB_SEQUENCE)


def dense_array_sequence(shape: int | tuple, *, dtype: Any = "float32") -> InputType:
    """A sequence of arrays of ``shape`` per sample.

    Args:
        shape: the shape of one array, as for :func:`dense_array`.
        dtype: float16, float32 (the default) or float64, as for :func:`dense_array`.

    >>> dense_array_sequence((2, 2))
    dense_array_sequence((2, 2))
    """
    return dense_array(shape, dtype=dtype, seq_type=SequenceType.SEQUENCE)


def dense_array_sub_sequence(shape: int | tuple, *, dtype: Any = "float32") -> InputType:
    """A list of sequences of arrays of ``shape`` per sample.

    Args:
        shape: the shape of one array, as for :func:`dense_array`.
        dtype: float16, float32 (the default) or float64, as for :func:`dense_array`.

    >>> dense_array_sub_sequence((2, 2)).seq_type
    2
    """
    return dense_array(shape, dtype=dtype, seq_type=SequenceType.SUB_SEQUENCE)


# ---------------------------------------------------------------- ids

def integer_value(value_range: int, *, dtype: Any = "int64", seq_type: int = 0) -> InputType:
    """One id in ``[0, value_range)`` per sample -> ``(batch,)`` int64 vector.

    Args:
        value_range: ids must lie in ``[0, value_range)``; a positive int of at most
            ``2**53``, else ``ValueError``/``TypeError``.
        dtype: numpy dtype of the converted ids (``None`` means the default); it must be
            int32 or int64, else ``ValueError``.
        seq_type: the :class:`SequenceType` nesting level: 0 (the default) none, 1 a
            sequence, 2 a sub-sequence; anything else raises ``ValueError``.

    >>> integer_value(10)
    integer_value(10)
    """
    return InputType(INTEGER, (), value_range, seq_type, _dtype_name("dtype", dtype, "int64"))


def integer_value_sequence(value_range: int, *, dtype: Any = "int64") -> InputType:
    """A sequence of ids per sample (words of a sentence).

    Args:
        value_range: ids lie in ``[0, value_range)``, as for :func:`integer_value`.
        dtype: int32 or int64 (the default), as for :func:`integer_value`.

    >>> integer_value_sequence(100)
    integer_value_sequence(100)
    """
    return integer_value(value_range, dtype=dtype, seq_type=SequenceType.SEQUENCE)


def integer_value_sub_sequence(value_range: int, *, dtype: Any = "int64") -> InputType:
    """A list of id sequences per sample (sentences of a paragraph).

    Args:
        value_range: ids lie in ``[0, value_range)``, as for :func:`integer_value`.
        dtype: int32 or int64 (the default), as for :func:`integer_value`.

    >>> integer_value_sub_sequence(100)
    integer_value_sub_sequence(100)
    """
    return integer_value(value_range, dtype=dtype, seq_type=SequenceType.SUB_SEQUENCE)


integer_sequence = integer_value_sequence


def integer_values(
    value_range: int, *, count: int | None = None, dtype: Any = "int64", seq_type: int = 0
) -> InputType:
    """``count`` ids in ``[0, value_range)`` per sample -> ``(batch, count)`` int64.

    Paddle uses this for pixel labels.

    Args:
        value_range: ids must lie in ``[0, value_range)``; a positive int of at most
            ``2**53``, else ``ValueError``/``TypeError``.
        count: how many ids one sample holds, a positive int. With ``None`` (the
            default) every sample of one batch must hold the same number of ids, and that
            number is the width of the result.
        dtype: numpy dtype of the converted ids (``None`` means the default); it must be
            int32 or int64, else ``ValueError``.
        seq_type: the :class:`SequenceType` nesting level: 0 (the default) none, 1 a
            sequence, 2 a sub-sequence; anything else raises ``ValueError``.

    >>> integer_values(5, count=3)
    integer_values(5, count=3)
    """
    optional_positive_int("count", count)
    return InputType(INTEGERS, (count,), value_range, seq_type, _dtype_name("dtype", dtype, "int64"))


def integer_values_sequence(
    value_range: int, *, count: int | None = None, dtype: Any = "int64"
) -> InputType:
    """A sequence of fixed-size id groups per sample -> values ``(tokens, count)``.

    Args:
        value_range: ids lie in ``[0, value_range)``, as for :func:`integer_values`.
        count: ids per token, or ``None`` to take it from the batch, as for
            :func:`integer_values`.
        dtype: int32 or int64 (the default), as for :func:`integer_values`.

    >>> integer_values_sequence(5).seq_type
    1
    """
    return integer_values(value_range, count=count, dtype=dtype, seq_type=SequenceType.SEQUENCE)


def integer_values_sub_sequence(
    value_range: int, *, count: int | None = None, dtype: Any = "int64"
) -> InputType:
    """A list of sequences of fixed-size id groups per sample.

    Args:
        value_range: ids lie in ``[0, value_range)``, as for :func:`integer_values`.
        count: ids per token, or ``None`` to take it from the batch, as for
            :func:`integer_values`.
        dtype: int32 or int64 (the default), as for :func:`integer_values`.

    >>> integer_values_sub_sequence(5).seq_type
    2
    """
    return integer_values(
        value_range, count=count, dtype=dtype, seq_type=SequenceType.SUB_SEQUENCE
    )


# ---------------------------------------------------------------- sparse

def sparse_binary_vector(dim: int, *, seq_type: int = 0) -> InputType:
    """A ``dim``-wide 0/1 vector given as the indices of its ones -> CSR, no values.

    Args:
        dim: the width of the vector: indices must lie in ``[0, dim)``; a positive int,
            else ``ValueError``/``TypeError``.
        seq_type: the :class:`SequenceType` level: 0 (the default), 1 or 2.

    >>> sparse_binary_vector(10000)
    sparse_binary_vector(10000)
    """
    positive_int("dim", dim)
    return InputType(SPARSE_BINARY, (dim,), None, seq_type, None)


def sparse_binary_vector_sequence(dim: int) -> InputType:
    """A sequence of sparse binary vectors per sample.

    Args:
        dim: the width of one vector, as for :func:`sparse_binary_vector`.

    >>> sparse_binary_vector_sequence(8).is_sparse
    True
    """
    return sparse_binary_vector(dim, seq_type=SequenceType.SEQUENCE)


def sparse_binary_vector_sub_sequence(dim: int) -> InputType:
    """A list of sequences of sparse binary vectors per sample.

    Args:
        dim: the width of one vector, as for :func:`sparse_binary_vector`.

    >>> sparse_binary_vector_sub_sequence(8).seq_type
    2
    """
    return sparse_binary_vector(dim, seq_type=SequenceType.SUB_SEQUENCE)


def sparse_float_vector(dim: int, *, dtype: Any = "float32", seq_type: int = 0) -> InputType:
    """A ``dim``-wide sparse vector given as ``(index, value)`` pairs (or a dict
    ``{index: value}``) -> CSR with values of ``dtype``.

    Args:
        dim: the width of the vector: indices must lie in ``[0, dim)``; a positive int,
            else ``ValueError``/``TypeError``.
        dtype: numpy dtype of the stored values (``None`` means the default): float16,
            float32 or float64, else ``ValueError``; a non-dtype raises ``TypeError``.
        seq_type: the :class:`SequenceType` level: 0 (the default), 1 or 2.

    >>> sparse_float_vector(10000)
    sparse_float_vector(10000)
    """
    positive_int("dim", dim)
    return InputType(SPARSE_FLOAT, (dim,), None, seq_type, _dtype_name("dtype", dtype, "float32"))


def sparse_float_vector_sequence(dim: int, *, dtype: Any = "float32") -> InputType:
    """A sequence of sparse float vectors per sample.

    Args:
        dim: the width of one vector, as for :func:`sparse_float_vector`.
        dtype: float16, float32 (the default) or float64, as for
            :func:`sparse_float_vector`.

    >>> sparse_float_vector_sequence(8)
    sparse_float_vector_sequence(8)
    """
    return sparse_float_vector(dim, dtype=dtype, seq_type=SequenceType.SEQUENCE)


def sparse_float_vector_sub_sequence(dim: int, *, dtype: Any = "float32") -> InputType:
    """A list of sequences of sparse float vectors per sample.

    Args:
        dim: the width of one vector, as for :func:`sparse_float_vector`.
        dtype: float16, float32 (the default) or float64, as for
            :func:`sparse_float_vector`.

    >>> sparse_float_vector_sub_sequence(8)
    sparse_float_vector_sub_sequence(8)
    """
    return sparse_float_vector(dim, dtype=dtype, seq_type=SequenceType.SUB_SEQUENCE)


sparse_vector = sparse_float_vector
sparse_vector_sequence = sparse_float_vector_sequence
sparse_vector_sub_sequence = sparse_float_vector_sub_sequence
