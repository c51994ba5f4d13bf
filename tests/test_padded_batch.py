"""Dataset.padded_batch (tf.data semantics) and bucket_by_length(pad=True)."""

from __future__ import annotations

import numpy as np
import pytest

from feedline import Dataset
from feedline.dataset.padded_batch import pad_batch

from resume_helpers import assert_resumes_everywhere


def _seqs(n=7):
    return Dataset.from_iterable([np.arange(1, i % 4 + 2, dtype=np.int64) for i in range(n)])


def test_pads_to_the_largest_in_each_batch():
    out = _seqs().padded_batch(3).to_list()
    assert [b.shape for b in out] == [(3, 3), (3, 4), (1, 3)]
    assert out[0].tolist() == [[1, 0, 0], [1, 2, 0], [1, 2, 3]]
    assert out[1].tolist() == [[1, 2, 3, 4], [1, 0, 0, 0], [1, 2, 0, 0]]
    assert out[0].dtype == np.int64
    assert [b.shape for b in _seqs().padded_batch(3, drop_remainder=True).to_list()] == [
        (3, 3), (3, 4)]


def test_two_dimensional_items_and_none_dims():
    items = [np.ones((2, 3), np.float32), np.ones((4, 1), np.float32)]
    out = pad_batch(items, padded_shapes=(None, 5), padding_values=-1.0)
    assert out.shape == (2, 4, 5) and out.dtype == np.float32
    assert out[0, :2, :3].tolist() == [[1] * 3] * 2 and out[0, 2:].tolist() == [[-1] * 5] * 2
    assert out[1, :, 0].tolist() == [1] * 4 and (out[1, :, 1:] == -1).all()
    assert pad_batch(items, padded_shapes=(-1, None)).shape == (2, 4, 3)


def test_dict_items_take_per_field_shapes_and_values():
    items = [{"ids": [1, 2], "mask": [True, True], "label": 3},
             {"ids": [5], "mask": [True], "label": 4}]
    ds = Dataset.from_iterable(items).padded_batch(
        2, padded_shapes={"ids": (3,), "mask": (None,), "label": ()},
        padding_values={"ids": -1, "mask": False, "label": 0})
    (out,) = ds.to_list()
    assert out["ids"].tolist() == [[1, 2, -1], [5, -1, -1]]
    assert out["mask"].tolist() == [[True, True], [True, False]] and out["mask"].dtype == bool
    assert out["label"].tolist() == [3, 4]


def test_tuple_items_and_strings():
    items = [(np.array(["a", "b"]), 1.5), (np.array(["c"]), 2.5)]
    words, score = pad_batch(items)
    assert words.tolist() == [["a", "b"], ["c", ""]] and score.tolist() == [1.5, 2.5]
    words, _ = pad_batch(items, padding_values=("<pad>", 0.0))
    assert words.tolist() == [["a", "b"], ["c", "<pad>"]]


def test_errors_name_the_field_and_the_shapes():
    items = [{"x": [1, 2, 3]}, {"x": [1, 2, 3, 4, 5]}]
    with pytest.raises(ValueError, match=r"field 'x': item 1 has shape \(5,\), larger than the "
                                         r"padded shape \(4,\) in dimension 0"):
        pad_batch(items, padded_shapes={"x": (4,)})
    with pytest.raises(ValueError, match=r"field 'x': items in a batch must have the same rank, "
                                         r"item 0 has shape \(2,\), item 1 has shape \(1, 1\)"):
        pad_batch([{"x": [1, 2]}, {"x": [[1]]}])
    with pytest.raises(ValueError, match=r"field \[1\]: padded shape \(3, 3\) has 2 dimensions, "
                                         r"the items have 1"):
        pad_batch([(1, [1]), (2, [1, 2])], padded_shapes=(None, (3, 3)))
    with pytest.raises(ValueError, match=r"`padded_shapes` has no entry for field 'y'"):
        pad_batch([{"x": 1, "y": [2]}], padded_shapes={"x": ()})
    with pytest.raises(ValueError, match=r"field item: item 1 does not have the fields \['x'\]"):
        pad_batch([{"x": 1}, {"z": 1}])
    with pytest.raises(ValueError, match=r"`batch_size` must be a positive int, got 0"):
        Dataset.range(3).padded_batch(0)
    ds = Dataset.from_iterable([[1, 2, 3]]).padded_batch(1, padded_shapes=(2,))
    with pytest.raises(ValueError, match=r"field item: item 0 has shape \(3,\)"):
        ds.to_list()


def test_padded_batch_resumes_exactly_everywhere():
    ds = _seqs(11).shuffle(3, seed=2).padded_batch(2, padding_values=-7)
    full = assert_resumes_everywhere(ds)
    assert len(full) == 6


def test_bucket_by_length_pads_its_batches():
    ds = Dataset.from_iterable([[1], [1, 2, 3], [4], [5, 6], [7, 8, 9, 10]])
    out = ds.bucket_by_length(length_fn=len, bucket_boundaries=[3], bucket_batch_sizes=2,
                              pad=True, padding_values=-1).to_list()
    assert [b.tolist() for b in out] == [[[1], [4]], [[1, 2, 3, -1], [7, 8, 9, 10]],
                                         [[5, 6]]]
    assert_resumes_everywhere(ds.bucket_by_length(
        length_fn=len, bucket_boundaries=[3], bucket_batch_sizes=2, pad=True))
    with pytest.raises(ValueError, match="`padded_shapes` and `padding_values` need pad=True"):
        ds.bucket_by_length(length_fn=len, bucket_boundaries=[3], bucket_batch_sizes=2,
                            padding_values=0)
