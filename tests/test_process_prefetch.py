"""prefetch(n, process=True): items, order, epochs, state, errors, lifecycle, the
DataProvider's feeding in the background process, and the WorkerPool additions under it."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

import numpy as np
import pytest
import torch

from feedline import Dataset
from feedline.dataset.process_prefetch import ProcessPrefetchDataset
from feedline.exceptions import (
    PipelineError,
    RemoteTraceback,
    StateNotSupportedError,
    WorkerDiedError,
    WorkerError,
)
from feedline.runtime.workers import END, OK, EndOfInput, WorkerPool
from feedline.train import Runner
from feedline.train.items import Counter, CreateModel, DataProvider, LocalUpdater, TrainOps
from process_helpers import BadRecord, fail_on_five, parent_of, process_alive, wait_gone
from train_helpers import Crash, CrashAt, Grab, linear_net, make_data

from resume_helpers import _norm, assert_resumes_everywhere, assert_set_state_goes_back

pytestmark = pytest.mark.timeout(60)  # a hang fails the test instead of the run


# ---------------------------------------------------------------------------- helpers
def square(x):
    return x * x


def add_one(x):
    return x + 1


def stream(n):
    return Dataset.from_reader(lambda: iter(range(n)), deterministic=True)


def sample(i):
    """A sample of a small array and an int: a batch of them travels stacked."""
    return (np.full(4, i, dtype=np.float32), i)


def shuffled(n=23, seed=3):
    """A seeded pipeline whose order differs per epoch."""
    return Dataset.range(n).shuffle(7, seed=seed).map(lambda x: x * 10).batch(3)


def slow(x):
    time.sleep(0.02)
    return x


def epochs(ds, count):
    """``count`` successive ``to_list()`` epochs."""
    return [ds.to_list() for _ in range(count)]


# ---------------------------------------------------------------------------- items and order
@pytest.mark.parametrize("source", ["random_access", "stream"])
def test_items_and_order_of_a_plain_source(closing, leak_check, source):
    parent = Dataset.range(37) if source == "random_access" else stream(37)
    ds = parent.prefetch(3, process=True)
    closing(ds)
    assert isinstance(ds, ProcessPrefetchDataset)
    assert ds.to_list() == list(range(37))
    ds.close()
    leak_check.assert_clean()


@pytest.mark.parametrize("size", [1, 3, 20, "auto"])
def test_map_and_batch_pipeline_for_every_buffer_size(closing, size):
    def pipeline():
        return Dataset.range(50).map(lambda x: x * 3 - 1).batch(4)

    ds = pipeline().prefetch(size, process=True)
    closing(ds)
    want = pipeline().to_list()
    assert ds.to_list() == want
    assert ds.to_list() == want  # a second epoch (adopting what was read ahead)
    assert ds.buffer_size == size


def test_batches_of_samples_of_small_arrays_arrive_equal_and_writable(closing):
    ds = Dataset.range(22).map(sample).batch(5).prefetch(2, process=True)
    closing(ds)
    for _ in range(2):
        out = ds.to_list()
        assert [len(b) for b in out] == [5, 5, 5, 5, 2]
        flat = [s for b in out for s in b]
        assert all(type(b) is list for b in out)
        assert all(type(s) is tuple and len(s) == 2 for s in flat)
        for i, (arr, label) in enumerate(flat):
            assert label == i
            assert type(arr) is np.ndarray and arr.dtype == np.float32 and arr.shape == (4,)
            assert arr.tolist() == [float(i)] * 4
            assert arr.flags.writeable
        flat[0][0][:] = -1  # rows do not share elements
        assert flat[1][0].tolist() == [1.0] * 4 and flat[0][0].tolist() == [-1.0] * 4


def test_plain_array_items_and_batches_of_arrays(closing):
    ds = Dataset.range(9).map(lambda i: np.arange(6, dtype=np.int16).reshape(2, 3) + i)
    ds = ds.batch(4).prefetch(3, process=True)
    closing(ds)
    out = ds.to_list()
    want = [[np.arange(6, dtype=np.int16).reshape(2, 3) + i for i in range(j, min(j + 4, 9))]
            for j in range(0, 9, 4)]
    assert [_norm(b) for b in out] == [_norm(b) for b in want]
    assert out[0][0].flags.writeable
    single = Dataset.range(5).map(lambda i: np.full((3, 2), i, np.float64))
    ds2 = single.prefetch(2, process=True)
    closing(ds2)
    got = ds2.to_list()
    assert all(a.dtype == np.float64 and a.shape == (3, 2) for a in got)
    assert [float(a[0, 0]) for a in got] == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_dict_items_and_mixed_containers(closing):
    def make(i):
        return {"id": i, "name": f"n{i}", "x": np.arange(3.0) * i, "pair": (i, [i, i + 1])}

    ds = Dataset.range(12).map(make).prefetch(4, process=True)
    closing(ds)
    out = ds.to_list()
    assert [_norm(x) for x in out] == [_norm(make(i)) for i in range(12)]
    batched = Dataset.range(12).map(make).batch(5).prefetch(2, process=True)
    closing(batched)
    assert [_norm(b) for b in batched.to_list()] == [
        _norm([make(i) for i in range(j, min(j + 5, 12))]) for j in range(0, 12, 5)]


def test_empty_and_tiny_data_over_many_epochs(closing):
    empty = Dataset.range(0).prefetch(3, process=True)
    closing(empty)
    assert epochs(empty, 4) == [[], [], [], []]
    filtered = Dataset.range(10).filter(lambda x: x > 100).prefetch(20, process=True)
    closing(filtered)
    assert epochs(filtered, 3) == [[], [], []]
    # a buffer larger than the data: the process reads several epochs ahead
    tiny = Dataset.range(3).shuffle(3, seed=5)
    ds = tiny.prefetch(20, process=True)
    closing(ds)
    assert epochs(ds, 6) == epochs(Dataset.range(3).shuffle(3, seed=5), 6)


def image(i):
    """A 600 KB float32 array whose content identifies ``i``."""
    return np.arange(150_000, dtype=np.float32) + np.float32(i)


@pytest.mark.parametrize("transport", ["shm", "pipe"])
def test_large_batches_of_arrays_arrive_intact(closing, transport):
    ds = Dataset.range(10).map(image).batch(4).prefetch(2, process=True, transport=transport)
    closing(ds)
    out = ds.to_list()  # items of 2.4 MB: larger than the initial shared-memory blocks
    assert [len(b) for b in out] == [4, 4, 2]
    for i, arr in enumerate(a for b in out for a in b):
        assert arr.dtype == np.float32 and arr.shape == (150_000,)
        np.testing.assert_array_equal(arr, image(i))
    out[0][0][:] = -1
    assert out[0][1][0] == 1.0 and out[0][0].flags.writeable


@pytest.mark.parametrize(("size", "transport"), [(1, "shm"), (3, "shm"), (16, "shm"),
                                                  (3, "pipe")])
def test_buffer_size_bounds_the_items_produced_ahead(closing, tmp_path, size, transport):
    """"Up to ``buffer_size`` items are produced ahead" (the module docstring)."""
    log = tmp_path / "read"

    def reader():
        for i in range(500):
            with open(log, "a") as f:
                f.write(".")
            yield i

    ds = Dataset.from_reader(reader, deterministic=True).prefetch(
        size, process=True, transport=transport)
    closing(ds)
    it = ds.iterator()
    taken = 0
    for target in (1, 5):
        while taken < target:
            assert next(it) == taken
            taken += 1
        time.sleep(0.2)  # let the process read everything it is allowed to
        produced = len(log.read_text())
        assert produced <= taken + size, (
            f"{produced} items read when {taken} were taken: {produced - taken} ahead "
            f"with buffer_size={size} (transport {transport!r})")
    it.close()


def test_name_and_repr(closing):
    ds = Dataset.range(3).prefetch(2, process=True)
    auto = Dataset.range(3).prefetch("auto", process=True)
    closing(ds)
    closing(auto)
    assert ds.name == "prefetch(2, process=True)"
    assert auto.name == "prefetch('auto', process=True)"
    assert "prefetch(2, process=True)" in repr(ds)
    assert type(Dataset.range(3).prefetch(2)).__name__ == "PrefetchDataset"  # threads by default


def test_statistics_have_one_row_for_the_stage(closing):
    ds = Dataset.range(10).map(square).batch(3).prefetch(2, process=True)
    closing(ds)
    it = ds.iterator(stats=True)
    assert len(list(it)) == 4
    report = it.stats()
    it.close()
    assert [(s.name, s.items) for s in report.stages] == [("prefetch(2, process=True)", 4)]


# ---------------------------------------------------------------------------- epochs
def test_successive_epochs_follow_the_seeded_orders(closing):
    ds = shuffled().prefetch(3, process=True)
    closing(ds)
    ref = shuffled()
    got, want = epochs(ds, 3), epochs(ref, 3)
    assert got == want
    assert want[0] != want[1]  # the orders differ per epoch, so the check means something


def _logged(n, log):
    """A seeded shuffle whose items are written to ``log`` as the pipeline produces them."""

    def write(x):
        with open(log, "a") as f:
            f.write(f"{x}\n")
        return x

    return Dataset.range(n).shuffle(n, seed=4).map(write)


def _lines(log):
    try:
        return [int(v) for v in log.read_text().split()]
    except FileNotFoundError:
        return []


def _settled(log, at_least, timeout=10.0):
    deadline = time.monotonic() + timeout
    while len(_lines(log)) < at_least and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # and nothing more comes
    return _lines(log)


def test_the_next_epoch_is_read_ahead_and_adopted(closing, tmp_path):
    log = tmp_path / "produced"
    n = 12
    ds = _logged(n, log).prefetch(3, process=True)
    closing(ds)
    ref = Dataset.range(n).shuffle(n, seed=4)
    want = [list(ref.iterator(epoch=e)) for e in range(3)]
    assert want[0] != want[1] != want[2]
    first = ds.to_list()
    pid = ds.worker_pids
    produced = _settled(log, n + 1)
    ahead = len(produced) - n
    assert 1 <= ahead <= 3  # the process went on into epoch 1, up to the buffer's size
    assert produced == want[0] + want[1][:ahead]
    second = ds.to_list()
    assert ds.worker_pids == pid  # the same process
    assert [first, second] == want[:2]
    produced = _settled(log, 2 * n + 1)
    # epoch 1's first items were read once, not read again: what was read ahead was used
    assert produced == want[0] + want[1] + want[2][:len(produced) - 2 * n]
    # an iteration of another epoch discards it (epoch 5: read from its start)
    assert list(ds.iterator(epoch=5)) == list(ref.iterator(epoch=5))


def test_an_explicit_epoch_after_other_iterations(closing):
    ds = shuffled().prefetch(3, process=True)
    closing(ds)
    ds.to_list()
    ds.to_list()  # the process now reads epoch 2 ahead
    want5 = list(shuffled().iterator(epoch=5))
    assert list(ds.iterator(epoch=5)) == want5
    # later iterations continue from epoch 6, again in the right order
    assert ds.to_list() == list(shuffled().iterator(epoch=6))
    # and going back to an earlier epoch too
    assert list(ds.iterator(epoch=1)) == list(shuffled().iterator(epoch=1))


def test_an_iteration_closed_early_then_a_new_one(closing):
    ds = shuffled(40).prefetch(2, process=True)
    closing(ds)
    ref = shuffled(40)
    a, r = ds.iterator(), ref.iterator()
    assert [next(a) for _ in range(3)] == [next(r) for _ in range(3)]
    a.close()
    r.close()
    assert ds.to_list() == ref.to_list()  # epoch 1, from its start
    # closed right at the end of an epoch (with the next one read ahead), then a new one
    a, r = ds.iterator(), ref.iterator()
    assert list(a) == list(r)
    a.close()
    r.close()
    b, r = ds.iterator(), ref.iterator(epoch=3)
    assert next(b) == next(r)
    b.close()
    r.close()
    assert ds.to_list() == list(shuffled(40).iterator(epoch=4))


def test_repeat_over_the_stage_gives_each_repetition_its_epoch(closing):
    ds = shuffled(14).prefetch(2, process=True)
    closing(ds)
    rep, ref = ds.repeat(3), shuffled(14).repeat(3)
    want = [ref.to_list(), ref.to_list()]
    assert want[0][:5] != want[0][5:10]  # each repetition is an epoch of its own order
    assert [rep.to_list(), rep.to_list()] == want


def test_two_iterations_at_once(closing):
    ds = shuffled().prefetch(2, process=True)
    closing(ds)
    ref = shuffled()
    assert ds.zip(ds).to_list() == ref.zip(ref).to_list()
    a, b = ds.iterator(epoch=7), ds.iterator(epoch=8)
    got_a, got_b = [], []
    for x, y in zip(a, b):
        got_a.append(x)
        got_b.append(y)
    a.close()
    b.close()
    assert got_a == list(shuffled().iterator(epoch=7))
    assert got_b == list(shuffled().iterator(epoch=8))
    assert len(ds.worker_pids) == 1  # the second one's process was stopped at its end


# ---------------------------------------------------------------------------- state
@pytest.mark.parametrize("size", [1, 3, "auto"])
def test_resumes_everywhere(closing, size):
    ds = Dataset.range(17).map(square).prefetch(size, process=True)
    closing(ds)
    assert assert_resumes_everywhere(ds) == [x * x for x in range(17)]


def test_resumes_everywhere_over_a_seeded_shuffle_and_batches(closing):
    ds = shuffled(20).prefetch(2, process=True)
    closing(ds)
    full = assert_resumes_everywhere(ds)
    assert full == [_norm(b) for b in shuffled(20).to_list()]


def test_resume_for_every_k_within_an_epoch_adopted_from_the_read_ahead(closing):
    ds = shuffled(20).prefetch(3, process=True)
    closing(ds)
    ref = shuffled(20)
    n = len(ref.to_list())
    seen = []
    for k in range(n + 1):
        ds.to_list()  # an epoch to its end: the process reads the next one ahead
        it = ds.iterator()
        epoch = it.epoch
        head = [next(it) for _ in range(k)]
        state = it.get_state()
        it.close()
        want = list(ref.iterator(epoch=epoch))
        seen.append(want)
        assert head == want[:k]
        state = json.loads(json.dumps(state))
        assert state["epoch"] == epoch and state["stages"]["pos"] == k
        resumed = ds.iterator(state)
        assert list(resumed) == want[k:], k
        resumed.close()
    assert len({repr(w) for w in seen}) > 1  # the epochs' orders differ: the check means something


def test_resume_an_earlier_epoch_while_the_next_is_read_ahead(closing):
    ds = shuffled(20).prefetch(2, process=True)
    closing(ds)
    it = ds.iterator()
    head = [next(it) for _ in range(2)]
    state = it.get_state()
    rest = list(it)  # to the end: the process reads epoch 1 ahead
    it.close()
    assert list(ds.iterator(state)) == rest
    assert head + rest == shuffled(20).to_list()
    # a resumed iteration that reaches its end leaves the next epoch right too
    assert ds.to_list() == list(shuffled(20).iterator(epoch=1))


def test_set_state_on_a_running_iterator(closing):
    ds = stream(40).map(lambda x: -x).prefetch(3, process=True)
    closing(ds)
    assert_set_state_goes_back(ds, 40)


def test_state_is_json_and_names_the_stage(closing):
    ds = Dataset.range(10).batch(3).prefetch(2, process=True)
    closing(ds)
    it = ds.iterator()
    assert it.get_state()["stages"] == {"type": "process_prefetch", "pos": 0, "parent": None}
    next(it)
    state = it.get_state()
    it.close()
    assert json.loads(json.dumps(state)) == state
    assert state["stages"]["type"] == "process_prefetch" and state["stages"]["pos"] == 1
    ref = Dataset.range(10).batch(3).iterator()
    next(ref)
    assert state["stages"]["parent"] == ref.get_state()["stages"]  # the pipeline's own state
    ref.close()


def test_state_of_a_source_that_cannot_resume(closing):
    ds = Dataset.from_reader(lambda: iter(range(5))).map(square).prefetch(2, process=True)
    closing(ds)
    it = ds.iterator()
    assert list(it) == [0, 1, 4, 9, 16]  # iterating works
    with pytest.raises(StateNotSupportedError):
        it.get_state()
    it.close()
    assert ds.to_list() == [0, 1, 4, 9, 16]


def test_a_bad_state_is_refused(closing):
    from feedline.exceptions import StateError

    ds = Dataset.range(5).prefetch(2, process=True)
    closing(ds)
    bad = {"type": "pipeline", "version": 1, "epoch": 0,
           "stages": {"type": "process_prefetch", "pos": -1, "parent": None}}
    with pytest.raises(StateError, match="non-negative int"):
        ds.iterator(bad)
    other = {"type": "pipeline", "version": 1, "epoch": 0,
             "stages": {"type": "prefetch", "pos": 1, "parent": None}}
    with pytest.raises(StateError):
        ds.iterator(other)


# ---------------------------------------------------------------------------- errors
def test_an_error_upstream_arrives_in_its_place_with_the_remote_traceback(closing, leak_check):
    ds = Dataset.range(20).map(fail_on_five).prefetch(3, process=True)
    closing(ds)
    it = ds.iterator()
    got = []
    with pytest.raises(BadRecord, match="record 5 is bad") as info:
        for x in it:
            got.append(x)
    assert got == [0, 1, 2, 3, 4]
    cause = info.value.__cause__
    assert isinstance(cause, RemoteTraceback)
    assert "fail_on_five" in cause.tb and 'raise BadRecord(f"record {x} is bad")' in cause.tb
    if sys.version_info >= (3, 11):
        note = info.value.__notes__[-1]
        assert "stage 'prefetch(3, process=True)'" in note and "item 5" in note
        assert f"(pid {ds.worker_pids[0]})" in note
    with pytest.raises(StopIteration):  # the iteration is over
        next(it)
    it.close()
    # the dataset is still usable, in the same process
    pid = ds.worker_pids
    assert ds.take(5).to_list() == [0, 1, 2, 3, 4]
    assert ds.worker_pids == pid
    ds.close()
    leak_check.assert_clean()


def test_an_error_in_a_batched_stream_keeps_its_item_position(closing):
    def read():
        for i in range(30):
            if i == 13:
                raise OSError("disk went away")
            yield i

    ds = Dataset.from_reader(read, deterministic=True).batch(4).prefetch(2, process=True)
    closing(ds)
    it = ds.iterator()
    got = []
    with pytest.raises(OSError, match="disk went away") as info:
        for b in it:
            got.append(b)
    assert got == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    if sys.version_info >= (3, 11):
        assert "item 3" in info.value.__notes__[-1]
    assert list(it) == []
    it.close()


@pytest.mark.parametrize("bad", [0, 1, 4])
def test_an_error_in_an_adopted_epoch_comes_at_its_item(closing, bad):
    """The next epoch's items (an error among them) are read ahead while the consumer
    finishes this one: the error is raised by the next epoch, at its item."""
    calls = {"n": 0}

    def fail_in_second_epoch(x):
        calls["n"] += 1  # counted in the background process
        if calls["n"] == 10 + bad + 1:  # the second epoch's item `bad`
            raise BadRecord("second epoch")
        return x

    ds = Dataset.range(10).map(fail_in_second_epoch).prefetch(4, process=True)
    closing(ds)
    assert ds.to_list() == list(range(10))
    it = ds.iterator()
    got = []
    with pytest.raises(BadRecord, match="second epoch") as info:
        for x in it:
            got.append(x)
    assert got == list(range(bad))
    if sys.version_info >= (3, 11):
        assert f"item {bad}" in info.value.__notes__[-1]
    it.close()
    assert ds.to_list() == list(range(10))  # the epoch after it is whole


def test_an_error_while_building_the_pipeline_is_raised_at_the_first_item(closing):
    def reader():
        raise KeyError("no such table")

    ds = Dataset.from_reader(reader, deterministic=True).prefetch(2, process=True)
    closing(ds)
    with pytest.raises(KeyError, match="no such table") as info:
        ds.to_list()
    assert isinstance(info.value.__cause__, RemoteTraceback)


def test_an_unpicklable_exception_becomes_worker_error(closing, leak_check):
    class Local(Exception):  # defined in a function: cannot be pickled by reference
        pass

    def boom(x):
        if x == 2:
            raise Local("local failure")
        return x

    ds = Dataset.range(6).map(boom).prefetch(2, process=True)
    closing(ds)
    it = ds.iterator()
    got = []
    with pytest.raises(WorkerError, match=r"Local: local failure") as info:
        for x in it:
            got.append(x)
    assert got == [0, 1]
    assert isinstance(info.value.__cause__, RemoteTraceback)
    assert "boom" in info.value.__cause__.tb
    if sys.version_info >= (3, 11):
        assert "stage 'prefetch(2, process=True)'" in info.value.__notes__[-1]
    it.close()
    ds.close()
    leak_check.assert_clean()


def test_an_item_that_cannot_be_sent_back_is_a_clear_error(closing):
    ds = Dataset.range(3).map(lambda x: (lambda: x)).prefetch(2, process=True)
    closing(ds)
    with pytest.raises(TypeError, match="cannot be sent back from the worker process"):
        ds.to_list()


def test_killing_the_background_process_raises_and_the_next_iteration_recovers(
        closing, leak_check):
    ds = Dataset.range(200).map(slow).prefetch(2, process=True)
    closing(ds)
    it = ds.iterator()
    assert [next(it) for _ in range(3)] == [0, 1, 2]
    victim = ds.worker_pids[0]
    os.kill(victim, signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(WorkerDiedError) as info:
        for _ in it:
            pass
    assert time.monotonic() - start < 10  # a hang guard, not a timing assertion
    message = str(info.value)
    assert f"pid {victim}" in message and "SIGKILL" in message
    assert "prefetch(2, process=True)" in message
    with pytest.raises(StopIteration):
        next(it)
    it.close()
    assert victim not in ds.worker_pids
    it = ds.iterator()
    assert [next(it) for _ in range(4)] == [0, 1, 2, 3]  # a new process
    assert ds.worker_pids and victim not in ds.worker_pids
    it.close()
    ds.close()
    leak_check.assert_clean()


def test_killing_the_idle_process_between_epochs(closing, leak_check):
    ds = Dataset.range(8).map(add_one).prefetch(2, process=True)
    closing(ds)
    assert ds.to_list() == list(range(1, 9))
    victim = ds.worker_pids[0]
    os.kill(victim, signal.SIGKILL)
    assert wait_gone([victim]) == []
    deadline = time.monotonic() + 10  # wholly dead: its other threads gone too
    while os.path.isdir(f"/proc/{victim}/task") and len(os.listdir(f"/proc/{victim}/task")) > 1:
        assert time.monotonic() < deadline, "the killed process's threads did not end"
        time.sleep(0.01)
    assert ds.to_list() == list(range(1, 9))  # the read-ahead is dropped, a new process used
    assert victim not in ds.worker_pids
    ds.close()
    leak_check.assert_clean()


def test_closing_the_dataset_under_a_running_iterator(closing):
    ds = Dataset.range(100).map(slow).prefetch(2, process=True)
    closing(ds)
    it = ds.iterator()
    next(it)
    pid = ds.worker_pids[0]
    ds.close()
    assert wait_gone([pid]) == []
    with pytest.raises(PipelineError,
                       match=r"the background process of stage 'prefetch\(2, process=True\)' "
                             r"is gone: shut down"):
        for _ in it:
            pass
    it.close()


# ---------------------------------------------------------------------------- nested workers
def tagged(x):
    return (x * 2, os.getpid())


def test_nested_worker_stages_run_in_the_background_process(closing, leak_check):
    ds = Dataset.range(50).map(tagged, num_workers=2).batch(5).prefetch(2, process=True)
    closing(ds)
    out = ds.to_list()
    assert [[v for v, _ in b] for b in out] == [[x * 2 for x in range(j, j + 5)]
                                                for j in range(0, 50, 5)]
    background = ds.worker_pids
    assert len(background) == 1
    nested = {pid for b in out for _, pid in b}
    assert len(nested) == 2 and not nested & {os.getpid(), background[0]}
    assert all(parent_of(p) == background[0] for p in nested)  # children of the process
    assert [[v for v, _ in b] for b in ds.to_list()] == [[v for v, _ in b] for b in out]
    assert ds.worker_pids == background  # kept across epochs
    ds.close()
    assert not ds.worker_pids
    assert wait_gone([*background, *nested]) == []
    leak_check.assert_clean()
    # a later iteration starts everything again
    assert [[v for v, _ in b] for b in ds.to_list()] == [[v for v, _ in b] for b in out]
    again = ds.worker_pids
    ds.close()
    assert wait_gone(again) == []
    leak_check.assert_clean()


def niceness(pid: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, pid)


def test_nice_lowers_the_priority_of_the_process_and_of_the_workers_it_starts(closing):
    ds = Dataset.range(20).map(tagged, num_workers=2).batch(5).prefetch(2, process=True, nice=7)
    closing(ds)
    it = ds.iterator()
    first = next(it)
    background = ds.worker_pids
    nested = {pid for _, pid in first} | {pid for b in it for _, pid in b}
    assert len(nested) == 2
    mine = niceness(os.getpid())
    assert niceness(background[0]) == min(19, mine + 7)
    assert all(niceness(pid) == min(19, mine + 7) for pid in nested)  # inherited
    assert niceness(os.getpid()) == mine  # the consumer's is unchanged
    plain = Dataset.range(4).prefetch(2, process=True)
    closing(plain)
    plain.to_list()
    assert niceness(plain.worker_pids[0]) == mine


def test_nested_workers_end_when_the_background_process_is_killed(closing, leak_check):
    ds = Dataset.range(40).map(tagged, num_workers=2).prefetch(2, process=True)
    closing(ds)
    it = ds.iterator()
    first = [next(it) for _ in range(3)]
    assert [v for v, _ in first] == [0, 2, 4]
    nested = {pid for _, pid in first}
    background = ds.worker_pids[0]
    os.kill(background, signal.SIGKILL)
    with pytest.raises(WorkerDiedError):
        for _ in it:
            pass
    it.close()
    assert wait_gone([background, *nested]) == []
    ds.close()
    leak_check.assert_clean()


# ---------------------------------------------------------------------------- lifecycle
def test_worker_pids_close_and_restart(leak_check):
    ds = Dataset.range(10).map(lambda x: (x, os.getpid())).prefetch(2, process=True)
    assert ds.worker_pids == []
    out = ds.to_list()
    pids = ds.worker_pids
    assert len(pids) == 1 and pids[0] != os.getpid()
    assert {pid for _, pid in out} == set(pids)  # the pipeline runs there
    assert {pid for _, pid in ds.to_list()} == set(pids)  # kept across epochs
    ds.close()
    assert ds.worker_pids == []
    assert wait_gone(pids) == []
    leak_check.assert_clean()
    out = ds.to_list()
    new = ds.worker_pids
    assert [x for x, _ in out] == list(range(10)) and len(new) == 1 and new != pids
    ds.close()
    leak_check.assert_clean()


def test_dropping_the_dataset_stops_its_process(leak_check):
    ds = Dataset.range(10).map(square).prefetch(2, process=True)
    assert ds.to_list()[-1] == 81
    pids = ds.worker_pids
    del ds
    assert wait_gone(pids) == []
    leak_check.assert_clean()


def test_dropping_a_dataset_never_iterated_to_its_end(leak_check):
    ds = Dataset.range(100).map(square).prefetch(2, process=True)
    it = ds.iterator()
    assert next(it) == 0
    it.close()
    del it, ds
    leak_check.assert_clean()


def test_an_iterator_outliving_its_dataset_keeps_working(leak_check):
    it = Dataset.range(30).map(square).prefetch(2, process=True).iterator()
    assert [next(it) for _ in range(3)] == [0, 1, 4]
    assert list(it)[-1] == 29 * 29
    it.close()
    leak_check.assert_clean()


def test_close_of_an_outer_pipeline_stops_the_process(leak_check):
    inner = Dataset.range(10).prefetch(2, process=True)
    outer = inner.map(add_one).batch(5)
    assert outer.to_list() == [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]]
    assert len(inner.worker_pids) == 1
    outer.close()
    assert inner.worker_pids == []
    leak_check.assert_clean()


# ---------------------------------------------------------------------------- arguments
@pytest.mark.parametrize(
    ("args", "kwargs", "exc", "match"),
    [
        ((0,), {"process": True}, ValueError, r"`buffer_size` must be a positive int, got 0"),
        ((-1,), {"process": True}, ValueError, r"`buffer_size` must be a positive int, got -1"),
        (("x",), {"process": True}, TypeError, r"`buffer_size` must be a positive int, got 'x'"),
        ((True,), {"process": True}, TypeError, r"`buffer_size`"),
        ((2.0,), {"process": True}, TypeError, r"`buffer_size`"),
        ((2,), {"process": "yes"}, TypeError, r"`process` must be a bool, got 'yes'"),
        ((2,), {"process": 1}, TypeError, r"`process` must be a bool"),
        ((2,), {"start_method": "fork"}, ValueError, r"need process=True"),
        ((2,), {"transport": "pipe"}, ValueError, r"need process=True"),
        ((2,), {"process": True, "start_method": "bogus"}, ValueError,
         r"`start_method` must be one of"),
        ((2,), {"process": True, "transport": "carrier pigeon"}, ValueError,
         r"`transport` must be one of"),
        ((2,), {"nice": 5}, ValueError, r"need process=True"),
        ((2,), {"timeout": 5}, ValueError, r"need process=True"),
        ((2,), {"process": True, "timeout": 0}, ValueError, r"`timeout`"),
        ((2,), {"process": True, "timeout": -1.5}, ValueError, r"`timeout`"),
        ((2,), {"process": True, "nice": 20}, ValueError, r"`nice` must be an int from 0 to 19, got 20"),
        ((2,), {"process": True, "nice": -1}, ValueError, r"`nice` must be an int from 0 to 19"),
        ((2,), {"process": True, "nice": 1.5}, TypeError, r"`nice` must be an int from 0 to 19"),
        ((2,), {"process": True, "nice": True}, TypeError, r"`nice` must be an int from 0 to 19"),
    ],
)
def test_bad_arguments(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        Dataset.range(3).prefetch(*args, **kwargs)


def test_a_parent_that_is_not_a_dataset():
    with pytest.raises(TypeError, match="`parent` must be a Dataset"):
        ProcessPrefetchDataset([1, 2], 2)


def test_with_parent_keeps_the_options_and_has_its_own_process(closing):
    ds = Dataset.range(3).prefetch(5, process=True, transport="pipe")
    other = ds.with_parent(Dataset.range(4))
    closing(ds)
    closing(other)
    assert (other.buffer_size, other.transport, other.start_method) == (
        5, "pipe", ds.start_method)
    assert other.to_list() == [0, 1, 2, 3] and ds.to_list() == [0, 1, 2]
    assert other.worker_pids != ds.worker_pids


# ---------------------------------------------------------------------------- transport / start
def test_pipe_transport(closing):
    ds = Dataset.range(23).map(sample).batch(4).prefetch(3, process=True, transport="pipe")
    closing(ds)
    assert ds.transport == "pipe"
    want = Dataset.range(23).map(sample).batch(4).to_list()
    for _ in range(2):
        assert [_norm(b) for b in ds.to_list()] == [_norm(b) for b in want]
    assert assert_resumes_everywhere(Dataset.range(9).prefetch(
        2, process=True, transport="pipe")) == list(range(9))


def test_spawn_start_method(closing):
    ds = Dataset.range(10).map(square).prefetch(2, process=True, start_method="spawn")
    closing(ds)
    assert ds.start_method == "spawn"
    assert ds.to_list() == [x * x for x in range(10)]
    it = ds.iterator()
    assert [next(it) for _ in range(3)] == [0, 1, 4]
    state = it.get_state()
    it.close()
    assert list(ds.iterator(state)) == [x * x for x in range(3, 10)]


# ---------------------------------------------------------------------------- DataProvider
def _train(data, *, prefetch, passes=2, batch_size=None):
    grab = Grab()
    provider = DataProvider(data, prefetch=prefetch, batch_size=batch_size)
    runner = Runner([CreateModel(linear_net()), LocalUpdater(), Counter(), provider, grab,
                     TrainOps()])
    pids = []
    with runner:
        for _ in range(passes):
            runner.run_one_pass()
            if provider.pipeline is not None and hasattr(provider.pipeline, "worker_pids"):
                pids.extend(provider.pipeline.worker_pids)
        params = {k: v.clone() for k, v in runner.context.module.state_dict().items()}
    return grab.batches, params, provider, pids


@pytest.mark.parametrize("prefetch", [0, 2])
def test_data_provider_feeds_the_same_batches_from_the_background_process(prefetch, leak_check):
    x, y = make_data(22)

    def data():
        return Dataset.from_arrays(x, y).shuffle(6, seed=3).batch(4)

    proc = data().prefetch(2, process=True)
    got, got_params, provider, pids = _train(proc, prefetch=prefetch)
    want, want_params, _, _ = _train(data().prefetch(2), prefetch=prefetch)
    # the feeding conversion ran in a stage of the provider's own, in the background process
    assert isinstance(provider.pipeline, ProcessPrefetchDataset)
    assert provider.pipeline is not proc and provider.pipeline._parents[0].name == "feed"
    assert pids and len(set(pids)) == 1
    assert proc.worker_pids == []  # the user's stage was never started
    assert len(got) == len(want) == 12  # 2 passes of 6 batches
    for g, w in zip(got, want):
        assert sorted(g) == sorted(w) and all(torch.equal(g[k], w[k]) for k in w)
    assert got[0]["x"].dtype == torch.float32 and got[0]["label"].dtype == torch.int64
    for k, v in want_params.items():
        assert torch.equal(got_params[k], v), k
    # finalize (the end of `with runner:`) stopped the background process
    assert provider.pipeline.worker_pids == []
    assert wait_gone(pids) == []
    leak_check.assert_clean()


def test_data_provider_batching_samples_before_a_process_stage(leak_check):
    x, y = make_data(13)
    samples = Dataset.from_arrays(x, y).prefetch(3, process=True)
    got, _, provider, pids = _train(samples, prefetch=2, batch_size=4)
    want, _, _, _ = _train(Dataset.from_arrays(x, y), prefetch=0, batch_size=4)
    assert len(got) == len(want) == 8
    for g, w in zip(got, want):
        assert all(torch.equal(g[k], w[k]) for k in w)
    samples.close()
    leak_check.assert_clean()


def test_data_provider_mid_pass_checkpoint_and_resume(tmp_path, leak_check):
    from feedline.train.items import Checkpointer

    x, y = make_data(20)

    def data():
        return (Dataset.from_arrays(x, y).global_shuffle(seed=1).shuffle(6, seed=2)
                .map(lambda s: (s[0] * 2, s[1])).batch(5).prefetch(2, process=True))

    def job(*, checkpointer=None, crash_at=None, prefetch=0):
        grab = Grab()
        items = [CreateModel(linear_net()), LocalUpdater()]
        if checkpointer is not None:
            items.append(checkpointer)
        items += [Counter(), DataProvider(data(), prefetch=prefetch), grab]
        if crash_at is not None:
            items.append(CrashAt(crash_at))
        items.append(TrainOps())
        return Runner(items), grab

    reference, ref_grab = job()
    with reference:
        reference.run(3)
        ref_params = {k: v.clone() for k, v in reference.context.module.state_dict().items()}
    assert len(ref_grab.batches) == 12  # 3 passes of 4 batches

    for prefetch in (0, 2):
        where = tmp_path / f"p{prefetch}"
        crashing, _ = job(checkpointer=Checkpointer(where, every_n_batches=3, keep=None),
                          crash_at=7, prefetch=prefetch)
        with pytest.raises(Crash):
            with crashing:
                crashing.run(3)
        resumed, grab = job(checkpointer=Checkpointer(where, every_n_batches=3,
                                                      resume="latest"), prefetch=prefetch)
        with resumed:
            ctx = resumed.context
            assert (ctx.pass_id, ctx.batch_id, ctx.global_step) == (1, 2, 6)
            assert resumed.run(3) == 2
            params = {k: v.clone() for k, v in resumed.context.module.state_dict().items()}
        assert len(grab.batches) == 6
        for g, w in zip(grab.batches, ref_grab.batches[6:]):
            assert all(torch.equal(g[k], w[k]) for k in w)
        for k, v in ref_params.items():
            assert torch.equal(params[k], v), (prefetch, k)
    leak_check.assert_clean()


# ---------------------------------------------------------------------------- WorkerPool
def ident(x):
    return x


class EndingSource:
    """A source of ``n`` items ``(offset, pos)``; ``_configure(offset)`` sets the offset."""

    def __init__(self, n):
        self.n = n
        self.offset = 0

    def _configure(self, payload):
        self.offset = payload

    def _getitem(self, pos):
        if pos >= self.n:
            raise EndOfInput
        return (self.offset, pos)


def _collect_all(pool, worker=0, timeout=10):
    """``worker``'s oldest reply (``ready`` may wake for another worker's reply first)."""
    deadline = time.monotonic() + timeout
    while worker not in pool.ready([worker], max(0.0, deadline - time.monotonic())):
        assert time.monotonic() < deadline, f"no reply from worker {worker}"
    positions, entries, _, _ = pool.collect(worker)
    return positions, entries


@pytest.mark.parametrize("transport", ["shm", "pipe"])
def test_worker_pool_end_of_input_entries(transport):
    pool = WorkerPool(ident, EndingSource(3), workers=1, stage="unit", transport=transport)
    try:
        gen = pool.new_generation()
        pool.submit(0, gen, 0, [1, 2, 3, 4], None)
        positions, entries = _collect_all(pool)
        assert positions == [1, 2, 3, 4]
        assert entries == [(OK, (0, 1)), (OK, (0, 2)), (END, None), (END, None)]
        assert pool.alive()
    finally:
        pool.shutdown()


def test_worker_pool_configure_reaches_the_source():
    pool = WorkerPool(ident, EndingSource(10), workers=2, stage="unit", depth=2)
    try:
        assert pool.depth == (2 if pool.transport == "shm" else 1)
        gen = pool.new_generation()
        pool.configure(0, 7)
        pool.configure(1, 9)
        pool.submit(0, gen, 0, [0, 1], None)
        pool.submit(1, gen, 0, [2], None)
        assert _collect_all(pool, 0)[1] == [(OK, (7, 0)), (OK, (7, 1))]
        assert _collect_all(pool, 1)[1] == [(OK, (9, 2))]
        pool.configure(0, 11)  # applies before the next task only
        pool.submit(0, gen, 0, [5], None)
        assert _collect_all(pool, 0)[1] == [(OK, (11, 5))]
    finally:
        pool.shutdown()


def test_worker_pool_depth_bounds_outstanding_chunks():
    pool = WorkerPool(ident, EndingSource(10), workers=1, stage="unit", depth=5, transport="shm")
    try:
        assert pool.depth == 5
        gen = pool.new_generation()
        for p in range(5):
            pool.submit(0, gen, 0, [p], None)
        with pytest.raises(PipelineError, match="already has 5 chunks outstanding"):
            pool.submit(0, gen, 0, [5], None)
        assert pool.drain(10)
    finally:
        pool.shutdown()


def _in_child(check) -> int:
    """Run ``check()`` in a forked child; its exit code (0: it returned True)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 3
        try:
            code = 0 if check() else 1
        except BaseException:  # noqa: BLE001
            code = 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_pool_inherited_through_fork_is_not_alive_and_not_shut_down_there():
    pool = WorkerPool(ident, EndingSource(10), workers=2, stage="unit")
    try:
        pids = list(pool.pids)
        assert pool.alive()

        def child():
            if pool.alive():
                return False
            pool.shutdown()
            return True

        assert _in_child(child) == 0
        assert all(process_alive(p) for p in pids)
        assert pool.alive() and pool.broken is None
        gen = pool.new_generation()
        pool.submit(0, gen, 0, [0, 1], None)
        pool.submit(1, gen, 0, [2], None)
        assert _collect_all(pool, 0)[1] == [(OK, (0, 0)), (OK, (0, 1))]
        assert _collect_all(pool, 1)[1] == [(OK, (0, 2))]
    finally:
        pool.shutdown()
    assert wait_gone(pids) == []


def test_a_dataset_inherited_through_fork_runs_its_own_process_there(closing):
    """A forked child (a DataLoader worker, say) iterating a dataset whose process it
    inherited gets a process of its own, and leaves the parent's alone: the parent's
    next epoch (adopting what its process read ahead) still completes."""
    ds = Dataset.range(12).map(square).prefetch(2, process=True)
    closing(ds)
    want = [x * x for x in range(12)]
    assert ds.to_list() == want  # the parent's process now reads epoch 1 ahead
    pid = ds.worker_pids[0]

    def child():
        ok = ds.to_list() == want
        mine = ds.worker_pids
        ok = ok and mine != [pid] and len(mine) == 1
        ds.close()
        return ok and ds.worker_pids == []

    assert _in_child(child) == 0
    assert process_alive(pid) and ds.worker_pids == [pid]
    result = {}

    def parent_epoch():
        try:
            result["items"] = ds.to_list()
        except BaseException as exc:  # noqa: BLE001 - reported below
            result["error"] = exc

    reader = threading.Thread(target=parent_epoch, daemon=True)
    reader.start()
    reader.join(5.0)
    hung = reader.is_alive()
    if hung:
        ds.close()  # makes the hung iteration fail, so the thread ends
        reader.join(10.0)
    assert not hung, ("the parent's next iteration hangs after a forked child iterated "
                      "the dataset it inherited")
    assert result == {"items": want}


# ---------------------------------------------------------------------------- timeout
def stuck_at_six(x):
    if x == 6:
        time.sleep(30)
    return x


def test_an_item_stuck_longer_than_the_timeout_raises_and_the_process_is_replaced(closing):
    from feedline.exceptions import StageTimeoutError

    ds = Dataset.range(10).map(stuck_at_six).prefetch(2, process=True, timeout=0.5)
    closing(ds)
    it = ds.iterator()
    got = [next(it) for _ in range(6)]
    assert got == [0, 1, 2, 3, 4, 5]
    started = time.monotonic()
    with pytest.raises(StageTimeoutError) as info:
        next(it)
    assert time.monotonic() - started < 10  # the timeout, not the 30 s sleep
    err = info.value
    assert (err.stage, err.index, err.timeout) == ("prefetch(2, process=True)", 6, 0.5)
    assert "prefetch(2, process=True): element 6 not done after 0.5 s" in str(err)
    with pytest.raises(StopIteration):
        next(it)
    first = ds.worker_pids
    assert first == []  # the stuck process was terminated, not kept
    ok = Dataset.range(5).prefetch(2, process=True, timeout=0.5)
    closing(ok)
    assert ok.to_list() == [0, 1, 2, 3, 4]


def test_time_spent_waiting_for_the_consumer_does_not_count(closing):
    ds = Dataset.range(6).prefetch(2, process=True, timeout=0.3)
    closing(ds)
    out = []
    for x in ds:
        out.append(x)
        time.sleep(0.5)  # the process is idle, its buffer full, longer than the timeout
    assert out == list(range(6))


# ---------------------------------------------------------------------------- inside a daemon
@pytest.mark.parametrize("make", [
    lambda: Dataset.range(6).map(abs, num_workers=1),
    lambda: Dataset.range(6).prefetch(2, process=True),
], ids=["map-workers", "process-prefetch"])
def test_a_worker_stage_inside_a_dataloader_worker_is_a_clear_error(make, closing):
    from torch.utils.data import DataLoader

    ds = make()
    closing(ds)
    loader = DataLoader(ds.as_torch(), batch_size=None, num_workers=1)
    with pytest.raises(PipelineError) as info:
        list(loader)
    message = str(info.value)
    assert f"stage {ds.name!r} cannot start worker processes" in message
    assert "daemonic worker" in message and "num_workers=0" in message
