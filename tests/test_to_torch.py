"""to_torch: dense/id tensors, CSR tensors, padded and packed sequences."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.utils.rnn import pack_sequence, pad_sequence

from feedline import data_type as dt
from feedline.feeder import DataFeeder, SequenceValue, from_ragged
from feedline.pytorch import PaddedSequence, PaddedSubSequence, to_torch


def test_dense_and_ids_share_memory():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = to_torch(x)
    assert t.dtype == torch.float32 and t.shape == (2, 3)
    x[0, 0] = 42
    assert t[0, 0].item() == 42  # zero copy on the CPU
    ids = to_torch(np.array([1, 2], dtype=np.int64))
    assert ids.dtype == torch.int64


def test_feeder_dict_converts_whole():
    feeder = DataFeeder([("x", dt.dense_vector(2)), ("y", dt.integer_value(3)),
                         ("s", dt.sparse_binary_vector(4)), ("w", dt.integer_value_sequence(9))])
    out = to_torch(feeder([([1, 2], 0, [3], [1, 2]), ([3, 4], 2, [0, 1], [5])]))
    assert out["x"].tolist() == [[1, 2], [3, 4]]
    assert out["y"].tolist() == [0, 2]
    assert out["s"].layout == torch.sparse_csr
    assert out["s"].to_dense().tolist() == [[0, 0, 0, 1], [1, 1, 0, 0]]
    assert isinstance(out["w"], PaddedSequence)
    assert out["w"].data.tolist() == [[1, 2], [5, 0]]
    assert out["w"].lengths.tolist() == [2, 1]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.dictionaries(st.integers(0, 11), st.floats(-3, 3, width=32), max_size=5),
                min_size=1, max_size=6))
def test_csr_tensor_matches_scipy_and_torch(rows):
    value = DataFeeder([("s", dt.sparse_vector(12))])([(list(r.items()),) for r in rows])["s"]
    t = to_torch(value)
    assert t.layout == torch.sparse_csr and tuple(t.shape) == (len(rows), 12)
    ref = value.to_scipy()
    assert np.array_equal(t.to_dense().numpy(), ref.toarray())
    assert t.crow_indices().tolist() == ref.indptr.tolist()
    assert t.col_indices().tolist() == ref.indices.tolist()
    # torch's own invariants (sorted, unique columns per row) hold
    torch.sparse.check_sparse_tensor_invariants.enable()
    try:
        torch.sparse_csr_tensor(t.crow_indices(), t.col_indices(), t.values(), size=t.shape)
    finally:
        torch.sparse.check_sparse_tensor_invariants.disable()
    # a matrix product agrees with scipy
    w = np.arange(12 * 2, dtype=np.float32).reshape(12, 2)
    assert np.allclose((t @ torch.from_numpy(w)).numpy(), ref @ w, atol=1e-4)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.dictionaries(st.integers(0, 11), st.floats(-3, 3, width=32), max_size=5),
                min_size=1, max_size=6))
def test_csc_tensor_matches_scipy_and_the_csr_tensor(rows):
    value = DataFeeder([("s", dt.sparse_vector(12))])([(list(r.items()),) for r in rows])["s"]
    t = to_torch(value, sparse_layout="csc")
    assert t.layout == torch.sparse_csc and tuple(t.shape) == (len(rows), 12)
    ref = value.to_scipy().tocsc()
    ref.sort_indices()
    assert np.array_equal(t.to_dense().numpy(), to_torch(value).to_dense().numpy())
    assert t.ccol_indices().tolist() == ref.indptr.tolist()
    assert t.row_indices().tolist() == ref.indices.tolist()
    assert t.values().tolist() == ref.data.tolist()
    torch.sparse.check_sparse_tensor_invariants.enable()
    try:  # torch's own invariants (sorted, unique rows per column) hold
        torch.sparse_csc_tensor(t.ccol_indices(), t.row_indices(), t.values(), size=t.shape)
    finally:
        torch.sparse.check_sparse_tensor_invariants.disable()
    w = np.arange(12 * 2, dtype=np.float32).reshape(12, 2)
    assert np.allclose((t @ torch.from_numpy(w)).numpy(), ref @ w, atol=1e-4)


def test_binary_csc_and_flat_sparse_sequences_and_dicts():
    feeder = DataFeeder([("b", dt.sparse_binary_vector(4)),
                         ("q", dt.sparse_binary_vector_sequence(4))])
    fed = feeder([([3, 0], [[1], [1, 2]]), ([], [[3]])])
    out = to_torch(fed, sparse_layout="csc", sequence="flat")
    b = out["b"]
    assert b.layout == torch.sparse_csc and b.values().dtype == torch.float32
    assert b.ccol_indices().tolist() == [0, 1, 1, 1, 2] and b.row_indices().tolist() == [0, 0]
    assert b.to_dense().tolist() == [[1, 0, 0, 1], [0, 0, 0, 0]]
    tokens = out["q"].values
    assert tokens.layout == torch.sparse_csc
    assert tokens.to_dense().tolist() == [[0, 1, 0, 0], [0, 1, 1, 0], [0, 0, 0, 1]]
    assert out["q"].sequence_start_positions.tolist() == [0, 2, 3]
    ccol, rows, values = fed["b"].to_csc()
    assert (ccol.tolist(), rows.tolist(), values) == ([0, 1, 1, 1, 2], [0, 0], None)


def test_binary_csr_gets_float_ones():
    value = DataFeeder([("b", dt.sparse_binary_vector(3))])([([2, 0],)])["b"]
    t = to_torch(value)
    assert t.values().dtype == torch.float32 and t.values().tolist() == [1.0, 1.0]
    assert scipy.sparse.csr_array(t.to_dense().numpy()).nnz == 2


lengths_st = st.lists(st.integers(1, 6), min_size=1, max_size=20)


@settings(max_examples=40, deadline=None)
@given(lengths_st, st.booleans())
def test_packed_equals_pack_sequence(lengths, reverse):
    rng = np.random.default_rng(len(lengths))
    values = rng.standard_normal((sum(lengths), 2)).astype(np.float32)
    value = from_ragged(values, lengths)
    s = value.sequence_start_positions
    seqs = [torch.from_numpy(values[a:b]) for a, b in zip(s[:-1], s[1:])]
    if reverse:
        seqs = [q.flip(0) for q in seqs]
    ref = pack_sequence(seqs, enforce_sorted=False)
    got = to_torch(value, sequence="packed", reverse=reverse)
    assert isinstance(got, torch.nn.utils.rnn.PackedSequence)
    assert torch.equal(got.data, ref.data)
    assert torch.equal(got.batch_sizes, ref.batch_sizes)
    assert torch.equal(got.sorted_indices, ref.sorted_indices)
    assert torch.equal(got.unsorted_indices, ref.unsorted_indices)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=10), st.booleans())
def test_padded_equals_pad_sequence(lengths, batch_first):
    values = np.arange(sum(lengths) * 2, dtype=np.int64).reshape(-1, 2) + 1
    value = from_ragged(values, lengths)
    s = value.sequence_start_positions
    seqs = [torch.from_numpy(values[a:b]) for a, b in zip(s[:-1], s[1:])]
    ref = pad_sequence(seqs, batch_first=batch_first, padding_value=-1)
    data, lens = to_torch(value, padding_value=-1, batch_first=batch_first)
    assert torch.equal(data, ref)
    assert lens.tolist() == lengths and lens.dtype == torch.int64


def test_padded_sub_sequences():
    value = DataFeeder([("p", dt.integer_value_sub_sequence(50))])(
        [([[1, 2], [3]],), ([],), ([[4, 5, 6]],)]
    )["p"]
    out = to_torch(value, padding_value=-1)
    assert isinstance(out, PaddedSubSequence)
    assert out.data.tolist() == [
        [[1, 2, -1], [3, -1, -1]],
        [[-1, -1, -1], [-1, -1, -1]],
        [[4, 5, 6], [-1, -1, -1]],
    ]
    assert out.lengths.tolist() == [2, 0, 1]
    assert out.sub_lengths.tolist() == [[2, 1], [0, 0], [3, 0]]
    time_major = to_torch(value, padding_value=-1, batch_first=False)
    assert torch.equal(time_major.data, out.data.permute(2, 1, 0))


def test_flat_keeps_paddles_layout_as_tensors():
    value = DataFeeder([("p", dt.integer_value_sub_sequence(50))])([([[1, 2], [3]],)])["p"]
    flat = to_torch(value, sequence="flat")
    assert isinstance(flat, SequenceValue)
    assert flat.values.tolist() == [1, 2, 3]
    assert flat.sequence_start_positions.tolist() == [0, 3]
    assert flat.sub_sequence_start_positions.tolist() == [0, 2, 3]
    sparse = DataFeeder([("s", dt.sparse_binary_vector_sequence(4))])([([[1], [2, 3]],)])["s"]
    flat = to_torch(sparse, sequence="flat")
    assert flat.values.layout == torch.sparse_csr and tuple(flat.values.shape) == (2, 4)


def test_device_and_pinning_on_cpu():
    x = np.ones((2, 2), dtype=np.float32)
    assert to_torch(x, device="cpu", non_blocking=True).device.type == "cpu"
    if torch.cuda.is_available():  # pragma: no cover - exercised on GPU machines
        t = to_torch({"x": x}, device="cuda", pin_memory=True, non_blocking=True)["x"]
        assert t.device.type == "cuda"
        host = to_torch(from_ragged(np.arange(3), [2, 1]), pin_memory=True).data
        assert host.is_pinned()
    else:
        with pytest.warns(UserWarning, match="pin_memory=True but no accelerator is available"):
            t = to_torch(x, pin_memory=True)
        assert not t.is_pinned()


def test_other_objects_pass_through_and_containers_recurse():
    out = to_torch({"name": "a", "n": 3, "pair": (np.zeros(1), None)})
    assert out["name"] == "a" and out["n"] == 3
    assert isinstance(out["pair"], tuple) and out["pair"][1] is None
    assert isinstance(out["pair"][0], torch.Tensor)


@pytest.mark.parametrize(
    ("value", "kwargs", "match"),
    [
        ("sparse_seq", {}, r"sequence='padded' needs dense or id tokens"),
        ("sparse_seq", {"sequence": "packed"}, r"sequence='packed' needs dense or id tokens"),
        ("sub_seq", {"sequence": "packed"}, r"sequence='packed' needs a plain sequence batch"),
        ("seq", {"sequence": "ragged"}, r"`sequence` must be one of 'padded', 'packed', 'flat'"),
        ("seq", {"sparse_layout": "coo"}, r"`sparse_layout` must be one of 'csr', 'csc', got 'coo'"),
    ],
)
def test_errors(value, kwargs, match):
    values = {
        "sparse_seq": DataFeeder([("s", dt.sparse_binary_vector_sequence(4))])([([[1]],)])["s"],
        "sub_seq": from_ragged([1, 2], [1], sub_row_lengths=[2]),
        "seq": from_ragged([1, 2], [2]),
    }
    with pytest.raises(ValueError, match=match):
        to_torch(values[value], **kwargs)
