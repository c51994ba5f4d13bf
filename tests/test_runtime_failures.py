"""Failure handling of worker processes: errors, dead workers, clean shutdown, no leaks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from feedline import Dataset
from feedline.dataset.parallel_map import ParallelMapDataset
from feedline.exceptions import (
    PipelineError,
    RemoteTraceback,
    SharedMemoryError,
    WorkerDiedError,
    WorkerError,
)
from feedline.runtime import shm as shm_mod
from process_helpers import BadRecord, fail_on_five, wait_gone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def slow(x):
    time.sleep(0.05)
    return x


# ---------------------------------------------------------------------------- exceptions
@pytest.mark.parametrize("ordered", [True, False])
def test_mapper_exception_keeps_its_type_and_worker_traceback(ordered, leak_check):
    ds = Dataset.range(20).map(fail_on_five, num_workers=2, ordered=ordered)
    it = ds.iterator()
    got = []
    with pytest.raises(BadRecord, match="record 5 is bad") as info:
        for x in it:
            got.append(x)
    if ordered:
        assert got == [0, 1, 2, 3, 4]  # the error comes at the item's place
    cause = info.value.__cause__
    assert isinstance(cause, RemoteTraceback)
    assert "fail_on_five" in cause.tb and 'raise BadRecord(f"record {x} is bad")' in cause.tb
    if sys.version_info >= (3, 11):
        note = info.value.__notes__[-1]
        assert "stage 'map(fail_on_five)'" in note and "item 5" in note
        if ordered:  # item i goes to worker i % 2
            assert "worker 1 (pid" in note
    with pytest.raises(StopIteration):  # the iteration is over
        next(it)
    it.close()
    if ordered:
        assert ds.take(5).to_list() == [0, 1, 2, 3, 4]  # the dataset is still usable
    ds.close()
    leak_check.assert_clean()


def test_unpicklable_exception_becomes_worker_error(leak_check):
    class Local(Exception):  # defined in a function: cannot be pickled by reference
        pass

    def boom(x):
        raise Local("local failure")

    ds = Dataset.range(3).map(boom, num_workers=1)
    with pytest.raises(WorkerError, match=r"Local: local failure") as info:
        ds.to_list()
    assert "boom" in info.value.__cause__.tb
    ds.close()
    leak_check.assert_clean()


def test_error_reading_a_random_access_input_names_the_phase():
    class Flaky:
        def __len__(self):
            return 4

        def __getitem__(self, i):
            if i == 2:
                raise KeyError("missing record 2")
            return i

    ds = Dataset.from_random_access(Flaky()).map(lambda x: x, num_workers=2)
    with pytest.raises(KeyError, match="missing record 2") as info:
        ds.to_list()
    if sys.version_info >= (3, 11):
        assert "while reading item 2" in info.value.__notes__[-1]
    ds.close()


def test_error_in_a_stream_input_comes_in_order():
    def reader():
        yield from range(4)
        raise OSError("disk went away")

    ds = Dataset.from_reader(reader).map(lambda x: x * 10, num_workers=2)
    got = []
    with pytest.raises(OSError, match="disk went away"):
        for x in ds:
            got.append(x)
    assert got == [0, 10, 20, 30]
    ds.close()


def test_result_that_cannot_be_sent_back():
    ds = Dataset.range(3).map(lambda x: (lambda: x), num_workers=1)
    with pytest.raises(TypeError, match="cannot be sent back from the worker process") as info:
        ds.to_list()
    if sys.version_info >= (3, 11):
        assert "while sending the result of item 0" in info.value.__notes__[-1]
    ds.close()


def test_item_that_cannot_be_sent_to_a_worker():
    items = [1, 2, threading.Lock()]
    ds = Dataset.from_reader(lambda: iter(items)).map(str, num_workers=1)
    with pytest.raises(TypeError, match="pickle") as info:
        ds.to_list()
    if sys.version_info >= (3, 11):
        assert "items must be picklable" in info.value.__notes__[-1]
    ds.close()


def test_result_too_large_for_shared_memory_is_a_clear_error(monkeypatch, leak_check):
    real = shm_mod._reserve

    def small_shm(fd, size):
        if size > (4 << 20):
            raise SharedMemoryError(f"/dev/shm is full: a shared-memory block of {size} bytes does not fit")
        real(fd, size)

    monkeypatch.setattr(shm_mod, "_reserve", small_shm)  # inherited by the forked workers
    ds = Dataset.range(4).map(lambda i: np.zeros(2_000_000, np.float32) + i, num_workers=1)
    with pytest.raises(SharedMemoryError, match="/dev/shm is full"):
        ds.to_list()
    ds.close()
    leak_check.assert_clean()


# ---------------------------------------------------------------------------- dead workers
def test_sigkill_of_a_worker_mid_epoch_raises_within_seconds(leak_check):
    ds = Dataset.range(200).map(slow, num_workers=2)
    it = ds.iterator()
    assert [next(it) for _ in range(3)] == [0, 1, 2]
    victim = ds.worker_pids[1]
    os.kill(victim, signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(WorkerDiedError) as info:
        for _ in it:
            pass
    assert time.monotonic() - start < 10  # a hang guard, not a timing assertion
    message = str(info.value)
    assert f"worker 1 (pid {victim})" in message
    assert "signal 9 (SIGKILL)" in message and "out-of-memory killer" in message
    it.close()
    # the next iteration starts fresh workers
    assert ds.take(3).to_list() == [0, 1, 2]
    assert victim not in ds.worker_pids
    ds.close()
    leak_check.assert_clean()


def test_worker_killed_while_idle_is_replaced_on_the_next_iteration(leak_check):
    ds = Dataset.range(6).map(lambda x: x + 1, num_workers=2)
    assert ds.to_list() == [1, 2, 3, 4, 5, 6]
    victim = ds.worker_pids[0]
    os.kill(victim, signal.SIGKILL)
    # wait until it is wholly dead: its main thread turns zombie at once, but the process
    # can be reaped (and so be seen dead) only once its other threads are gone too
    assert wait_gone([victim]) == []
    deadline = time.monotonic() + 10
    while os.path.isdir(f"/proc/{victim}/task") and len(os.listdir(f"/proc/{victim}/task")) > 1:
        assert time.monotonic() < deadline, "the killed worker's threads did not end"
        time.sleep(0.01)
    assert ds.to_list() == [1, 2, 3, 4, 5, 6]
    ds.close()
    leak_check.assert_clean()


def test_worker_calling_exit_is_reported():
    def leave(x):
        os._exit(3)

    ds = Dataset.range(4).map(leave, num_workers=1)
    with pytest.raises(WorkerDiedError, match="exited with code 3"):
        ds.to_list()
    ds.close()


def test_closing_the_dataset_under_a_running_iterator():
    ds = Dataset.range(100).map(slow, num_workers=2)
    it = ds.iterator()
    next(it)
    ds.close()
    with pytest.raises(PipelineError, match="are gone"):
        for _ in it:
            pass
    it.close()


# ---------------------------------------------------------------------------- no leaks
def test_normal_end_leaves_nothing(leak_check):
    ds = Dataset.range(30).map(lambda i: np.ones(100_000) * i, num_workers=2)
    assert len(ds.to_list()) == 30
    ds.close()
    leak_check.assert_clean()


def test_break_early_leaves_nothing(leak_check):
    ds = Dataset.range(1000).map(lambda i: np.ones(100_000) * i, num_workers=2)
    for i, _ in enumerate(ds):
        if i == 3:
            break
    ds.close()
    leak_check.assert_clean()


def test_close_mid_iteration_cancels_queued_work(tmp_path, leak_check):
    log = tmp_path / "calls"

    def cheap_then_slow(x):
        if x >= 20:  # the first items are cheap, so big chunks get queued in the workers
            time.sleep(0.002)
            with open(log, "a") as f:
                f.write(".")
        return x

    ds = Dataset.range(2000).map(cheap_then_slow, num_workers=2)
    it = ds.iterator()
    assert [next(it) for _ in range(25)] == list(range(25))
    it.close()  # hands the workers back; queued items are skipped, not computed
    pool = ds._holder._idle
    assert pool is not None and pool.drain(timeout=10)
    assert len(log.read_text()) < 1000  # of 1980 queued or pending slow items
    assert ds.take(2).to_list() == [0, 1]
    ds.close()
    leak_check.assert_clean()


def test_exception_in_the_consumer_leaves_nothing(leak_check):
    ds = Dataset.range(100).map(slow, num_workers=2)
    with pytest.raises(ZeroDivisionError):
        for x in ds:
            if x == 2:
                1 / 0  # noqa: B018 - the training step fails
    ds.close()
    leak_check.assert_clean()


def test_ctrl_c_while_waiting_for_workers(leak_check):
    # Python's own Ctrl-C handler, whatever this process inherited: a job a shell starts in
    # the background (`cmd &`) begins with SIGINT ignored, and then no Ctrl-C is delivered
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _ctrl_c_while_waiting_for_workers(leak_check)
    finally:
        signal.signal(signal.SIGINT, previous)


def _ctrl_c_while_waiting_for_workers(leak_check):
    def very_slow(x):
        time.sleep(30)  # the first item cannot come back before the Ctrl-C
        return x

    ds = Dataset.range(10).map(very_slow, num_workers=2)
    it = ds.iterator()
    # delivered to the main thread, which is the one waiting for the workers
    timer = threading.Timer(
        0.2, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT)
    )
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        next(it)
    timer.join()
    it.close()
    ds.close()
    leak_check.assert_clean()


def test_ctrl_c_during_an_iteration_does_not_kill_workers_mid_item():
    ds = Dataset.range(4).map(slow, num_workers=2)
    assert ds.to_list() == [0, 1, 2, 3]
    for pid in ds.worker_pids:
        os.kill(pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole process group
    time.sleep(0.1)
    assert ds.to_list() == [0, 1, 2, 3]
    ds.close()


def _run_script(body: str, timeout: float = 60) -> subprocess.Popen:
    code = textwrap.dedent(body)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"))
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def test_interpreter_exit_without_close_leaves_no_process():
    proc = _run_script("""
        from feedline import Dataset
        ds = Dataset.range(1000).map(lambda x: x, num_workers=2)
        it = iter(ds)
        next(it)
        print(*ds.worker_pids, flush=True)
        # exit with the iterator and its workers still running
    """)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    pids = [int(p) for p in out.split()]
    assert len(pids) == 2
    assert wait_gone(pids) == []
    assert not [n for n in os.listdir("/dev/shm") if n.startswith(f"feedline-{proc.pid}-")]


def test_workers_exit_when_the_consumer_is_killed():
    proc = _run_script("""
        import time
        from feedline import Dataset
        ds = Dataset.range(10**6).map(lambda x: x, num_workers=2)
        it = iter(ds)
        next(it)
        print(*ds.worker_pids, flush=True)
        time.sleep(60)
    """)
    line = proc.stdout.readline()
    pids = [int(p) for p in line.split()]
    assert len(pids) == 2, proc.stderr.read() if proc.poll() is not None else line
    proc.kill()
    proc.wait(timeout=10)
    assert wait_gone(pids) == []  # they notice within a second or two
    assert not [n for n in os.listdir("/dev/shm") if n.startswith(f"feedline-{proc.pid}-")]


def test_shared_memory_never_shows_up_in_dev_shm():
    before = {n for n in os.listdir("/dev/shm") if n.startswith("feedline")}
    ds = Dataset.range(20).map(lambda i: np.ones(200_000) * i, num_workers=2)
    it = iter(ds)
    next(it)
    during = {n for n in os.listdir("/dev/shm") if n.startswith("feedline")}
    assert during == before  # blocks are unlinked as soon as they are created
    it.close()
    ds.close()


def test_pipe_transport_leaves_nothing(leak_check):
    ds = ParallelMapDataset(Dataset.range(50), lambda i: np.ones(50_000) * i, workers=2,
                            transport="pipe")
    for i, _ in enumerate(ds):
        if i == 5:
            break
    ds.close()
    leak_check.assert_clean()
