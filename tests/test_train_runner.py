"""The Runner/RunnerItem chain: order, "no more data" semantics, lifecycle, state."""

from __future__ import annotations

import pytest

from feedline.exceptions import CheckpointError
from feedline.train import Runner, RunnerContext, RunnerItem
from feedline.train.items import Counter


class Recorder(RunnerItem):
    """Logs (name, hook, "in"/"out") around next_callback; serves `batches` batches."""

    def __init__(self, name: str, log: list, *, batches: int | None = None,
                 stop_begin_at: int | None = None, stop_end_at: int | None = None,
                 cut: set | None = None) -> None:
        self.name = name
        self.log = log
        self.batches = batches
        self.stop_begin_at = stop_begin_at
        self.stop_end_at = stop_end_at
        self.cut = cut or set()
        self.seen = 0

    def initialize(self, context, next_callback):
        self.log.append((self.name, "initialize", "in"))
        assert self.context is context
        next_callback(context)
        self.log.append((self.name, "initialize", "out"))

    def finalize(self, next_callback):
        self.log.append((self.name, "finalize", "in"))
        next_callback()
        self.log.append((self.name, "finalize", "out"))

    def on_pass_begin(self, next_callback):
        self.log.append((self.name, "pass_begin", "in"))
        self.seen = 0
        next_callback()
        self.log.append((self.name, "pass_begin", "out"))

    def on_pass_end(self, next_callback):
        self.log.append((self.name, "pass_end", "in"))
        next_callback()
        self.log.append((self.name, "pass_end", "out"))

    def on_batch_begin(self, next_callback):
        self.log.append((self.name, "batch_begin", "in"))
        if self.batches is not None and self.seen >= self.batches:
            return True
        if self.stop_begin_at is not None and self.seen == self.stop_begin_at:
            return True
        if "batch_begin" in self.cut:
            return False
        stop = next_callback()
        self.log.append((self.name, "batch_begin", "out"))
        return stop

    def on_batch_end(self, next_callback):
        self.log.append((self.name, "batch_end", "in"))
        stop = next_callback()
        self.seen += 1
        self.log.append((self.name, "batch_end", "out"))
        if self.stop_end_at is not None and self.seen == self.stop_end_at:
            return True
        return stop


def hooks(log, hook):
    return [(n, d) for n, h, d in log if h == hook]


def test_first_item_is_outermost_for_every_hook():
    log: list = []
    runner = Runner([Recorder("a", log, batches=1), Recorder("b", log), Recorder("c", log)])
    with runner:
        assert runner.run_one_pass() == 1
    nested = [("a", "in"), ("b", "in"), ("c", "in"), ("c", "out"), ("b", "out"), ("a", "out")]
    for hook in ("initialize", "pass_begin", "batch_end", "pass_end", "finalize"):
        assert hooks(log, hook) == nested, hook
    # the second batch_begin of `a` returns "no more data" without calling the others
    assert hooks(log, "batch_begin") == nested + [("a", "in")]


def test_no_more_data_from_batch_begin_skips_batch_end_and_ends_the_pass():
    log: list = []
    runner = Runner([Recorder("data", log, batches=3), Recorder("ops", log)])
    with runner:
        assert runner.run_one_pass() == 3
        assert runner.run_one_pass() == 3
    assert len([1 for n, h, d in log if (n, h, d) == ("ops", "batch_end", "in")]) == 6
    assert len([1 for n, h, d in log if (n, h, d) == ("ops", "pass_end", "in")]) == 2


def test_inner_item_stops_the_pass_from_batch_begin():
    log: list = []
    runner = Runner([Recorder("data", log, batches=10), Recorder("stopper", log, stop_begin_at=2)])
    with runner:
        assert runner.run_one_pass() == 2
    # the outer item receives the inner True and passes it up
    assert hooks(log, "pass_end") == [("data", "in"), ("stopper", "in"), ("stopper", "out"),
                                      ("data", "out")]


def test_item_stops_the_pass_from_batch_end_after_the_batch():
    log: list = []
    inner = Recorder("ops", log)
    runner = Runner([Recorder("data", log, batches=10), Recorder("stopper", log, stop_end_at=4),
                     inner])
    with runner:
        assert runner.run_one_pass() == 4
    assert inner.seen == 4


def test_an_item_that_does_not_call_next_cuts_the_chain_short():
    log: list = []
    inner = Recorder("inner", log)
    runner = Runner([Recorder("data", log, batches=2), Recorder("cut", log, cut={"batch_begin"}),
                     inner])
    with runner:
        runner.run_one_pass()
    assert not [e for e in log if e[0] == "inner" and e[1] == "batch_begin"]
    assert inner.seen == 2  # batch_end still reaches it


def test_with_block_initializes_and_finalizes_even_on_error():
    log: list = []
    runner = Runner([Recorder("a", log, batches=1)])
    assert not runner.initialized
    with pytest.raises(ZeroDivisionError):
        with runner:
            assert runner.initialized
            raise ZeroDivisionError("boom")
    assert not runner.initialized
    assert hooks(log, "finalize") == [("a", "in"), ("a", "out")]
    runner.finalize()  # idempotent
    assert len(hooks(log, "finalize")) == 2


def test_passes_need_an_initialized_runner():
    runner = Runner([RunnerItem()])
    with pytest.raises(RuntimeError, match="not initialized: use `with runner:`"):
        runner.run_one_pass()
    with pytest.raises(RuntimeError, match="not initialized"):
        runner.run(1)


def test_runner_validates_items():
    with pytest.raises(TypeError, match="`item` must be a RunnerItem, got int"):
        Runner([3])
    with pytest.raises(RuntimeError, match="at least one item"):
        Runner().initialize()
    runner = Runner([RunnerItem()])
    with runner:
        with pytest.raises(RuntimeError, match="already initialized"):
            runner.add_item(RunnerItem())
        with pytest.raises(RuntimeError, match="already initialized"):
            runner.initialize()
    with pytest.raises(ValueError, match="`num_passes` must be a non-negative int, got -1"):
        with runner:
            runner.run(-1)


def test_context_is_shared_and_parent_is_recorded():
    parent = RunnerContext(name="outer")
    seen = []

    class Look(RunnerItem):
        def initialize(self, context, next_callback):
            seen.append((context.parent, context.runner))
            next_callback(context)

    runner = Runner([Look()])
    runner.initialize(parent=parent)
    assert seen == [(parent, runner)]
    assert runner.context.stop_training is False
    runner.finalize()
    assert "parent" in repr(runner.context)


class Batches(RunnerItem):
    def __init__(self, n):
        self.n = n

    def on_batch_begin(self, next_callback):
        if self.context.batch_id >= self.n:
            return True
        self.context.batch_size = 4
        return next_callback()


class StopAfter(RunnerItem):
    def __init__(self, passes):
        self.passes = passes

    def on_pass_end(self, next_callback):
        next_callback()
        if self.context.pass_id + 1 >= self.passes:
            self.context.stop_training = True


def test_run_counts_passes_from_the_counter_and_honours_stop_training():
    runner = Runner([Counter(), Batches(3)])
    with runner:
        assert runner.run(2) == 2
        assert runner.run(3) == 1  # pass 2 only: the job has done 2 passes
        assert runner.run(3) == 0
        assert (runner.context.pass_id, runner.context.global_step) == (3, 9)
    runner = Runner([Counter(), Batches(1), StopAfter(2)])
    with runner:
        assert runner.run(10) == 2
    assert Runner([Batches(0)]).add_item(RunnerItem()) is not None


class Stateful(RunnerItem):
    state_key = "thing"

    def __init__(self):
        self.value = 0

    def state_dict(self):
        return {"value": self.value}

    def load_state_dict(self, state):
        self.value = state["value"]


def test_state_dict_round_trip_and_mismatches():
    a = Stateful()
    a.value = 7
    runner = Runner([Counter(), a])
    with runner:
        state = runner.state_dict()
    assert state == {"counter": {"pass_id": 0, "batch_id": 0, "global_step": 0, "samples_seen": 0},
                     "thing": {"value": 7}}
    b = Stateful()
    other = Runner([Counter(), b])
    with other:
        other.load_state_dict(state)
    assert b.value == 7
    lacking = Runner([Counter()])
    with lacking:
        with pytest.raises(CheckpointError, match="state for items this runner lacks: 'thing'"):
            lacking.load_state_dict(state)
        lacking.load_state_dict(state, strict=False)
    more = Runner([Stateful()])
    with more:
        with pytest.raises(CheckpointError, match=r"no state for 'thing' \(Stateful\)"):
            more.load_state_dict({"counter": state["counter"]}, strict=False)


def test_two_items_with_one_key_are_refused():
    runner = Runner([Stateful(), Stateful()])
    with pytest.raises(ValueError, match="two items have the checkpoint key 'thing'"):
        runner.initialize()
