"""SequenceToBatch against torch's pack_sequence, and its inverse."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.utils.rnn import pack_sequence

from feedline import data_type as dt
from feedline.feeder import DataFeeder, SequenceValue, SparseValue, from_ragged
from feedline.sequence import (
    PackedBatch,
    SequenceToBatch,
    batch_to_sequence,
    sequence_to_batch,
    take_rows,
)


def random_batch(lengths, width=3, seed=0):
    rng = np.random.default_rng(seed)
    values = rng.standard_normal((int(sum(lengths)), width)).astype(np.float32)
    return from_ragged(values, np.asarray(lengths, dtype=np.int64))


def torch_seqs(value, reverse=False):
    s = value.sequence_start_positions
    seqs = [torch.from_numpy(value.values[a:b]) for a, b in zip(s[:-1], s[1:])]
    return [q.flip(0) for q in seqs] if reverse else seqs


def test_paddle_example_order():
    # Paddle's comment: s0 = 4 tokens, s1 = 5 tokens, s2 = 3 tokens;
    # time steps hold s1 s0 s2 | s1 s0 s2 | s1 s0 s2 | s1 s0 | s1
    plan = SequenceToBatch([0, 4, 9, 12])
    assert plan.sorted_indices.tolist() == [1, 0, 2]
    assert plan.batch_sizes.tolist() == [3, 3, 3, 2, 1]
    assert plan.batch_start_positions.tolist() == [0, 3, 6, 9, 11, 12]
    assert plan.index.tolist() == [4, 0, 9, 5, 1, 10, 6, 2, 11, 7, 3, 8]
    rev = SequenceToBatch([0, 4, 9, 12], reverse=True)
    assert rev.index.tolist() == [8, 3, 11, 7, 2, 10, 6, 1, 9, 5, 0, 4]


lengths_st = st.lists(st.integers(1, 7), min_size=1, max_size=24)


@settings(max_examples=60, deadline=None)
@given(lengths_st, st.booleans())
def test_equals_pack_sequence_on_random_batches(lengths, reverse):
    value = random_batch(lengths)
    ref = pack_sequence(torch_seqs(value, reverse), enforce_sorted=False)
    # torch orders equal lengths its own way; pass its order to compare everything
    packed = sequence_to_batch(value, reverse=reverse, sorted_indices=ref.sorted_indices.numpy())
    assert np.array_equal(packed.data, ref.data.numpy())
    assert packed.batch_sizes.tolist() == ref.batch_sizes.tolist()
    assert packed.sorted_indices.tolist() == ref.sorted_indices.tolist()
    assert packed.unsorted_indices.tolist() == ref.unsorted_indices.tolist()
    # the default (stable) order differs from torch's only in how ties are ordered
    stable = sequence_to_batch(value, reverse=reverse)
    assert stable.batch_sizes.tolist() == ref.batch_sizes.tolist()
    assert np.array_equal(np.sort(stable.data, axis=0), np.sort(ref.data.numpy(), axis=0))
    assert stable.sorted_indices.tolist() == sorted(
        range(len(lengths)), key=lambda i: -lengths[i]
    )
    assert batch_to_sequence(packed) == value
    assert batch_to_sequence(stable) == value


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=12).map(lambda xs: sorted(set(xs))))
def test_distinct_lengths_equal_pack_sequence_without_help(distinct):
    lengths = distinct[::-1][::2] + distinct[::-1][1::2]  # distinct, unsorted
    value = random_batch(lengths)
    ref = pack_sequence(torch_seqs(value), enforce_sorted=False)
    packed = sequence_to_batch(value)
    assert np.array_equal(packed.data, ref.data.numpy())
    assert packed.sorted_indices.tolist() == ref.sorted_indices.tolist()


def test_empty_sequences_and_empty_batch():
    plan = SequenceToBatch([0, 2, 2, 3])
    assert plan.batch_sizes.tolist() == [2, 1]
    assert plan.sorted_indices.tolist() == [0, 2, 1]
    assert plan.index.tolist() == [0, 2, 1]
    none = SequenceToBatch([0])
    assert none.batch_sizes.tolist() == [] and none.index.tolist() == []


def test_batch_to_sequence_takes_new_rows_and_keeps_sub_sequences():
    value = DataFeeder([("p", dt.integer_value_sub_sequence(20))])(
        [([[1, 2], [3]],), ([[4, 5, 6]],)]
    )["p"]
    packed = sequence_to_batch(value, level="sub_sequence")
    assert packed.batch_sizes.tolist() == [3, 2, 1]
    assert packed.data.tolist() == [4, 1, 3, 5, 2, 6]
    back = batch_to_sequence(packed)
    assert back == value
    doubled = batch_to_sequence(packed, packed.data * 2)
    assert doubled.values.tolist() == [2, 4, 6, 8, 10, 12]
    assert doubled.sub_sequence_start_positions.tolist() == [0, 2, 3, 6]


def test_sparse_rows_are_reordered_too():
    value = DataFeeder([("s", dt.sparse_binary_vector_sequence(5))])(
        [([[0], [1, 2]],), ([[3]],)]
    )["s"]
    packed = sequence_to_batch(value)
    assert isinstance(packed.data, SparseValue)
    assert packed.data.to_dense().tolist() == [
        [1, 0, 0, 0, 0], [0, 0, 0, 1, 0], [0, 1, 1, 0, 0]
    ]
    assert batch_to_sequence(packed) == value


def test_take_rows_matches_dense_indexing():
    rng = np.random.default_rng(3)
    dense = (rng.random((6, 4)) < 0.4).astype(np.float32) * rng.random((6, 4)).astype(np.float32)
    csr = SparseValue(*_csr(dense), shape=(6, 4))
    idx = np.array([5, 0, 3, 3, 1])
    assert np.array_equal(take_rows(csr, idx).to_dense(), dense[idx])


def _csr(dense):
    rows, cols = np.nonzero(dense)
    indptr = np.zeros(dense.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=dense.shape[0]), out=indptr[1:])
    return indptr, cols.astype(np.int64), dense[rows, cols]


@pytest.mark.parametrize(
    ("make", "exc", "match"),
    [
        (lambda: SequenceToBatch([1, 2]), ValueError, r"must start at 0 and never decrease"),
        (lambda: SequenceToBatch([0, 2, 1]), ValueError, r"must start at 0 and never decrease"),
        (lambda: SequenceToBatch([[0, 1]]), ValueError, r"must be a 1-D int array"),
        (lambda: SequenceToBatch([0, 1, 3], sorted_indices=[0, 0]), ValueError,
         r"`sorted_indices` must be a permutation of range\(2\)"),
        (lambda: SequenceToBatch([0, 1, 3], sorted_indices=[0, 1]), ValueError,
         r"`sorted_indices` must order the sequences longest first"),
        (lambda: SequenceToBatch([0, 1, 3]).to_batch(np.zeros(2)), ValueError,
         r"expected 3 rows \(one per token\), got 2"),
        (lambda: sequence_to_batch(np.zeros(3)), TypeError, r"`value` must be a SequenceValue"),
        (lambda: sequence_to_batch(from_ragged([1], [1]), level="sub_sequence"), ValueError,
         r"level='sub_sequence' needs a batch with sub-sequences"),
        (lambda: sequence_to_batch(from_ragged([1], [1]), level="word"), ValueError,
         r"`level` must be one of 'sequence', 'sub_sequence', got 'word'"),
        (lambda: batch_to_sequence("x"), TypeError, r"`packed` must be a PackedBatch"),
    ],
)
def test_errors(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


def test_packed_batch_fields_and_repr():
    value = SequenceValue(np.arange(3), np.array([0, 1, 3]))
    packed = sequence_to_batch(value)
    assert isinstance(packed, PackedBatch)
    assert packed.unsorted_indices.tolist() == [1, 0]
    assert repr(packed.plan) == "SequenceToBatch(sequences=2, tokens=3, steps=2, reverse=False)"
