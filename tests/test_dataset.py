"""The pipeline engine: sources, stages, iterator state and cleanup."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedline import Dataset
from feedline.dataset.permutation import TABLE_MAX, IndexPermutation, TablePermutation, permutation
from feedline.exceptions import (
    ComposeNotAligned,
    StateError,
    StateNotSupportedError,
)

from resume_helpers import assert_resumes_everywhere


def gen_reader(n):
    def reader():
        yield from range(n)

    return reader


# ---------------------------------------------------------------- sources
def test_range_and_arrays_are_random_access():
    ds = Dataset.range(3, 9, 2)
    assert len(ds) == 3 and ds[1] == 5 and ds[-1] == 7
    arr = Dataset.from_arrays(np.arange(4), ["a", "b", "c", "d"])
    assert arr[2] == (2, "c")
    assert [x for x, _ in arr] == [0, 1, 2, 3]


def test_from_arrays_rejects_unequal_lengths():
    with pytest.raises(ValueError, match=r"same length, got lengths \[2, 3\]"):
        Dataset.from_arrays([1, 2], [1, 2, 3])


def test_dataset_is_a_reader_iterable_many_times():
    ds = Dataset.from_reader(gen_reader(4))
    assert list(ds()) == [0, 1, 2, 3]
    assert list(ds()) == [0, 1, 2, 3]
    assert ds.to_list() == [0, 1, 2, 3]


def test_reader_that_is_not_callable_is_rejected():
    with pytest.raises(TypeError, match="`reader` must be callable, got list"):
        Dataset.from_reader([1, 2])


def test_one_shot_generator_cannot_resume_and_says_so():
    ds = Dataset.from_iterable(x for x in range(3))
    it = ds.iterator()
    assert next(it) == 0
    with pytest.raises(StateNotSupportedError, match="one-shot iterator"):
        it.get_state()
    assert list(it) == [1, 2]
    with pytest.raises(StateError, match="already iterated"):
        ds.iterator()


def test_nondeterministic_reader_refuses_state_until_declared():
    ds = Dataset.from_reader(gen_reader(3))
    it = ds.iterator()
    next(it)
    with pytest.raises(StateNotSupportedError, match="deterministic=True"):
        it.get_state()
    assert_resumes_everywhere(Dataset.from_reader(gen_reader(5), deterministic=True))


def test_resume_detects_a_reader_that_changed():
    data = [1, 2, 3, 4]
    ds = Dataset.from_reader(lambda: iter(data), deterministic=True)
    it = ds.iterator()
    next(it), next(it), next(it)
    state = it.get_state()
    data[:] = [1]
    with pytest.raises(StateError, match="ended after 1 items while resuming to item 3"):
        ds.iterator(state)


def test_from_source_requires_state_protocol():
    ds = Dataset.from_source(lambda: iter([1, 2]))
    with pytest.raises(TypeError, match="must return a DatasetIterator"):
        ds.to_list()


# ---------------------------------------------------------------- stages
def test_map_filter_flat_map_take_skip():
    ds = Dataset.range(10).map(lambda x: x * 3).filter(lambda x: x % 2 == 0)
    assert ds.to_list() == [0, 6, 12, 18, 24]
    assert Dataset.range(4).flat_map(lambda x: range(x)).to_list() == [0, 0, 1, 0, 1, 2]
    assert Dataset.range(10).take(3).to_list() == [0, 1, 2]
    assert Dataset.range(10).skip(7).to_list() == [7, 8, 9]
    assert Dataset.range(2).take(5).to_list() == [0, 1]


def test_map_over_random_access_stays_random_access():
    ds = Dataset.range(5).map(lambda x: x * 10)
    assert len(ds) == 5 and ds[3] == 30


def test_flat_map_rejects_non_iterable_result():
    with pytest.raises(TypeError, match="fn must return an iterable, got int"):
        Dataset.range(2).flat_map(lambda x: x).to_list()


def test_batch_keeps_or_drops_the_last_batch():
    assert Dataset.range(5).batch(2).to_list() == [[0, 1], [2, 3], [4]]
    assert Dataset.range(5).batch(2, drop_remainder=True).to_list() == [[0, 1], [2, 3]]
    out = Dataset.from_arrays(np.ones((5, 3)), np.arange(5)).batch(4, collate="numpy").to_list()
    assert out[0][0].shape == (4, 3) and out[1][1].tolist() == [4]


@pytest.mark.parametrize("bad", [0, -1])
def test_batch_size_must_be_positive(bad):
    with pytest.raises(ValueError, match=f"`batch_size` must be a positive int, got {bad}"):
        Dataset.range(3).batch(bad)


def test_bad_arguments_name_the_argument():
    with pytest.raises(TypeError, match="`batch_size` must be a positive int, got '2'"):
        Dataset.range(3).batch("2")
    with pytest.raises(ValueError, match="`buffer_size` must be a positive int, got 0"):
        Dataset.range(3).shuffle(0)
    with pytest.raises(TypeError, match="`fn` must be callable"):
        Dataset.range(3).map(3)
    with pytest.raises(ValueError, match="`epochs` must be a positive int, got 0"):
        Dataset.range(3).repeat(0)
    with pytest.raises(ValueError, match="`n` must be a non-negative int, got -1"):
        Dataset.range(3).take(-1)
    with pytest.raises(ValueError, match="`collate` must be None, 'numpy' or a callable"):
        Dataset.range(3).batch(2, collate="torch-ish")
    with pytest.raises(TypeError, match="global_shuffle needs a random-access dataset"):
        Dataset.from_reader(gen_reader(3)).global_shuffle(seed=1)


def test_numpy_collate_rejects_ragged_arrays():
    with pytest.raises(ValueError, match="must share a shape"):
        Dataset.from_iterable([np.zeros(2), np.zeros(3)]).batch(2, collate="numpy").to_list()


def test_repeat_concat_zip():
    assert Dataset.range(2).repeat(3).to_list() == [0, 1] * 3
    assert Dataset.range(2).repeat().take(5).to_list() == [0, 1, 0, 1, 0]
    assert Dataset.range(0).repeat().to_list() == []
    assert Dataset.range(2).concat(Dataset.range(3)).to_list() == [0, 1, 0, 1, 2]
    assert Dataset.range(3).zip(Dataset.range(10, 12)).to_list() == [(0, 10), (1, 11)]
    with pytest.raises(ComposeNotAligned, match="input 1 ended after 2 items but input 0"):
        Dataset.range(3).zip(Dataset.range(2), strict=True).to_list()


def test_shuffle_is_a_seeded_permutation_with_a_new_order_each_epoch():
    ds = Dataset.range(100).shuffle(10, seed=7)
    a, b = ds.to_list(), ds.to_list()
    assert sorted(a) == sorted(b) == list(range(100))
    assert a != b and a != list(range(100))
    again = Dataset.range(100).shuffle(10, seed=7)
    assert again.to_list() == a and again.to_list() == b


def test_shuffle_respects_min_after_dequeue():
    """An item can move forward by at most buffer_size - 1 places."""
    out = Dataset.range(200).shuffle(8, seed=3).to_list()
    for position, item in enumerate(out):
        assert item <= position + 7
    assert Dataset.range(20).shuffle(1, seed=3).to_list() == list(range(20))


def test_shuffle_before_repeat_reshuffles_every_repetition():
    out = Dataset.range(20).shuffle(20, seed=1).repeat(2).to_list()
    first, second = out[:20], out[20:]
    assert sorted(first) == sorted(second) == list(range(20)) and first != second


def test_global_shuffle_permutes_the_whole_dataset_each_epoch():
    ds = Dataset.range(1000).global_shuffle(seed=5)
    a, b = ds.to_list(), ds.to_list()
    assert sorted(a) == sorted(b) == list(range(1000))
    assert a != b
    # the first items come from the whole range, not just the front
    assert max(a[:20]) > 500
    assert Dataset.range(1000).global_shuffle(seed=5).to_list() == a


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 3000), seed=st.integers(0, 2**63))
def test_index_permutation_is_a_bijection(n, seed):
    p = IndexPermutation(n, seed)
    out = p.take(np.arange(n))
    assert sorted(out.tolist()) == list(range(n))


@settings(max_examples=40, deadline=None)
@given(items=st.lists(st.integers(), max_size=60), size=st.integers(1, 20), seed=st.integers(0, 99))
def test_every_shuffle_is_a_permutation(items, size, seed):
    assert sorted(Dataset.from_iterable(items).shuffle(size, seed=seed).to_list()) == sorted(items)


# ---------------------------------------------------------------- state
PIPELINES = {
    "range": lambda: Dataset.range(7),
    "map-filter": lambda: Dataset.range(20).map(lambda x: x * x).filter(lambda x: x % 3 != 1),
    "flat_map": lambda: Dataset.range(6).flat_map(lambda x: [x] * (x % 3)),
    "batch": lambda: Dataset.range(11).batch(3),
    "batch-drop": lambda: Dataset.range(11).batch(3, drop_remainder=True),
    "take-skip": lambda: Dataset.range(20).skip(3).take(9),
    "repeat": lambda: Dataset.range(4).repeat(3),
    "concat": lambda: Dataset.range(3).concat(Dataset.range(10, 12), Dataset.range(0)),
    "zip": lambda: Dataset.range(5).zip(Dataset.range(10, 16)),
    "shuffle": lambda: Dataset.range(40).shuffle(7, seed=3),
    "shuffle-of-stream": lambda: Dataset.from_reader(gen_reader(30), deterministic=True)
    .shuffle(5, seed=9),
    "shuffle-repeat-batch": lambda: Dataset.range(13).shuffle(4, seed=1).repeat(2).batch(3),
    "global_shuffle": lambda: Dataset.range(30).global_shuffle(seed=2),
    "global-repeat": lambda: Dataset.range(9).global_shuffle(seed=2).repeat(3),
    "prefetch": lambda: Dataset.range(12).map(lambda x: -x).prefetch(3),
    "prefetch-batch-shuffle": lambda: Dataset.range(25).shuffle(6, seed=4).batch(4).prefetch(2),
    "arrays": lambda: Dataset.from_arrays(np.arange(6), np.arange(6) * 2).map(lambda t: t[0] + t[1]),
}


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_restore_at_every_step_gives_the_same_remainder(name):
    assert_resumes_everywhere(PIPELINES[name]())


def test_state_is_small_and_json_serialisable():
    ds = Dataset.range(100_000).shuffle(1000, seed=1).batch(32).prefetch(2)
    it = ds.iterator()
    for _ in range(500):
        next(it)
    state = it.get_state()
    text = json.dumps(state)
    assert len(text) < 20_000
    assert next(ds.iterator(json.loads(text))) == next(it)
    it.close()


def test_state_from_another_stage_is_rejected():
    state = Dataset.range(5).batch(2).iterator().get_state()
    with pytest.raises(StateError, match="made by stage 'index', not by 'take'"):
        Dataset.range(5).take(2).iterator(state)
    with pytest.raises(StateError, match="state was made by stage 'index', not by 'pipeline'"):
        Dataset.range(5).iterator(state["stages"])


def test_state_for_a_dataset_of_other_length_is_rejected():
    state = Dataset.range(5).iterator().get_state()
    with pytest.raises(StateError, match="dataset of 5 items, this one has 6"):
        Dataset.range(6).iterator(state)


def test_shuffle_state_with_other_seed_is_rejected():
    it = Dataset.range(10).shuffle(3, seed=1).iterator()
    next(it)
    with pytest.raises(StateError, match="made with seed 1, this stage uses 2"):
        Dataset.range(10).shuffle(3, seed=2).iterator(it.get_state())


# ---------------------------------------------------------------- threads
def test_prefetch_propagates_errors_with_traceback_and_stage(leak_check):
    def boom(x):
        if x == 3:
            raise KeyError("bad item 3")
        return x

    it = Dataset.range(10).map(boom).prefetch(2).iterator()
    got = []
    with pytest.raises(KeyError, match="bad item 3") as info:
        for x in it:
            got.append(x)
    assert got == [0, 1, 2]
    assert any("prefetch" in n for n in info.value.__notes__)
    assert "boom" in "".join(__import__("traceback").format_tb(info.value.__traceback__))
    it.close()
    leak_check.assert_clean()


def test_prefetch_threads_stop_on_break_close_and_gc(leak_check):
    ds = Dataset.range(10_000).prefetch(4)
    it = ds.iterator()
    for x in it:
        if x == 5:
            break
    it.close()
    leak_check.assert_clean()
    for x in ds:  # dropped without close
        if x == 5:
            break
    del x
    import gc

    gc.collect()
    leak_check.assert_clean()
    assert ds.to_list()[-1] == 9999
    leak_check.assert_clean()


def test_prefetch_auto_picks_a_depth_from_measured_pace(leak_check):
    import time

    def slow_every_tenth(x):
        if x % 10 == 0:
            time.sleep(0.02)
        return x

    it = Dataset.range(60).map(slow_every_tenth).prefetch("auto").iterator()
    out = []
    for x in it:
        time.sleep(0.002)
        out.append(x)
    assert out == list(range(60))
    from feedline.runtime.autotune import choose_prefetch_depth

    measured = it._it.auto_measurements
    assert measured is not None and len(measured["produce_seconds"]) == 16
    assert it._it.depth == choose_prefetch_depth(**measured)
    assert max(measured["produce_seconds"]) >= 0.02
    it.close()
    leak_check.assert_clean()
    with pytest.raises(ValueError, match="`buffer_size` must be a positive int, got 0"):
        Dataset.range(3).prefetch(0)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 80), size=st.integers(1, 12), seed=st.integers(0, 50),
       stop=st.integers(0, 90), stream=st.booleans())
def test_shuffle_resumes_exactly_from_any_point(n, size, seed, stop, stream):
    src = (Dataset.from_reader(lambda: iter(range(n)), deterministic=True) if stream
           else Dataset.range(n))
    ds = src.shuffle(size, seed=seed)
    it = ds.iterator()
    start = it.get_state()
    full = list(ds.iterator(start))
    head = [next(it) for _ in range(min(stop, n))]
    state = json.loads(json.dumps(it.get_state()))
    assert head + list(ds.iterator(state)) == full


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 3000), nested=st.booleans(), arrays=st.booleans(),
       epoch=st.integers(0, 3), seed=st.integers(0, 99))
def test_fast_iteration_path_equals_indexing(n, nested, arrays, epoch, seed):
    ds = Dataset.from_arrays(np.arange(n), -np.arange(n)) if arrays else Dataset.range(n)
    ds = ds.global_shuffle(seed=seed).map(lambda x: x)
    if nested:
        ds = ds.global_shuffle(seed=seed + 1)
    by_index = [ds[epoch * n + k] for k in range(n)]
    it = ds.iterator(epoch=epoch)
    norm = (lambda x: tuple(int(v) for v in x)) if arrays else int
    assert [norm(x) for x in it] == [norm(x) for x in by_index]


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 3000), seed=st.integers(0, 2**64 - 1))
def test_table_permutation_is_a_seeded_bijection(n, seed):
    p = TablePermutation(n, seed)
    out = p.take(np.arange(n))
    assert sorted(out.tolist()) == list(range(n))
    assert [p[k] for k in range(min(n, 20))] == out[:20].tolist()
    assert TablePermutation(n, seed).take(np.arange(n)).tolist() == out.tolist()
    with pytest.raises(IndexError, match=rf"index {n} out of range for a permutation of {n}"):
        p.take([n])
    with pytest.raises(IndexError, match=rf"index -1 out of range for a permutation of {n}"):
        p.take([-1])
    with pytest.raises(ValueError, match=r"`n` must be a non-negative int, got -1"):
        TablePermutation(-1, seed)


def test_global_shuffle_of_a_large_dataset_uses_the_constant_memory_permutation():
    assert isinstance(permutation(TABLE_MAX, 1), TablePermutation)
    assert isinstance(permutation(TABLE_MAX + 1, 1), IndexPermutation)
    ds = Dataset.range(TABLE_MAX + 3).global_shuffle(seed=2)
    first, second = ds.to_list(), ds.to_list()
    assert sorted(first) == list(range(TABLE_MAX + 3)) and first != second
    assert ds._permutation(1).take(np.arange(5)).tolist() == second[:5]


@settings(max_examples=50, deadline=None)
@given(n=st.integers(1, 5000), seed=st.integers(0, 2**64 - 1))
def test_scalar_and_vector_permutation_agree(n, seed):
    p = IndexPermutation(n, seed)
    ks = np.random.default_rng(seed % 1000).integers(0, n, size=min(n, 50))
    assert [p[int(k)] for k in ks] == p.take(ks).tolist()
