"""Input types: names, fields, validation, repr."""

from __future__ import annotations

import pytest

from feedline import data_type as dt
from feedline.data_type import InputType, SequenceType


@pytest.mark.parametrize(
    ("tp", "kind", "shape", "value_range", "seq", "dtype", "dim"),
    [
        (dt.dense_vector(784), "dense", (784,), None, 0, "float32", 784),
        (dt.dense_array((3, 4)), "dense", (3, 4), None, 0, "float32", 12),
        (dt.dense_array(5), "dense", (5,), None, 0, "float32", 5),
        (dt.dense_vector_sequence(8), "dense", (8,), None, 1, "float32", 8),
        (dt.dense_vector_sub_sequence(8, dtype="float64"), "dense", (8,), None, 2, "float64", 8),
        (dt.dense_array_sequence((2, 2)), "dense", (2, 2), None, 1, "float32", 4),
        (dt.dense_array_sub_sequence((2, 2)), "dense", (2, 2), None, 2, "float32", 4),
        (dt.integer_value(10), "integer", (), 10, 0, "int64", 10),
        (dt.integer_value(10, dtype="int32"), "integer", (), 10, 0, "int32", 10),
        (dt.integer_value_sequence(100), "integer", (), 100, 1, "int64", 100),
        (dt.integer_sequence(100), "integer", (), 100, 1, "int64", 100),
        (dt.integer_value_sub_sequence(100), "integer", (), 100, 2, "int64", 100),
        (dt.integer_values(7, count=3), "integers", (3,), 7, 0, "int64", 7),
        (dt.integer_values(7), "integers", (None,), 7, 0, "int64", 7),
        (dt.integer_values_sequence(7), "integers", (None,), 7, 1, "int64", 7),
        (dt.integer_values_sub_sequence(7, count=2), "integers", (2,), 7, 2, "int64", 7),
        (dt.sparse_binary_vector(50), "sparse_binary", (50,), None, 0, None, 50),
        (dt.sparse_binary_vector_sequence(50), "sparse_binary", (50,), None, 1, None, 50),
        (dt.sparse_binary_vector_sub_sequence(50), "sparse_binary", (50,), None, 2, None, 50),
        (dt.sparse_float_vector(50), "sparse_float", (50,), None, 0, "float32", 50),
        (dt.sparse_vector(50), "sparse_float", (50,), None, 0, "float32", 50),
        (dt.sparse_vector_sequence(50), "sparse_float", (50,), None, 1, "float32", 50),
        (dt.sparse_float_vector_sequence(50), "sparse_float", (50,), None, 1, "float32", 50),
        (dt.sparse_vector_sub_sequence(50), "sparse_float", (50,), None, 2, "float32", 50),
        (dt.sparse_float_vector_sub_sequence(50), "sparse_float", (50,), None, 2, "float32", 50),
    ],
)
def test_factories_fill_the_fields(tp, kind, shape, value_range, seq, dtype, dim):
    assert (tp.kind, tp.shape, tp.value_range, tp.seq_type, tp.dtype) == (
        kind, shape, value_range, seq, dtype
    )
    assert tp.dim == dim
    assert tp.is_sequence == (seq >= 1)
    assert tp.is_sub_sequence == (seq == 2)
    assert tp.base().seq_type == 0 and tp.base().kind == kind
    # repr is the call that makes an equal type
    assert eval(repr(tp), vars(dt)) == tp


def test_paddle_aliases_are_the_same_functions():
    assert dt.sparse_vector is dt.sparse_float_vector
    assert dt.sparse_vector_sequence is dt.sparse_float_vector_sequence
    assert dt.integer_sequence is dt.integer_value_sequence
    assert dt.dense_vector(3, seq_type=SequenceType.SEQUENCE) == dt.dense_vector_sequence(3)


def test_types_are_frozen_and_hashable():
    tp = dt.dense_vector(3)
    with pytest.raises(AttributeError):
        tp.shape = (4,)  # type: ignore[misc]
    assert {tp: 1}[dt.dense_vector(3)] == 1
    assert dt.dense_vector(3) != dt.dense_vector(3, dtype="float64")


@pytest.mark.parametrize(
    ("make", "exc", "match"),
    [
        (lambda: dt.dense_vector(0), ValueError, r"`dim` must be a positive int, got 0"),
        (lambda: dt.dense_vector(2.5), TypeError, r"`dim` must be a positive int, got 2.5"),
        (lambda: dt.dense_array((3, 0)), ValueError, r"`shape` must be a positive int, got 0"),
        (lambda: dt.dense_array(()), ValueError, r"`shape` must have at least one dimension"),
        (lambda: dt.dense_array("ab"), TypeError, r"`shape` must be a positive int, got 'a'"),
        (lambda: dt.integer_value(0), ValueError, r"`value_range` must be a positive int, got 0"),
        (lambda: dt.integer_value(2**60), ValueError, r"`value_range` must be at most 2\*\*53"),
        (lambda: dt.integer_value(5, dtype="float32"), ValueError,
         r"`dtype` must be one of 'int32', 'int64', got 'float32'"),
        (lambda: dt.integer_values(5, count=0), ValueError, r"`count` must be a positive int, got 0"),
        (lambda: dt.sparse_binary_vector(-1), ValueError, r"`dim` must be a positive int, got -1"),
        (lambda: dt.sparse_vector(4, dtype="int64"), ValueError,
         r"`dtype` must be one of 'float16', 'float32', 'float64', got 'int64'"),
        (lambda: dt.dense_vector(4, dtype="nonsense"), TypeError, r"`dtype` must be a numpy dtype"),
        (lambda: dt.dense_vector(4, seq_type=3), ValueError, r"`seq_type` must be one of 0, 1, 2, got 3"),
        (lambda: InputType("dense", (3,), 5), ValueError, r"`value_range` applies to integer inputs only"),
        (lambda: InputType("tensor", (3,)), ValueError, r"`kind` must be one of"),
        (lambda: InputType("sparse_float", (3, 3)), ValueError, r"`shape` of a sparse input must be \(dim,\)"),
    ],
)
def test_bad_arguments_are_rejected(make, exc, match):
    with pytest.raises(exc, match=match):
        make()
