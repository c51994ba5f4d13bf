"""map(fn, num_workers=N): results, order, state, seeding, shared memory, pool reuse."""

from __future__ import annotations

import os
import random
import warnings

import numpy as np
import pytest

from feedline import Dataset
from feedline.dataset.options import ExecutionOptions
from feedline.dataset.parallel_map import ParallelMapDataset
from feedline.exceptions import SharedMemoryError, StateError, StateNotSupportedError
from feedline.runtime import shm as shm_mod

from resume_helpers import (
    assert_resumes_as_multiset,
    assert_resumes_everywhere,
    assert_set_state_goes_back,
)


def square(x):
    return x * x


def image(i):
    """A 600 KB float32 array whose content identifies ``i``."""
    return np.arange(150_000, dtype=np.float32) + np.float32(i)


def noisy(x):
    return (x, random.random(), float(np.random.rand()))


def stream(n):
    return Dataset.from_reader(lambda: iter(range(n)), deterministic=True)


# ---------------------------------------------------------------------------- results
def test_ordered_equals_in_thread_map_over_random_access(closing, leak_check):
    ds = Dataset.range(57).map(square, num_workers=2)
    closing(ds)
    assert isinstance(ds, ParallelMapDataset)
    assert ds.to_list() == Dataset.range(57).map(square).to_list()
    ds.close()
    leak_check.assert_clean()


def test_ordered_equals_in_thread_map_over_stream(closing, leak_check):
    ds = stream(41).map(lambda x: (x, str(x)), num_workers=3)
    closing(ds)
    assert ds.to_list() == [(x, str(x)) for x in range(41)]
    ds.close()
    leak_check.assert_clean()


@pytest.mark.parametrize("source", ["random_access", "stream"])
def test_unordered_yields_the_same_multiset(closing, source):
    parent = Dataset.range(200) if source == "random_access" else stream(200)
    ds = parent.map(square, num_workers=2, ordered=False)
    closing(ds)
    assert sorted(ds.to_list()) == [x * x for x in range(200)]


def test_large_arrays_arrive_intact_and_writable(closing):
    ds = Dataset.range(12).map(lambda i: {"img": image(i), "meta": (i, image(-i)[:3])},
                               num_workers=2)
    closing(ds)
    out = ds.to_list()
    for i, item in enumerate(out):
        assert item["img"].dtype == np.float32 and item["img"].nbytes == 600_000
        np.testing.assert_array_equal(item["img"], image(i))
        assert item["meta"][0] == i
        np.testing.assert_array_equal(item["meta"][1], image(-i)[:3])
    out[0]["img"][:] = -1  # results own their memory: later items are unaffected
    assert out[1]["img"][0] == 1.0 and out[0]["img"].flags.writeable


def test_arrays_sent_from_a_stream_parent_reach_the_workers(closing):
    parent = Dataset.from_reader(lambda: (image(i) for i in range(6)), deterministic=True)
    ds = parent.map(lambda a: float(a.sum()), num_workers=2)
    closing(ds)
    assert ds.to_list() == [float(image(i).sum()) for i in range(6)]


def test_non_contiguous_and_odd_results(closing):
    ds = Dataset.range(5).map(
        lambda i: (np.arange(20_000.0).reshape(100, 200)[:, ::2] + i, None, b"x" * 20_000),
        num_workers=2,
    )
    closing(ds)
    for i, (arr, none, blob) in enumerate(ds.to_list()):
        np.testing.assert_array_equal(arr, np.arange(20_000.0).reshape(100, 200)[:, ::2] + i)
        assert none is None and blob == b"x" * 20_000


def test_batches_of_arrays_through_workers(closing):
    ds = Dataset.range(10).map(image, num_workers=2).batch(4, collate="numpy")
    closing(ds)
    batches = ds.to_list()
    assert [b.shape for b in batches] == [(4, 150_000), (4, 150_000), (2, 150_000)]
    np.testing.assert_array_equal(batches[2][1], image(9))


def test_many_small_items_are_chunked(closing):
    ds = Dataset.range(20_000).map(lambda x: x + 1, num_workers=2)
    closing(ds)
    it = ds.iterator()
    assert list(it) == list(range(1, 20_001))
    assert it._it._chunk > 1  # several items per message once their cost is known


def test_pipe_transport_gives_the_same_results(closing):
    ds = ParallelMapDataset(Dataset.range(20), image, workers=2, transport="pipe")
    closing(ds)
    assert all(np.array_equal(a, image(i)) for i, a in enumerate(ds.to_list()))


def test_too_small_dev_shm_falls_back_to_pipes_with_a_warning(closing, monkeypatch):
    monkeypatch.setattr(shm_mod, "shm_free_bytes", lambda path=shm_mod.SHM_DIR: 1000)
    ds = Dataset.range(8).map(image, num_workers=2)
    closing(ds)
    with pytest.warns(RuntimeWarning, match=r"/dev/shm is too small.*falling back to pickling"):
        out = ds.to_list()
    assert all(np.array_equal(a, image(i)) for i, a in enumerate(out))


def test_too_small_dev_shm_raises_when_shm_is_required(closing, monkeypatch):
    monkeypatch.setattr(shm_mod, "shm_free_bytes", lambda path=shm_mod.SHM_DIR: 1000)
    ds = ParallelMapDataset(Dataset.range(8), image, workers=2, transport="shm")
    closing(ds)
    with pytest.raises(SharedMemoryError, match=r"/dev/shm is too small: .* needs .* free"):
        ds.to_list()


def test_missing_dev_shm_is_detected(closing, monkeypatch):
    monkeypatch.setattr(shm_mod, "shm_free_bytes", lambda path=shm_mod.SHM_DIR: None)
    ds = ParallelMapDataset(Dataset.range(4), square, workers=1, transport="shm")
    closing(ds)
    with pytest.raises(SharedMemoryError, match="shared memory is not available"):
        ds.to_list()


def test_transport_from_environment(closing, monkeypatch):
    monkeypatch.setenv("FEEDLINE_TRANSPORT", "pipe")
    ds = Dataset.range(6).map(square, num_workers=2)
    closing(ds)
    assert ds.transport == "pipe"
    assert ds.to_list() == [x * x for x in range(6)]


# ---------------------------------------------------------------------------- state
def test_resumes_everywhere_over_random_access(closing):
    ds = Dataset.range(23).map(square, num_workers=2)
    closing(ds)
    assert assert_resumes_everywhere(ds) == [x * x for x in range(23)]


def test_resumes_everywhere_over_a_stream(closing):
    ds = stream(23).map(square, num_workers=2)
    closing(ds)
    assert assert_resumes_everywhere(ds) == [x * x for x in range(23)]


def test_resumes_everywhere_when_chunked_and_batched(closing):
    ds = stream(300).map(lambda x: x - 1, num_workers=2).batch(7)
    closing(ds)
    full = assert_resumes_everywhere(ds)
    assert sum(full, []) == list(range(-1, 299))


def test_resume_after_many_items_with_array_results(closing):
    ds = Dataset.range(40).map(image, num_workers=2, execution=ExecutionOptions(buffer_size=5))
    closing(ds)
    it = ds.iterator()
    for _ in range(17):
        next(it)
    state = it.get_state()
    it.close()
    assert state["stages"]["pos"] == 17 and state["stages"]["done"] == []
    rest = list(ds.iterator(state))
    assert len(rest) == 23 and np.array_equal(rest[0], image(17))


@pytest.mark.parametrize("source", ["random_access", "stream"])
def test_set_state_on_a_running_iterator(closing, source):
    parent = Dataset.range(40) if source == "random_access" else stream(40)
    ds = parent.map(lambda x: -x, num_workers=2)
    closing(ds)
    assert_set_state_goes_back(ds, 40)  # set_state cancels the work in flight


@pytest.mark.parametrize("source", ["random_access", "stream"])
def test_unordered_resumes_with_the_remaining_multiset(closing, source):
    parent = Dataset.range(30) if source == "random_access" else stream(30)
    ds = parent.map(square, num_workers=2, ordered=False)
    closing(ds)
    assert sorted(assert_resumes_as_multiset(ds)) == sorted(x * x for x in range(30))


def test_unordered_state_lists_positions_yielded_out_of_order(closing):
    def late_zero(x):
        if x == 0:
            import time

            time.sleep(0.3)
        return x

    ds = Dataset.range(6).map(late_zero, num_workers=2, ordered=False)
    closing(ds)
    it = ds.iterator()
    first = next(it)
    state = it.get_state()["stages"]
    assert first != 0 and state["pos"] == 0 and state["done"] == [first]
    rest = list(ds.iterator(it.get_state()))
    it.close()
    assert sorted(rest) == sorted(set(range(6)) - {first})


def test_state_of_a_stream_input_that_cannot_resume(closing):
    ds = Dataset.from_reader(lambda: iter(range(5))).map(square, num_workers=2)
    closing(ds)
    it = ds.iterator()
    assert list(it) == [0, 1, 4, 9, 16]
    with pytest.raises(StateNotSupportedError, match=r"cannot report its position because its input"):
        it.get_state()


def test_state_from_another_kind_of_input_is_refused(closing):
    ra = Dataset.range(10).map(square, num_workers=1)
    st = stream(10).map(square, num_workers=1)
    closing(ra)
    closing(st)
    with pytest.raises(StateError, match="over a stream input"):
        ra.iterator({"type": "pipeline", "version": 1, "epoch": 0,
                     "stages": {"type": "parallel_map", "pos": 1, "done": [], "parent": {},
                                "skip": 0}})
    with pytest.raises(StateError, match="made for|items, this one has"):
        ra.iterator({"type": "pipeline", "version": 1, "epoch": 0,
                     "stages": {"type": "parallel_map", "pos": 1, "done": [], "len": 3}})
    with pytest.raises(StateError, match="over a random-access input"):
        st.iterator({"type": "pipeline", "version": 1, "epoch": 0,
                     "stages": {"type": "parallel_map", "pos": 1, "done": [], "len": 10}})


def test_buffer_size_bounds_items_in_flight(closing):
    pulled = []

    def reader():
        for i in range(100):
            pulled.append(i)
            yield i

    ds = Dataset.from_reader(reader).map(square, num_workers=2, execution=ExecutionOptions(buffer_size=6))
    closing(ds)
    it = ds.iterator()
    assert next(it) == 0
    assert len(pulled) <= 6 + 1
    it.close()


# ---------------------------------------------------------------------------- seeding
def test_same_seed_gives_identical_random_draws(closing):
    a = Dataset.range(40).map(noisy, num_workers=2, seed=7)
    b = Dataset.range(40).map(noisy, num_workers=2, seed=7)
    c = Dataset.range(40).map(noisy, num_workers=2, seed=8)
    for ds in (a, b, c):
        closing(ds)
    out_a, out_b, out_c = a.to_list(), b.to_list(), c.to_list()
    assert out_a == out_b
    assert out_a != out_c
    # workers draw different streams, and each epoch draws anew
    assert len({draw for _, draw, _ in out_a}) == 40
    assert a.to_list() != out_a
    assert Dataset.range(40).map(noisy, num_workers=2, seed=7).to_list() == out_a


def test_no_seed_still_gives_every_worker_its_own_stream(closing):
    ds = Dataset.range(20).map(noisy, num_workers=2)
    closing(ds)
    draws = [np_draw for _, _, np_draw in ds.to_list()]
    assert len(set(draws)) == 20


def test_torch_is_seeded_in_workers_when_imported(closing):
    torch = pytest.importorskip("torch")

    def draw(x):
        return float(torch.rand(1))

    a = Dataset.range(6).map(draw, num_workers=2, seed=3)
    b = Dataset.range(6).map(draw, num_workers=2, seed=3)
    closing(a)
    closing(b)
    assert a.to_list() == b.to_list()


# ---------------------------------------------------------------------------- pool
def test_workers_are_kept_across_epochs_and_stopped_by_close(leak_check):
    ds = Dataset.range(10).map(lambda x: (x, os.getpid()), num_workers=2)
    first = ds.to_list()
    pids = set(ds.worker_pids)
    assert len(pids) == 2 and {pid for _, pid in first} == pids
    assert {pid for _, pid in ds.to_list()} == pids
    assert {pid for _, pid in ds.repeat(2).to_list()} == pids
    ds.close()
    leak_check.assert_clean()
    assert [x for x, _ in ds.to_list()] == list(range(10))  # restarts on demand
    ds.close()
    leak_check.assert_clean()


def test_dropping_the_dataset_stops_its_workers(leak_check):
    ds = Dataset.range(10).map(square, num_workers=2)
    assert ds.to_list()[-1] == 81
    del ds
    leak_check.assert_clean()


def test_an_iterator_outliving_its_dataset_keeps_working(leak_check):
    it = Dataset.range(30).map(square, num_workers=2).iterator()
    assert [next(it) for _ in range(3)] == [0, 1, 4]
    assert list(it)[-1] == 29 * 29
    it.close()
    leak_check.assert_clean()


def test_two_iterators_at_once(closing):
    ds = Dataset.range(15).map(square, num_workers=2)
    closing(ds)
    assert ds.zip(ds).to_list() == [(x * x, x * x) for x in range(15)]


def test_auto_workers_choose_within_the_budget(closing):
    ds = Dataset.range(40).map(square, num_workers="auto")
    closing(ds)
    assert ds.to_list() == [x * x for x in range(40)]
    assert 1 <= ds._holder.workers <= ds.cpu_budget
    assert ds.to_list() == [x * x for x in range(40)]


def test_auto_workers_add_workers_for_a_slow_function(closing):
    def slow(x):
        import time

        time.sleep(0.01)
        return x

    ds = ParallelMapDataset(Dataset.range(30), slow, workers="auto", cpu_budget=3)
    closing(ds)
    assert ds.to_list() == list(range(30))
    assert ds._holder.workers == 3  # the consumer is far faster than one worker


def test_spawn_start_method(closing):
    ds = ParallelMapDataset(Dataset.range(6), square, workers=2, start_method="spawn")
    closing(ds)
    assert ds.to_list() == [0, 1, 4, 9, 16, 25]


def test_spawn_needs_a_picklable_function(closing):
    ds = ParallelMapDataset(Dataset.range(6), lambda x: x, workers=1, start_method="spawn")
    closing(ds)
    with pytest.raises(TypeError, match="pickles the function and dataset .* module level"):
        ds.to_list()


def test_buffer_fill_is_a_fraction(closing):
    ds = Dataset.range(50).map(square, num_workers=2)
    closing(ds)
    it = ds.iterator()._it
    fills = []
    for _ in it:
        fills.append(it.buffer_fill())
    assert all(0.0 <= f <= 1.0 for f in fills)


# ---------------------------------------------------------------------------- arguments
@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"num_workers": -1}, ValueError, r"`num_workers` must be a non-negative int or 'auto', got -1"),
        ({"num_workers": "many"}, ValueError, r"`num_workers` must be a non-negative int or 'auto'"),
        ({"num_workers": 2, "seed": "s"}, TypeError, r"`seed` must be an int or None, got 's'"),
        ({"num_workers": 2, "buffer_size": 0}, ValueError, r"`buffer_size` must be a positive int, got 0"),
    ],
)
def test_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        Dataset.range(3).map(square, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"workers": 0}, ValueError, r"`workers` must be a positive int or 'auto', got 0"),
        ({"workers": True}, ValueError, r"`workers` must be a positive int or 'auto', got True"),
        ({"workers": 1, "start_method": "vfork"}, ValueError, r"`start_method` must be one of"),
        ({"workers": 1, "transport": "carrier pigeon"}, ValueError, r"`transport` must be one of"),
        ({"workers": 1, "cpu_budget": 0}, ValueError, r"`cpu_budget` must be a positive int"),
    ],
)
def test_bad_arguments_of_the_stage(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        ParallelMapDataset(Dataset.range(3), square, **kwargs)


def test_bad_start_method_in_environment(monkeypatch):
    monkeypatch.setenv("FEEDLINE_START_METHOD", "thread")
    with pytest.raises(ValueError, match="FEEDLINE_START_METHOD must be one of"):
        Dataset.range(3).map(square, num_workers=1)


def test_warnings_are_not_raised_in_the_normal_case(closing):
    ds = Dataset.range(5).map(square, num_workers=2)
    closing(ds)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ds.to_list() == [0, 1, 4, 9, 16]


def test_dataset_close_stops_every_worker_stage_in_the_pipeline(leak_check):
    ds = Dataset.range(20).map(square, num_workers=2).batch(4).map(len, num_workers=1)
    assert sum(ds.to_list()) == 20
    inner = ds._parents[0]._parents[0]
    assert inner.worker_pids and ds.worker_pids
    ds.close()
    assert not inner.worker_pids and not ds.worker_pids
    leak_check.assert_clean()
    assert sum(ds.to_list()) == 20  # a later iteration starts them again
    ds.close()
    leak_check.assert_clean()


# ---------------------------------------------------------------------------- small arrays
def small_sample(i):
    return (np.full(4, i, dtype=np.float32), i, str(i))


def ragged(i):
    return np.zeros(i % 3 + 1, dtype=np.int16) + i


def test_small_array_results_arrive_equal_writable_and_independent(closing):
    ds = stream(300).map(small_sample, num_workers=2)
    closing(ds)
    for _ in range(2):  # the second epoch starts with what the first one measured
        out = ds.to_list()
        assert all(type(o) is tuple and len(o) == 3 for o in out)
        assert [o[1] for o in out] == list(range(300))
        assert [o[2] for o in out] == [str(i) for i in range(300)]
        for i, (a, _, _) in enumerate(out):
            assert a.dtype == np.float32 and a.shape == (4,) and a.tolist() == [i] * 4
        out[0][0][:] = -1  # rows are writable and do not share elements
        assert out[0][0].flags.writeable and out[1][0].tolist() == [1.0] * 4


def test_results_that_do_not_stack_arrive_as_they_were(closing):
    ds = stream(50).map(ragged, num_workers=2)
    closing(ds)
    out = ds.to_list()
    assert [a.tolist() for a in out] == [ragged(i).tolist() for i in range(50)]
    assert all(a.dtype == np.int16 for a in out)


def test_pack_entries_only_stacks_plain_tuples_of_ok_entries():
    from feedline.runtime.workers import ERROR, OK, pack_entries, unpack_entries

    rows = [(OK, (np.arange(3) + i, i)) for i in range(5)]
    packed = pack_entries(rows)
    assert isinstance(packed, tuple)
    back = unpack_entries(packed)
    assert [s for s, _ in back] == [OK] * 5
    assert all(np.array_equal(b[0], r[0]) and b[1] == r[1] for (_, b), (_, r) in zip(back, rows))
    with_error = rows[:2] + [(ERROR, ("blob",))]
    assert pack_entries(with_error) is with_error
    lists = [(OK, [np.arange(3), i]) for i in range(3)]  # lists are not tuples: kept as they are
    assert pack_entries(lists) is lists
    objects = [(OK, (np.array([None]), i)) for i in range(3)]
    assert pack_entries(objects) is objects


@pytest.mark.parametrize("make", [
    lambda i: np.arange(6, dtype=np.int32).reshape(2, 3) + i,        # 2-d
    lambda i: np.asfortranarray(np.arange(6.0).reshape(3, 2) * i),   # Fortran order
    lambda i: (np.arange(12) + i)[::3],                               # a strided view
    lambda i: np.array(i, dtype=np.uint8),                            # 0-d
])
def test_pack_entries_stacks_rows_equal_to_the_arrays(make):
    from feedline.runtime.workers import OK, pack_entries, unpack_entries

    rows = [(OK, make(i)) for i in range(4)]
    packed = pack_entries(rows)
    assert isinstance(packed, tuple)
    back = [value for _, value in unpack_entries(packed)]
    for got, (_, want) in zip(back, rows):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.array_equal(got, want)


def failing_stream(n, bad):
    def read():
        for i in range(n):
            if i == bad:
                raise ValueError(f"bad record {i}")
            yield i
    return Dataset.from_reader(read, deterministic=True)


@pytest.mark.parametrize("batched", [False, True])
def test_an_error_of_the_input_is_raised_in_its_place(closing, batched):
    ds = failing_stream(40, 5).map(square, num_workers=2)
    closing(ds)
    it = (ds.batch(3) if batched else ds).iterator()
    got = []
    with pytest.raises(ValueError, match="bad record 5") as info:
        for x in it:
            got.append(x)
    assert info.value.__notes__[0] == "raised by the input of stage 'map(square)' at item 5"
    assert got == ([[0, 1, 4]] if batched else [0, 1, 4, 9, 16])
    assert list(it) == []  # the iteration is over
    it.close()
