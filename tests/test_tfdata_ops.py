"""tf.data's remaining operations: interleave, window, group_by_window, unbatch and scan
equal tf.data's output (tests/data/tfdata_ops/expected.json, written by TensorFlow with
tests/data/make_tfdata_ops.py); every new operation resumes exactly from every position;
cardinality and len() as tf.data's."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedline import Dataset
from feedline.dataset.cardinality import INFINITE, UNKNOWN
from feedline.dataset.ragged_batch import RaggedArray
from feedline.exceptions import StateNotSupportedError

from resume_helpers import assert_resumes_everywhere

with open(os.path.join(os.path.dirname(__file__), "data", "tfdata_ops", "expected.json")) as f:
    TF = json.load(f)

EXAMPLES = settings(max_examples=60, deadline=None)


# ------------------------------------------------------------------ equal to tf.data
def interleaved(case):
    lengths = case["lengths"]
    return Dataset.range(len(lengths)).interleave(
        lambda i: Dataset.range(100 * i, 100 * i + lengths[i]),
        cycle_length=case["cycle_length"], block_length=case["block_length"])


@EXAMPLES
@given(st.sampled_from(TF["interleave"]))
def test_interleave_equals_tf_data(case):
    assert interleaved(case).to_list() == case["expected"]


def test_interleave_issue_example_and_block_length():
    sizes = [1, 3, 2]
    ds = Dataset.range(3).interleave(lambda i: Dataset.range(10 * i, 10 * i + sizes[i]),
                                     cycle_length=2)
    assert ds.to_list() == [0, 10, 11, 20, 12, 21]
    assert any(c["block_length"] == 2 and len(c["lengths"]) > 2 for c in TF["interleave"])


def windows(case):
    ds = Dataset.range(case["n"]).window(case["size"], shift=case["shift"],
                                         stride=case["stride"],
                                         drop_remainder=case["drop_remainder"])
    return ds


@EXAMPLES
@given(st.sampled_from(TF["window"]))
def test_window_equals_tf_data(case):
    ds = windows(case)
    assert [w.to_list() for w in ds] == case["expected"]
    assert ds.cardinality() == len(case["expected"])


def grouped(case):
    keys = case["keys"]
    options = ({"window_size": case["window_size"]} if case["window_size"] is not None
               else {"window_size_func": lambda k: k + 1})
    return Dataset.from_iterable(case["items"]).group_by_window(
        lambda x: x % keys, lambda k, w: w.batch(1000), **options)


@EXAMPLES
@given(st.sampled_from(TF["group_by_window"]))
def test_group_by_window_equals_tf_data(case):
    assert grouped(case).to_list() == case["expected"]


@EXAMPLES
@given(st.sampled_from(TF["unbatch"]))
def test_unbatch_equals_tf_data(case):
    assert Dataset.from_iterable(case["batches"]).unbatch().to_list() == case["expected"]
    arrays = [np.asarray(b, dtype=np.int64) for b in case["batches"]]
    assert [int(x) for x in Dataset.from_iterable(arrays).unbatch()] == case["expected"]


def scanned(case):
    return Dataset.from_iterable(case["items"]).scan(case["initial"],
                                                     lambda s, x: (s + x, s * x - 1))


@EXAMPLES
@given(st.sampled_from(TF["scan"]))
def test_scan_equals_tf_data(case):
    assert scanned(case).to_list() == case["expected"]


# ------------------------------------------------------------------ resume everywhere
def biggest(name, size):
    return max(TF[name], key=lambda c: size(c))


RESUMABLE = {
    "interleave": lambda: interleaved(biggest("interleave", lambda c: sum(c["lengths"]))),
    "window": lambda: windows({"n": 11, "size": 3, "shift": 2, "stride": 2,
                               "drop_remainder": False}).map(lambda w: w.to_list()),
    "window_wide_shift": lambda: Dataset.range(12).window(2, shift=5).map(
        lambda w: w.to_list()),
    "group_by_window": lambda: grouped(biggest("group_by_window", lambda c: len(c["items"]))),
    "group_by_window_unbatched": lambda: Dataset.range(30).shuffle(7, seed=3).group_by_window(
        lambda x: x % 4, lambda k, w: w.map(lambda x: (k, x)), window_size=3),
    "unbatch": lambda: Dataset.from_iterable([[1, 2, 3], [], [4], [5, 6]]).unbatch(),
    "unbatch_arrays": lambda: Dataset.range(10).batch(3, collate="numpy").unbatch(),
    "scan": lambda: scanned(biggest("scan", lambda c: len(c["items"]))),
    "scan_array_state": lambda: Dataset.range(8).scan(
        np.zeros(2), lambda s, x: (s + x, float(s.sum()))),
    "scan_object_state": lambda: Dataset.range(8).scan(
        object(), lambda s, x: (s, x * 2)),
    "enumerate": lambda: Dataset.range(5).filter(lambda x: x != 2).enumerate(start=3),
    "take_while": lambda: Dataset.range(10).take_while(lambda x: x < 6),
    "unique": lambda: Dataset.from_iterable([3, 1, 3, 2, 1, 4, 4, 0]).unique(),
    "unique_tuples": lambda: Dataset.from_iterable([(1, b"a"), (1, b"a"), (2, b"b")]).unique(),
    "rejection_resample": lambda: Dataset.range(40).rejection_resample(
        lambda x: x % 3, [0.2, 0.3, 0.5], seed=5),
    "rejection_resample_initial": lambda: Dataset.range(40).rejection_resample(
        lambda x: x % 2, [0.5, 0.5], initial_dist=[0.5, 0.5], seed=5),
    "ragged_batch": lambda: Dataset.from_iterable([[1], [2, 3], [], [4, 5, 6], [7]])
    .ragged_batch(2).map(lambda r: r.to_list()),
}


@pytest.mark.parametrize("name", sorted(RESUMABLE))
def test_resumes_exactly_from_every_position(name):
    full = assert_resumes_everywhere(RESUMABLE[name]())
    assert full, "a resume test over an empty run proves nothing"


RESUME_CASES = {
    "interleave": lambda c: interleaved(c),
    "window": lambda c: windows(c).map(lambda w: w.to_list()),
    "group_by_window": lambda c: grouped(c),
    "unbatch": lambda c: Dataset.from_iterable(c["batches"]).unbatch(),
    "scan": lambda c: scanned(c),
}


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(RESUME_CASES)), st.data())
def test_generated_cases_resume_exactly_from_every_position(op, data):
    case = data.draw(st.sampled_from(TF[op]))
    assert assert_resumes_everywhere(RESUME_CASES[op](case)) == case["expected"]


def test_window_resumes_inside_a_pipeline():
    ds = (Dataset.range(20).shuffle(4, seed=1).window(4, shift=3)
          .flat_map(lambda w: w.batch(4)).enumerate())
    assert_resumes_everywhere(ds)


# ------------------------------------------------------------------ semantics
def test_window_datasets_and_flat_map_to_batches():
    ds = Dataset.range(5).window(3, shift=1)
    assert [w.to_list() for w in ds] == [[0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4], [4]]
    assert Dataset.range(4).window(2).flat_map(lambda w: w.batch(2)).to_list() == [[0, 1], [2, 3]]
    with pytest.raises(ValueError, match="`shift` must be a positive int, got 0"):
        Dataset.range(4).window(2, shift=0)


def test_group_by_window_flushes_leftover_groups_in_key_order():
    ds = Dataset.from_iterable([5, 3, 1, 7]).group_by_window(
        lambda x: -x, lambda k, w: [(k, w.to_list())], window_size=2)
    assert ds.to_list() == [(-7, [7]), (-5, [5]), (-3, [3]), (-1, [1])]
    with pytest.raises(ValueError, match="exactly one of `window_size` and `window_size_func`"):
        Dataset.range(3).group_by_window(abs, lambda k, w: w)
    bad = Dataset.range(3).group_by_window(abs, lambda k, w: w, window_size_func=lambda k: 0)
    with pytest.raises(ValueError, match="window size of key 0 must be a positive int, got 0"):
        bad.to_list()


def test_unbatch_structures_and_errors():
    batch = {"x": np.arange(4).reshape(2, 2), "y": ["a", "b"]}
    out = Dataset.from_iterable([batch]).unbatch().to_list()
    assert [o["y"] for o in out] == ["a", "b"] and out[1]["x"].tolist() == [2, 3]
    with pytest.raises(TypeError, match="unbatch: a int has no rows to split"):
        Dataset.range(2).unbatch().to_list()
    with pytest.raises(ValueError, match=r"different numbers of rows: \[1, 2\]"):
        Dataset.from_iterable([([1], [1, 2])]).unbatch().to_list()


def test_scan_func_must_return_a_pair():
    with pytest.raises(TypeError, match=r"scan_func must return \(new_state, output\), got int"):
        Dataset.range(2).scan(0, lambda s, x: s + x).to_list()


def test_take_while_stops_reading():
    seen = []
    ds = Dataset.range(10).map(lambda x: seen.append(x) or x).take_while(lambda x: x < 2)
    assert ds.to_list() == [0, 1] and seen == [0, 1, 2]


def test_unique_needs_hashable_items_and_saveable_ones():
    with pytest.raises(TypeError, match="unique needs hashable items"):
        Dataset.from_iterable([[1], [1]]).unique().to_list()
    it = Dataset.from_iterable([frozenset([1])]).unique().iterator()
    next(it)
    with pytest.raises(StateNotSupportedError, match="cannot save a frozenset"):
        it.get_state()
    it.close()
    assert Dataset.from_iterable([np.int64(1), 1, 2]).unique().to_list() == [1, 2]


def test_rejection_resample_follows_the_target():
    ds = Dataset.range(6000).rejection_resample(lambda x: int(x % 10 == 0), [0.5, 0.5], seed=2)
    pairs = ds.to_list()
    assert all(c == int(x % 10 == 0) for c, x in pairs)
    share = sum(c for c, _ in pairs) / len(pairs)
    assert 0.4 < share < 0.6          # 10% of the input, half of the output
    assert ds.to_list() != pairs and Dataset.range(6000).rejection_resample(
        lambda x: int(x % 10 == 0), [0.5, 0.5], seed=2).to_list() == pairs
    with pytest.raises(ValueError, match="class_func gave 3, not a class in 0..1"):
        Dataset.range(4).rejection_resample(lambda x: 3, [0.5, 0.5]).to_list()
    with pytest.raises(ValueError, match="`target_dist` must be a non-empty list"):
        Dataset.range(4).rejection_resample(lambda x: 0, [])


def test_ragged_batch_components():
    items = [(np.ones((2, 3)), 1), (np.zeros((0, 3)), 2), (np.ones((1, 3)), 3)]
    values, labels = Dataset.from_iterable(items).ragged_batch(3).to_list()[0]
    assert isinstance(values, RaggedArray) and values.values.shape == (3, 3)
    assert values.row_splits.tolist() == [0, 2, 2, 3] and labels.tolist() == [1, 2, 3]
    assert len(Dataset.range(5).ragged_batch(2, drop_remainder=True)) == 2
    with pytest.raises(ValueError, match="differ beyond their first axis"):
        Dataset.from_iterable([np.ones((1, 2)), np.ones((1, 3))]).ragged_batch(2).to_list()


# ------------------------------------------------------------------ cardinality
def test_cardinality_and_len_follow_tf_data():
    assert len(Dataset.range(10).batch(3)) == 4                      # batched random access
    assert len(Dataset.range(10).map(abs).batch(3, drop_remainder=True)) == 3
    assert Dataset.range(10).shuffle(3, seed=0).take(4).cardinality() == 4
    assert Dataset.range(3).repeat().take(7).cardinality() == 7
    assert Dataset.range(3).repeat(2).concat(Dataset.range(4)).cardinality() == 10
    assert Dataset.range(3).zip(Dataset.range(5).repeat()).cardinality() == 3
    assert Dataset.range(3).repeat().cardinality() == INFINITE == -1
    assert Dataset.range(0).repeat().cardinality() == 0
    assert Dataset.range(5).filter(bool).cardinality() == UNKNOWN == -2
    assert Dataset.range(5).skip(7).cardinality() == 0
    assert Dataset.range(7).window(3, shift=2).cardinality() == 4
    assert Dataset.range(5).enumerate().scan(0, lambda s, x: (s, x)).cardinality() == 5
    with pytest.raises(TypeError, match="is unknown"):
        len(Dataset.range(5).filter(bool))
    with pytest.raises(TypeError, match="is infinite"):
        len(Dataset.range(5).repeat())
    stream = Dataset.range(5).filter(bool)
    assert stream and list(stream) == [1, 2, 3, 4]           # truthy, list() unaffected
    assert not Dataset.range(0) and Dataset.range(1)
