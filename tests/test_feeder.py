"""DataFeeder: every input type, the feeding map, bad samples, TF sparse/ragged layouts."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse
from hypothesis import given, settings
from hypothesis import strategies as st

from feedline import data_type as dt
from feedline.exceptions import FeedError
from feedline.feeder import (
    DataFeeder,
    SequenceValue,
    SparseValue,
    from_parsed,
    from_ragged,
    from_sparse_tensor,
)


def feed_one(tp, column):
    """Convert one column of samples declared as ``tp``."""
    return DataFeeder([("x", tp)])([(v,) for v in column])["x"]


def arr(values, dtype):
    return np.asarray(values, dtype=dtype)


# ---------------------------------------------------------------- plain values
def test_dense_vector_is_contiguous_float32_batch():
    out = feed_one(dt.dense_vector(3), [[1, 2, 3], (4.5, 5, 6), np.arange(3, dtype=np.float64)])
    assert out.dtype == np.float32 and out.flags.c_contiguous
    assert out.tolist() == [[1, 2, 3], [4.5, 5, 6], [0, 1, 2]]


def test_dense_array_keeps_the_shape_and_dtype_option():
    imgs = [np.full((2, 3), i, dtype=np.uint8) for i in range(4)]
    out = feed_one(dt.dense_array((2, 3), dtype="float64"), imgs)
    assert out.shape == (4, 2, 3) and out.dtype == np.float64
    assert out[:, 0, 0].tolist() == [0, 1, 2, 3]


def test_integer_value_is_int64_vector():
    out = feed_one(dt.integer_value(10), [3, np.int32(9), 0, 7.0])
    assert out.dtype == np.int64 and out.tolist() == [3, 9, 0, 7]
    assert feed_one(dt.integer_value(2), [True, False]).tolist() == [1, 0]  # bools are ints
    assert feed_one(dt.integer_value(10, dtype="int32"), [1]).dtype == np.int32


def test_integer_values_fixed_and_inferred_count():
    out = feed_one(dt.integer_values(5, count=2), [[1, 2], (3, 4)])
    assert out.dtype == np.int64 and out.tolist() == [[1, 2], [3, 4]]
    assert feed_one(dt.integer_values(5), [[1, 2, 3], [0, 0, 4]]).shape == (2, 3)


def test_sparse_binary_is_csr_without_values():
    out = feed_one(dt.sparse_binary_vector(6), [[5, 1], [], [0, 2, 4]])
    assert isinstance(out, SparseValue) and out.values is None and out.is_binary
    assert out.shape == (3, 6)
    assert out.indptr.tolist() == [0, 2, 2, 5]
    assert out.indices.tolist() == [1, 5, 0, 2, 4]  # sorted within each row
    assert out.indptr.dtype == out.indices.dtype == np.int64
    assert out.to_dense().tolist() == [
        [0, 1, 0, 0, 0, 1], [0] * 6, [1, 0, 1, 0, 1, 0]
    ]


def test_sparse_float_accepts_pairs_and_dicts():
    out = feed_one(dt.sparse_vector(5), [[(4, 0.5), (1, 2.0)], {3: -1.0}, []])
    assert out.values.dtype == np.float32
    assert out.indptr.tolist() == [0, 2, 3, 3]
    assert out.indices.tolist() == [1, 4, 3]
    assert out.values.tolist() == [2.0, 0.5, -1.0]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.dictionaries(st.integers(0, 29), st.floats(-5, 5, width=32), max_size=8), max_size=6
    )
)
def test_sparse_float_matches_scipy(rows):
    out = feed_one(dt.sparse_float_vector(30), [list(r.items()) for r in rows])
    dense = np.zeros((len(rows), 30), dtype=np.float32)
    for i, r in enumerate(rows):
        for j, v in r.items():
            dense[i, j] = v
    ref = scipy.sparse.csr_array(dense)
    ref.eliminate_zeros()
    got = out.to_scipy()
    assert got.shape == ref.shape
    assert np.array_equal(got.toarray(), dense)
    # the stored structure is canonical: sorted, unique columns per row
    assert got.has_canonical_format
    assert out.nnz == sum(len(r) for r in rows)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sets(st.integers(0, 19), max_size=6), max_size=6))
def test_sparse_binary_matches_scipy(rows):
    out = feed_one(dt.sparse_binary_vector(20), [sorted(r, reverse=True) for r in rows])
    coo_rows = [i for i, r in enumerate(rows) for _ in r]
    coo_cols = [j for r in rows for j in r]
    ref = scipy.sparse.coo_array(
        (np.ones(len(coo_cols), np.float32), (coo_rows, coo_cols)), shape=(len(rows), 20)
    ).tocsr()
    ref.sort_indices()
    assert out.indptr.tolist() == ref.indptr.tolist()
    assert out.indices.tolist() == ref.indices.tolist()


# ---------------------------------------------------------------- sequences
def test_integer_value_sequence_has_start_positions():
    out = feed_one(dt.integer_value_sequence(100), [[1, 2, 3], [], [7], [8, 9]])
    assert isinstance(out, SequenceValue) and out.sub_sequence_start_positions is None
    assert out.values.tolist() == [1, 2, 3, 7, 8, 9] and out.values.dtype == np.int64
    assert out.sequence_start_positions.tolist() == [0, 3, 3, 4, 6]
    assert out.sequence_start_positions.dtype == np.int64
    assert out.lengths.tolist() == [3, 0, 1, 2]
    assert (out.num_sequences, out.num_tokens) == (4, 6)
    assert [s.tolist() for s in out.sequences()] == [[1, 2, 3], [], [7], [8, 9]]


def test_dense_vector_sequence_has_one_row_per_token():
    out = feed_one(dt.dense_vector_sequence(2), [[[1, 2], [3, 4]], [[5, 6]]])
    assert out.values.shape == (3, 2) and out.values.dtype == np.float32
    assert out.sequence_start_positions.tolist() == [0, 2, 3]


def test_sub_sequences_index_tokens_as_paddle_does():
    # sample 0: two sentences (2 and 1 words); sample 1: one sentence of 3 words
    out = feed_one(dt.integer_value_sub_sequence(50), [[[1, 2], [3]], [[4, 5, 6]]])
    assert out.values.tolist() == [1, 2, 3, 4, 5, 6]
    assert out.sequence_start_positions.tolist() == [0, 3, 6]
    assert out.sub_sequence_start_positions.tolist() == [0, 2, 3, 6]
    assert out.num_sub_sequences.tolist() == [2, 1]
    assert out.sub_sequence_lengths.tolist() == [2, 1, 3]
    assert [[s.tolist() for s in sample] for sample in out.sequences()] == [
        [[1, 2], [3]], [[4, 5, 6]]
    ]


def test_sample_without_sub_sequences_is_allowed():
    out = feed_one(dt.integer_value_sub_sequence(50), [[[1]], [], [[2, 3], [4]]])
    assert out.sequence_start_positions.tolist() == [0, 1, 1, 4]
    assert out.sub_sequence_start_positions.tolist() == [0, 1, 3, 4]
    assert out.num_sub_sequences.tolist() == [1, 0, 2]


def test_sparse_sequences_have_one_csr_row_per_token():
    out = feed_one(dt.sparse_binary_vector_sequence(4), [[[0], [1, 3]], [[2]]])
    assert isinstance(out.values, SparseValue)
    assert out.values.shape == (3, 4)
    assert out.values.indptr.tolist() == [0, 1, 3, 4]
    assert out.sequence_start_positions.tolist() == [0, 2, 3]
    sub = feed_one(dt.sparse_vector_sub_sequence(4), [[[[(1, 0.5)]], [[(2, 1.0)], []]]])
    assert sub.values.shape == (3, 4) and sub.values.values.tolist() == [0.5, 1.0]
    assert sub.sub_sequence_start_positions.tolist() == [0, 1, 3]
    samples = sub.sequences()
    assert [[s.shape for s in sample] for sample in samples] == [[(1, 4), (2, 4)]]


def test_integer_values_and_dense_array_sub_sequences():
    out = feed_one(dt.integer_values_sub_sequence(9, count=2), [[[[1, 2]], [[3, 4], [5, 6]]]])
    assert out.values.shape == (3, 2)
    out = feed_one(dt.dense_array_sub_sequence((1, 2)), [[[[[1, 2]]]], [[[[3, 4]], [[5, 6]]]]])
    assert out.values.shape == (3, 1, 2)
    assert out.sequence_start_positions.tolist() == [0, 1, 3]
    assert out.sub_sequence_start_positions.tolist() == [0, 1, 3]


nested = st.lists(st.lists(st.lists(st.integers(0, 9), min_size=1, max_size=4), max_size=3),
                  max_size=5)


@settings(max_examples=50, deadline=None)
@given(nested)
def test_sub_sequence_round_trip(samples):
    out = feed_one(dt.integer_value_sub_sequence(10), samples)
    assert [[s.tolist() for s in sample] for sample in out.sequences()] == samples
    starts = out.sequence_start_positions
    sub = out.sub_sequence_start_positions
    assert starts[0] == 0 and sub[0] == 0 and starts[-1] == sub[-1] == out.num_tokens
    assert set(starts.tolist()) <= set(sub.tolist())
    assert out.num_sub_sequences.tolist() == [len(s) for s in samples]


def test_empty_batch_gives_empty_values():
    feeder = DataFeeder([("d", dt.dense_vector(3)), ("i", dt.integer_value(2)),
                         ("s", dt.sparse_vector(4)), ("q", dt.integer_value_sequence(3))])
    out = feeder([])
    assert out["d"].shape == (0, 3) and out["i"].shape == (0,)
    assert out["s"].shape == (0, 4) and out["s"].indptr.tolist() == [0]
    assert out["q"].sequence_start_positions.tolist() == [0]


# ---------------------------------------------------------------- feeding map
def test_feeding_dict_reuses_and_skips_columns():
    feeder = DataFeeder(
        [("image", dt.dense_vector(2)), ("label", dt.integer_value(10)),
         ("label_again", dt.integer_value(10))],
        feeding={"image": 2, "label": 0, "label_again": 0},
    )
    out = feeder([(3, "skipped", [0.5, 1.5]), (4, "skipped", [2.5, 3.5])])
    assert list(out) == ["image", "label", "label_again"]  # declaration order
    assert out["label"].tolist() == out["label_again"].tolist() == [3, 4]
    assert out["image"].tolist() == [[0.5, 1.5], [2.5, 3.5]]


def test_feeding_list_names_columns_and_none_skips():
    feeder = DataFeeder([("a", dt.integer_value(5)), ("b", dt.integer_value(5))],
                        feeding=["b", None, "a"])
    assert feeder.feeding == {"a": 2, "b": 0}
    out = feeder([(1, "x", 2)])
    assert out["a"].tolist() == [2] and out["b"].tolist() == [1]


def test_default_feeding_is_declaration_order_or_names_for_dicts():
    feeder = DataFeeder([("a", dt.integer_value(5)), ("b", dt.dense_vector(1))])
    assert feeder.feeding == {"a": 0, "b": 1}
    assert feeder([[1, [0.5]]])["a"].tolist() == [1]
    out = feeder([{"b": [0.5], "a": 3, "extra": "ignored"}])
    assert out["a"].tolist() == [3] and out["b"].tolist() == [[0.5]]


def test_feeding_keys_for_dict_samples():
    feeder = DataFeeder([("ids", dt.integer_value_sequence(9))], feeding={"ids": "tokens"})
    out = feeder([{"tokens": [1, 2]}, {"tokens": np.array([3])}])
    assert out["ids"].values.tolist() == [1, 2, 3]


def test_declared_input_that_is_not_fed_raises():
    with pytest.raises(ValueError, match=r"input 'label' is declared but not fed"):
        DataFeeder([("image", dt.dense_vector(2)), ("label", dt.integer_value(3))],
                   feeding={"image": 0})
    with pytest.raises(ValueError, match=r"input 'label' is declared but not fed"):
        DataFeeder([("image", dt.dense_vector(2)), ("label", dt.integer_value(3))],
                   feeding=["image"])


@pytest.mark.parametrize(
    ("data_types", "feeding", "exc", "match"),
    [
        ([("a", dt.integer_value(3))], {"a": 0, "b": 1}, ValueError,
         r"`feeding` names 'b', which is not a declared input \(declared: 'a'\)"),
        ([("a", dt.integer_value(3))], {"a": -1}, ValueError,
         r"`feeding\['a'\]` must be a non-negative int, got -1"),
        ([("a", dt.integer_value(3))], {"a": 1.5}, TypeError,
         r"`feeding\['a'\]` must be a column index \(int\) or a key \(str\), got 1.5"),
        ([("a", dt.integer_value(3))], ["a", "a"], ValueError, r"`feeding` names 'a' twice"),
        ([("a", dt.integer_value(3))], "a", TypeError, r"`feeding` must be None, a dict"),
        ([("a", dt.integer_value(3)), ("a", dt.integer_value(3))], None, ValueError,
         r"input 'a' is declared twice"),
        ([("a", 3)], None, TypeError, r"the type of input 'a' must be a feedline.data_type"),
        ([("a",)], None, TypeError, r"`data_types` entries must be \(name, type\) pairs"),
        ({"a": dt.integer_value(3)}, None, TypeError, r"`data_types` must be a list"),
    ],
)
def test_bad_feeder_arguments(data_types, feeding, exc, match):
    with pytest.raises(exc, match=match):
        DataFeeder(data_types, feeding=feeding)


# ---------------------------------------------------------------- bad samples
FEEDER = DataFeeder(
    [
        ("image", dt.dense_vector(3)),
        ("label", dt.integer_value(10)),
        ("bag", dt.sparse_binary_vector(100)),
        ("tfidf", dt.sparse_vector(100)),
        ("words", dt.integer_value_sequence(50)),
        ("para", dt.integer_value_sub_sequence(50)),
        ("pixels", dt.integer_values(4, count=2)),
    ]
)
GOOD = ([0.0, 0.5, 1.0], 3, [1, 99], [(2, 0.5)], [1, 2], [[1], [2, 3]], [0, 3])


def with_column(i, value):
    sample = list(GOOD)
    sample[i] = value
    return tuple(sample)


@pytest.mark.parametrize(
    ("column", "value", "match"),
    [
        (0, [0.0, 0.5], r"input 'image', sample 1 in the batch: expected a dense value of "
                        r"shape \(3,\), got shape \(2,\)"),
        (0, np.zeros((3, 1)), r"input 'image', sample 1 .*got shape \(3, 1\)"),
        (0, [0.0, "x", 1.0], r"input 'image', sample 1 .*of numbers, got list \[0.0, 'x', 1.0\]"),
        (0, [0.0, None, 1.0], r"input 'image', sample 1 .*of numbers, got list"),
        (0, 7.0, r"input 'image', sample 1 .*shape \(3,\), got 7.0"),
        (1, 10, r"input 'label', sample 1 in the batch: expected an integer id in \[0, 10\), got 10"),
        (1, "3", r"input 'label', sample 1 .*got str '3'"),  # numeric strings are not numbers
        (1, 2**70, r"input 'label', sample 1 .*got 1180591620717411303424"),
        (0, ["1.0", "2.0", "3.0"], r"input 'image', sample 1 .*of numbers, got list \['1.0'"),
        (1, -1, r"input 'label', sample 1 .*got -1"),
        (1, 2.5, r"input 'label', sample 1 .*expected an integer id in \[0, 10\), got 2.5"),
        (1, "cat", r"input 'label', sample 1 .*got str 'cat'"),
        (1, None, r"input 'label', sample 1 .*got None"),
        (1, [1], r"input 'label', sample 1 .*got list \[1\]"),
        (1, float("nan"), r"input 'label', sample 1 .*got nan"),
        (2, [1, 100], r"input 'bag', sample 1 in the batch, element 1: expected a sparse index "
                      r"in \[0, 100\), got 100"),
        (2, [4, 4], r"input 'bag', sample 1 in the batch: expected distinct sparse indices, "
                    r"got index 4 more than once"),
        (2, 5, r"input 'bag', sample 1 in the batch: expected a list of sparse indices, got 5"),
        (2, "12", r"input 'bag', sample 1 .*got str '12'"),
        (3, [(1, 0.5), (100, 1.0)], r"input 'tfidf', sample 1 in the batch, element 1: "
                                    r"expected a sparse index in \[0, 100\), got 100"),
        (3, [(1, "big")], r"input 'tfidf', sample 1 in the batch, element 0: expected a numeric "
                          r"value, got str 'big'"),
        (3, [(0, 1.0), (1, "0.5")], r"input 'tfidf', sample 1 in the batch, element 1: expected a "
                                    r"numeric value, got str '0.5'"),
        (3, [(0.5, 1.0)], r"input 'tfidf', sample 1 in the batch, element 0: expected a sparse "
                          r"index in \[0, 100\), got 0.5"),
        (3, [(0, 1.0), (1, None)], r"input 'tfidf', sample 1 in the batch, element 1: expected a "
                                   r"numeric value, got None"),
        (3, [(1, 0.5, 2)], r"input 'tfidf', sample 1 .*expected an \(index, value\) pair, "
                           r"got tuple \(1, 0.5, 2\)"),
        (3, [1, 2], r"input 'tfidf', sample 1 .*element 0: expected an \(index, value\) pair, got 1"),
        (4, [1, 50], r"input 'words', sample 1 in the batch, token 1: expected an integer id in "
                     r"\[0, 50\), got 50"),
        (4, 5, r"input 'words', sample 1 in the batch: expected a sequence \(a list of tokens\), got 5"),
        (4, "hello", r"input 'words', sample 1 .*expected a sequence .*got str 'hello'"),
        (5, [[1], [2, 60]], r"input 'para', sample 1 in the batch, sub-sequence 1, token 1: "
                            r"expected an integer id in \[0, 50\), got 60"),
        (5, [[1], []], r"input 'para', sample 1 in the batch, sub-sequence 1: expected a "
                       r"non-empty sub-sequence, got an empty one"),
        (5, [[1], 2], r"input 'para', sample 1 in the batch, sub-sequence 1: expected a "
                      r"sub-sequence \(a list of tokens\), got 2"),
        (5, [1, 2], r"input 'para', sample 1 in the batch, sub-sequence 0: expected a sub-sequence"),
        (6, [0, 4], r"input 'pixels', sample 1 in the batch, element 1: expected integer ids in "
                    r"\[0, 4\), got 4"),
        (6, [0, "1"], r"input 'pixels', sample 1 in the batch, element 1: expected integer ids "
                      r"in \[0, 4\), got str '1'"),
        (6, [0, 1, 2], r"input 'pixels', sample 1 in the batch: expected 2 integer ids, "
                       r"got shape \(3,\)"),
    ],
)
def test_bad_sample_names_input_sample_expected_and_got(column, value, match):
    assert FEEDER([GOOD])  # the good sample converts
    with pytest.raises(FeedError, match=match) as info:
        FEEDER([GOOD, with_column(column, value)])
    assert isinstance(info.value, ValueError)


def test_short_tuple_and_missing_key_raise():
    with pytest.raises(FeedError, match=r"input 'pixels', sample 1 in the batch: expected a sample "
                                        r"with at least 7 columns \(the feeding map reads column "
                                        r"6\), got 6 columns"):
        FEEDER([GOOD, GOOD[:6]])
    with pytest.raises(FeedError, match=r"input 'image', sample 0 in the batch: expected a tuple "
                                        r"or list of columns, got int 5"):
        FEEDER([5])
    feeder = DataFeeder([("a", dt.integer_value(3))], feeding={"a": "x"})
    with pytest.raises(FeedError, match=r"input 'a', sample 1 in the batch: expected a dict with "
                                        r"key 'x', got keys \['y'\]"):
        feeder([{"x": 1}, {"y": 1}])
    with pytest.raises(FeedError, match=r"input 'a', sample 0 in the batch: expected a dict with "
                                        r"key 'x', got tuple"):
        feeder([(1,)])


def test_integer_values_with_inferred_count_names_sample_zero():
    with pytest.raises(FeedError, match=r"sample 2 in the batch: expected 2 integer ids "
                                        r"\(as in sample 0\), got shape \(1,\)"):
        feed_one(dt.integer_values(5), [[1, 2], [3, 4], [0]])


def test_batch_that_is_not_a_list_is_rejected():
    with pytest.raises(TypeError, match="a batch must be a list of samples, got dict"):
        FEEDER({"image": 1})


# ---------------------------------------------------------------- result classes
def test_value_equality():
    a = feed_one(dt.integer_value_sequence(9), [[1, 2], [3]])
    b = from_ragged(np.array([1, 2, 3]), [2, 1])
    assert a == b
    assert a != from_ragged(np.array([1, 2, 3]), [1, 2])
    s = feed_one(dt.sparse_binary_vector(3), [[1]])
    assert s == SparseValue(np.array([0, 1]), np.array([1]), None, (1, 3))
    assert s != SparseValue(np.array([0, 1]), np.array([1]), np.array([1.0]), (1, 3))
    with pytest.raises(ValueError, match="this SequenceValue has no sub-sequences"):
        a.sub_sequence_lengths  # noqa: B018


def test_repr_of_the_feeder():
    feeder = DataFeeder([("a", dt.integer_value(3))])
    assert repr(feeder) == "DataFeeder([('a', integer_value(3))], feeding={'a': 0})"
    assert feeder.input_names == ["a"]


# ---------------------------------------------------------------- TF layouts
def test_from_sparse_tensor_csr_matches_scipy():
    # a VarLen-style batch in TF's layout, entries out of order
    indices = np.array([[2, 1], [0, 0], [2, 0], [0, 3]], dtype=np.int64)
    values = np.array([4.0, 1.0, 3.0, 2.0], dtype=np.float32)
    out = from_sparse_tensor(indices, values, np.array([3, 5], dtype=np.int64))
    ref = scipy.sparse.coo_array((values, (indices[:, 0], indices[:, 1])), shape=(3, 5)).tocsr()
    ref.sort_indices()
    assert out.shape == (3, 5)
    assert out.indptr.tolist() == ref.indptr.tolist()
    assert out.indices.tolist() == ref.indices.tolist()
    assert out.values.tolist() == ref.data.tolist()


def test_from_sparse_tensor_sequence_reads_varlen_rows():
    # three examples with VarLen values [10, 11], [], [12, 13, 14], keeping int64 values
    indices = [[0, 0], [0, 1], [2, 0], [2, 1], [2, 2]]
    out = from_sparse_tensor(indices, np.array([10, 11, 12, 13, 14]), [3, 3], layout="sequence")
    assert out.values.tolist() == [10, 11, 12, 13, 14] and out.values.dtype == np.int64
    assert out.sequence_start_positions.tolist() == [0, 2, 2, 5]
    # strings (bytes features) are kept as they are
    out = from_sparse_tensor([[1, 0]], np.array([b"a"], dtype=object), [2, 1], layout="sequence")
    assert out.values.tolist() == [b"a"] and out.lengths.tolist() == [0, 1]
    empty = from_sparse_tensor(np.zeros((0, 2), np.int64), np.zeros(0), [2, 0], layout="sequence")
    assert empty.sequence_start_positions.tolist() == [0, 0, 0]


@pytest.mark.parametrize(
    ("indices", "values", "shape", "layout", "match"),
    [
        ([[0, 0], [0, 2]], [1, 2], [1, 3], "sequence",
         r"expected a ragged-right tensor, got row 0 with a value at column 2 but none at column 1"),
        ([[0, 0], [0, 0]], [1, 2], [1, 3], "csr", r"expected distinct indices, got \[0, 0\] twice"),
        ([[0, 3]], [1], [1, 3], "csr",
         r"entry 0: expected an index inside dense_shape \[1, 3\], got \[0, 3\]"),
        ([[0, 0]], [1, 2], [1, 3], "csr", r"expected values of shape \(1,\) to match the indices"),
        ([[0, 0, 0]], [1], [1, 3], "csr", r"expected integer indices of shape \(nnz, 2\)"),
        ([[0, 0]], [1], [1, 3, 4], "csr", r"expected a dense_shape of 2 ints"),
    ],
)
def test_from_sparse_tensor_errors(indices, values, shape, layout, match):
    with pytest.raises(FeedError, match=match):
        from_sparse_tensor(indices, values, shape, layout=layout, name="tags")
    with pytest.raises(FeedError, match=r"^input 'tags': "):
        from_sparse_tensor(indices, values, shape, layout=layout, name="tags")


def test_from_ragged_one_and_two_levels():
    flat = np.arange(10, 16)
    one = from_ragged(flat, np.array([2, 0, 4]))
    assert one.values is flat
    assert one.sequence_start_positions.tolist() == [0, 2, 2, 6]
    # TF nested_row_lengths: sample 0 has 2 sub-sequences (1 and 2 tokens), sample 1 has 1
    two = from_ragged(flat, [2, 1], sub_row_lengths=[1, 2, 3])
    assert two.sequence_start_positions.tolist() == [0, 3, 6]
    assert two.sub_sequence_start_positions.tolist() == [0, 1, 3, 6]
    assert [[s.tolist() for s in smp] for smp in two.sequences()] == [[[10], [11, 12]],
                                                                     [[13, 14, 15]]]
    # equal to what the feeder makes from the same nested lists
    assert two == feed_one(dt.integer_value_sub_sequence(20), [[[10], [11, 12]], [[13, 14, 15]]])


@pytest.mark.parametrize(
    ("values", "row_lengths", "sub", "match"),
    [
        ([1, 2, 3], [1, 1], None, r"expected `row_lengths` to sum to 3, got 2"),
        ([1, 2, 3], [4, -1], None, r"expected non-negative `row_lengths`"),
        ([1, 2, 3], np.array([[1, 2]]), None, r"expected `row_lengths` to be 1-D ints"),
        ([1, 2, 3], [1.5, 1.5], None, r"expected `row_lengths` to be 1-D ints"),
        ([1, 2, 3], [1], [1, 1, 1], r"expected `row_lengths` to sum to 3, got 1"),
        ([1, 2, 3], [2], [3, 0], r"expected non-empty sub-sequences, got sub-sequence 1 of length 0"),
        (5, [1], None, r"expected values with a token axis, got a scalar"),
    ],
)
def test_from_ragged_errors(values, row_lengths, sub, match):
    with pytest.raises(FeedError, match=match):
        from_ragged(values, row_lengths, sub_row_lengths=sub)


def test_varlen_features_feed_a_model_through_the_feeder_as_well():
    # per-example parsed VarLen values (1-D arrays) go straight into a sequence input
    feeder = DataFeeder([("tags", dt.integer_value_sequence(100)), ("y", dt.integer_value(2))])
    out = feeder([{"tags": np.array([5, 6]), "y": 1}, {"tags": np.array([], np.int64), "y": 0}])
    assert out["tags"] == from_ragged(np.array([5, 6]), [2, 0])


def test_from_parsed_takes_tf_layouts_built_by_hand():
    from types import SimpleNamespace

    sparse = SimpleNamespace(indices=np.array([[1, 0], [0, 0], [1, 1]]),
                             values=np.array([5, 4, 6]), dense_shape=np.array([3, 2]))
    seq = from_parsed(sparse)
    assert seq.values.tolist() == [4, 5, 6]
    assert seq.sequence_start_positions.tolist() == [0, 1, 3, 3]
    assert from_parsed(sparse, layout="csr").to_dense().tolist() == [[4, 0], [5, 6], [0, 0]]
    ragged = SimpleNamespace(values=np.arange(4), row_lengths=(np.array([2, 1]),
                                                                np.array([1, 1, 2])))
    two = from_parsed(ragged)
    assert two.sub_sequence_start_positions.tolist() == [0, 1, 2, 4]
    assert two.sequence_start_positions.tolist() == [0, 2, 4]
    dense = np.zeros((2, 3))
    assert from_parsed(dense) is dense
    with pytest.raises(TypeError, match=r"`value` must be a parsed sparse value .* got list"):
        from_parsed([1, 2])
    with pytest.raises(FeedError, match=r"expected one or two ragged dimensions, got 3"):
        from_ragged(np.arange(2), (np.array([1]), np.array([1]), np.array([2])))


def test_example_parser_output_feeds_a_model():
    example = pytest.importorskip("feedline.example")
    records = [
        example.encode_example({"ids": [4, 5, 6], "n": [2, 1], "y": 1}),
        example.encode_example({"ids": [], "n": [], "y": 0}),
        example.encode_example({"ids": [7], "n": [1], "y": 1}),
    ]
    parsed = example.parse_example(records, {
        "ids": example.VarLenFeature("int64"),
        "sentences": example.RaggedFeature(
            "int64", value_key="ids", partitions=(example.RaggedFeature.RowLengths("n"),)
        ),
        "y": example.FixedLenFeature([], "int64"),
    })
    ids = from_parsed(parsed["ids"], name="ids")
    # the same value the feeder makes from per-record lists
    expected = feed_one(dt.integer_value_sequence(10), [[4, 5, 6], [], [7]])
    assert ids == expected
    sentences = from_parsed(parsed["sentences"])
    assert sentences == feed_one(dt.integer_value_sub_sequence(10), [[[4, 5], [6]], [], [[7]]])
    assert from_parsed(parsed["y"]).tolist() == [1, 0, 1]


def test_sparse_value_check_names_the_broken_rule():
    ok = SparseValue(np.array([0, 1, 3]), np.array([2, 0, 1]), np.ones(3), (2, 3))
    assert ok.check() is ok
    cases = [
        (SparseValue(np.array([0, 1]), np.array([2]), None, (2, 3)),
         r"expected indptr of shape \(3,\) and 1-D indices"),
        (SparseValue(np.array([1, 1]), np.array([2]), None, (1, 3)),
         r"indptr must rise from 0 to nnz=1"),
        (SparseValue(np.array([0, 1]), np.array([3]), None, (1, 3)),
         r"column indices must lie in \[0, 3\)"),
        (SparseValue(np.array([0, 1]), np.array([2]), np.ones(2), (1, 3)),
         r"expected 1 values, got 2"),
        (SparseValue(np.array([0, 2]), np.array([1, 1]), None, (1, 3)),
         r"sorted and unique within a row; row 0 is not"),
    ]
    for value, match in cases:
        with pytest.raises(ValueError, match=match):
            value.check()
