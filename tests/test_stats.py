"""Pipeline statistics: per-stage numbers, the bottleneck line, forwarding, TensorBoard."""

from __future__ import annotations

import json
import time

import pytest

from feedline import Dataset
from feedline.exceptions import StateError
from feedline.runtime.stats import PipelineStats, StatsReport


def slow(x):
    time.sleep(0.02)
    return x


def stream(n):
    return Dataset.from_reader(lambda: iter(range(n)), deterministic=True)


def run(ds, *, pause: float = 0.0) -> StatsReport:
    it = ds.iterator(stats=True)
    for _ in it:
        if pause:
            time.sleep(pause)
    report = it.stats()
    it.close()
    return report


def test_numbers_per_stage():
    report = run(stream(12).map(lambda x: x + 1).filter(lambda x: x % 2 == 0).batch(2))
    names = [s.name for s in report.stages]
    assert names[:2] == ["reader(<lambda>)", "map(<lambda>)"] and names[3] == "batch(2)"
    assert names[2].lower().startswith("filter")
    assert [s.position for s in report.stages] == [0, 1, 2, 3]
    assert [s.items for s in report.stages] == [12, 12, 6, 3]
    for s in report.stages:
        assert 0 <= s.self_s <= s.total_s + 1e-9
        assert s.wait_s == 0 and s.fill is None and s.workers is None
        assert s.items_per_s > 0
    outer, inner = report.stages[3], report.stages[2]
    assert inner.total_s <= outer.total_s  # inputs' time is inside their consumers'


def test_bottleneck_names_the_slow_in_thread_stage():
    report = run(stream(15).map(lambda x: x * 2).map(slow, name="map(slow)").batch(5))
    assert report.bottleneck.startswith("compute-bound: map(slow) runs in the consumer's thread")
    assert "num_workers=N" in report.bottleneck
    assert max(report.stages, key=lambda s: s.self_s).name == "map(slow)"


def test_bottleneck_names_the_saturated_worker_stage():
    ds = Dataset.range(30).map(slow, num_workers=2, name="map(decode)").batch(5)
    try:
        report = run(ds)
    finally:
        ds._parents[0].close()
    line = report.bottleneck
    assert line.startswith("compute-bound: map(decode) with 2 worker(s) is saturated"), line
    assert "add workers" in line
    stage = report.stages[0]
    assert stage.workers == 2 and stage.worker_s >= 30 * 0.02 * 0.9
    assert stage.wait_s > 0 and stage.fill is not None
    low, mean, high = stage.fill
    assert 0.0 <= low <= mean <= high <= 1.0


def test_bottleneck_names_a_slow_source():
    def reader():
        for i in range(15):
            time.sleep(0.02)
            yield i

    report = run(Dataset.from_reader(reader).map(lambda x: x).batch(3))
    assert report.bottleneck.startswith("source-bound: reader(reader)"), report.bottleneck


def test_consumer_bound_when_the_training_step_is_slow():
    report = run(Dataset.range(10).map(lambda x: x), pause=0.02)
    assert report.bottleneck.startswith("consumer-bound:"), report.bottleneck
    assert "the pipeline is not the bottleneck" in report.bottleneck


def test_report_renders_and_serialises():
    ds = stream(8).map(slow, name="map(slow)").batch(4)
    report = run(ds)
    text = str(report)
    assert "map(slow)" in text and "batch(4)" in text and "fill min/mean/max" in text
    assert text.splitlines()[-1] == f"bottleneck: {report.bottleneck}"
    data = json.loads(json.dumps(report.to_dict()))
    assert [s["name"] for s in data["stages"]] == ["reader(<lambda>)", "map(slow)", "batch(4)"]
    assert data["bottleneck"] == report.bottleneck and data["wall_s"] > 0
    assert set(data["stages"][0]) >= {"items", "total_s", "self_s", "wait_s", "fill",
                                      "items_per_s", "workers", "worker_s"}


def test_tensorboard_scalars():
    class Writer:
        def __init__(self):
            self.scalars = []

        def add_scalar(self, tag, value, step):
            self.scalars.append((tag, value, step))

    ds = Dataset.range(6).map(lambda x: x, num_workers=1)
    try:
        report = run(ds)
    finally:
        ds.close()
    writer = Writer()
    report.to_tensorboard(writer, step=3)
    tags = {tag for tag, _, step in writer.scalars if step == 3}
    assert "feedline/0_map(<lambda>)/items_per_s" in tags
    assert "feedline/0_map(<lambda>)/buffer_fill" in tags


def test_wrapped_iterators_forward_state_and_buffer_fill():
    ds = stream(10).map(lambda x: x * 3).batch(3)
    it = ds.iterator(stats=True)
    next(it)
    state = it.get_state()
    it.close()
    resumed = ds.iterator(state, stats=True)
    assert list(resumed) == [[9, 12, 15], [18, 21, 24], [27]]
    assert resumed.stats().stages[-1].items == 3

    pm = Dataset.range(5).map(lambda x: x, num_workers=1)
    try:
        stats = PipelineStats()
        wrapped = stats.wrap(pm, pm._make_iterator(__import__(
            "feedline.dataset.base", fromlist=["BuildContext"]).BuildContext()))
        assert 0.0 <= wrapped.buffer_fill() <= 1.0
        assert list(wrapped) == [0, 1, 2, 3, 4]
        assert wrapped.worker_count == 1  # other attributes are forwarded too
        wrapped.close()
    finally:
        pm.close()


def test_stats_only_when_asked():
    it = Dataset.range(3).iterator()
    with pytest.raises(StateError, match="statistics were not collected"):
        it.stats()


def test_empty_report():
    report = PipelineStats().report()
    assert report.stages == [] and report.bottleneck.startswith("no items yet")


def test_a_consumer_waiting_on_a_slow_prefetched_source_is_not_called_consumer_bound():
    import time

    from feedline import Dataset

    def slow_file(base):
        def read():
            for i in range(20):
                time.sleep(0.002)
                yield base + i

        return Dataset.from_reader(read)

    ds = Dataset.from_iterable([0, 100]).interleave(slow_file, cycle_length=2).batch(5).prefetch(2)
    it = ds.iterator(stats=True)
    assert len(list(it)) == 8
    report = it.stats()
    assert not report.bottleneck.startswith("consumer-bound"), report.bottleneck
    assert "reader(read)" in report.bottleneck


def test_report_during_the_first_call_of_a_stage():
    # a report taken while a stage is still in its first call (no call has ended yet)
    # counts it as stalled instead of failing on the missing end time
    ticks = iter(range(100))
    stats = PipelineStats(clock=lambda: float(next(ticks)))
    seen = []

    class Probe:
        def __iter__(self):
            return self

        def __next__(self):
            seen.append(stats.report())
            return 1

    node = object()
    stats.mark_root(node)
    it = stats.wrap(node, Probe())
    assert next(it) == 1
    during = seen[0].stages[0]
    assert during.items == 0 and during.items_per_s == 0.0 and during.stalled_s == 1.0
    after = stats.report().stages[0]
    assert after.items == 1
