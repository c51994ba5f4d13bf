"""``map(..., timeout=)``: a hung mapper raises StageTimeoutError naming the stage and the
element instead of blocking forever; ``stats()`` shows the stage that makes no progress."""

from __future__ import annotations

import threading
import time

import pytest

from feedline import Dataset
from feedline.dataset.options import ExecutionOptions
from feedline.exceptions import StageTimeoutError

RELEASE = threading.Event()


def hang_on_five(x):
    if x == 5:
        time.sleep(3600)
    return x * 10


def hang_on_five_thread(x):
    if x == 5:
        RELEASE.wait(60)
    return x * 10


@pytest.mark.parametrize("ordered", [True, False])
def test_process_map_timeout_names_stage_and_element(ordered):
    # buffer_size=2: one item per chunk, so the items before 5 never share a chunk with it
    # (a chunk's results come back together: those queued with a hung item cannot), and
    # how fast the first reply arrives cannot change what is yielded before the timeout
    ds = Dataset.range(12).map(hang_on_five, num_workers=2, ordered=ordered,
                               execution=ExecutionOptions(timeout=0.5, buffer_size=2))
    got = []
    with pytest.raises(StageTimeoutError, match=r"map\(hang_on_five\): element 5 not done after 0\.5 s") as info:
        for x in ds:
            got.append(x)
    assert info.value.stage == "map(hang_on_five)" and info.value.index == 5
    assert isinstance(info.value, TimeoutError)
    if ordered:
        assert got == [0, 10, 20, 30, 40]
    else:
        assert 5 * 10 not in got and set(got) <= {x * 10 for x in range(12)}
    pids = ds.worker_pids
    assert pids == []  # the stuck worker was terminated with its pool
    # the next iteration starts fresh workers and meets the same element again
    with pytest.raises(StageTimeoutError, match="element 5"):
        ds.to_list()
    ds.close()


def test_process_map_timeout_over_a_stream():
    ds = Dataset.from_reader(lambda: iter(range(8))).map(hang_on_five, num_workers=2, execution=ExecutionOptions(timeout=0.5))
    with pytest.raises(StageTimeoutError, match="element 5"):
        ds.to_list()
    ds.close()


def test_slow_but_in_time_elements_pass():
    ds = Dataset.range(6).map(abs, num_workers=2, execution=ExecutionOptions(timeout=30))
    assert ds.to_list() == list(range(6))
    ds.close()


@pytest.mark.parametrize("ordered", [True, False])
def test_thread_map_timeout(ordered):
    RELEASE.clear()
    ds = Dataset.range(10).map(hang_on_five_thread, num_workers=2, backend="thread", execution=ExecutionOptions(timeout=0.3),
                               ordered=ordered)
    it = iter(ds)
    with pytest.raises(StageTimeoutError, match=r"map\(hang_on_five_thread\) \[2 threads\]: element 5"):
        for _ in it:
            pass
    it.close()  # returns at once although the call at element 5 is still running
    RELEASE.set()


def test_timeout_validated():
    with pytest.raises(ValueError, match="`timeout` must be a positive number of seconds or None, got 0"):
        Dataset.range(3).map(abs, num_workers=2, execution=ExecutionOptions(timeout=0))
    with pytest.raises(ValueError, match="`timeout` needs `num_workers` > 0"):
        Dataset.range(3).map(abs, execution=ExecutionOptions(timeout=1))


def test_stats_reports_a_stalled_stage():
    RELEASE.clear()
    ds = Dataset.range(10).map(hang_on_five_thread, num_workers=1, backend="thread", execution=ExecutionOptions(buffer_size=1))
    it = ds.iterator(stats=True)
    out = []
    t = threading.Thread(target=lambda: out.extend(it))
    t.start()
    try:
        deadline = time.monotonic() + 30
        while len(out) < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(1.3)
        report = it.stats()
        stage = [s for s in report.stages if s.name.startswith("map(")][0]
        assert stage.stalled_s > 1.0
        assert report.bottleneck.startswith("stalled: map(hang_on_five_thread) [1 threads] has produced nothing for")
        assert "timeout=" in report.bottleneck
    finally:
        RELEASE.set()
        t.join(30)
    report = it.stats()
    assert all(s.stalled_s == 0.0 for s in report.stages)
    assert out == [x * 10 for x in range(10)]
