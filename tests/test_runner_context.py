"""The typed RunnerContext (issue 25, item 5): declared, typed, documented fields; a
clear error naming the item that sets a field read too early; one table of item order."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
import torch

import feedline.train.runner as runner_module
from feedline import Dataset, data_type
from feedline.exceptions import ContextFieldError, FeedlineError
from feedline.train import SGD, Runner, RunnerBuilder, RunnerContext, RunnerItem, network
from feedline.train.items import Counter, CreateModel, TrainOps

FIELDS = {f.name: f for f in dataclasses.fields(RunnerContext)}


def _table_rows() -> dict[str, list[str]]:
    """The rows of the RunnerContext docstring's table: field -> [type, set by, when]."""
    doc = RunnerContext.__doc__ or ""
    lines = [line.strip() for line in doc.splitlines()]
    rules = [i for i, line in enumerate(lines) if line.startswith("=====")]
    assert len(rules) == 3  # one table: top, under the header, bottom
    widths = [len(col) for col in lines[rules[0]].split("  ")]
    rows = {}
    for line in lines[rules[1] + 1:rules[2]]:
        cells, start = [], 0
        for width in widths:
            cells.append(line[start:start + width].strip())
            start += width + 2
        rows[cells[0].strip("`")] = [cells[1].strip("`"), cells[2], cells[3]]
    return rows


def test_every_field_is_declared_typed_and_documented_in_the_one_table():
    rows = _table_rows()
    assert list(rows) == list(FIELDS)  # same fields, same order
    for name, f in FIELDS.items():
        info = RunnerContext.field_info(name)
        assert f.type and info["type"] == str(f.type)
        assert rows[name] == [info["type"], info["set_by"], info["when"]], name
        assert info["doc"]
        when = info["when"]
        # the item order is stated: every hook but initialize/construction says before/after
        for part in when.split(";"):
            hook = part.strip().split(",")[0].split(" ")[0]
            if hook.startswith("on_") and name != "stop_training":
                assert "before" in part or "after" in part, (name, part)
    assert {"runner", "parent", "stop_training", "updater", "pass_id", "batch", "cost",
            "test_result"} <= set(FIELDS)
    with pytest.raises(KeyError, match="declares no field 'bogus'"):
        RunnerContext.field_info("bogus")
    assert "RunnerContext" in runner_module.__doc__ and "ContextFieldError" in runner_module.__doc__


def _net():
    return network(inputs={"x": data_type.dense_vector(2), "label": data_type.integer_value(2)},
                   learning_rate=0.1, learning_method=SGD(), batch_size=2)(torch.nn.Linear(2, 2))


def _data():
    return Dataset.from_arrays(np.eye(2, dtype=np.float32)[[0, 1, 0, 1]], np.array([0, 1, 0, 1]))


def test_the_standard_items_set_the_fields_the_table_says():
    net = _net()
    built = RunnerBuilder(network=net, seed=0).with_std_local_trainer(_data()) \
        .with_std_tester(_data()).build()
    with built:
        built.run(1)
        ctx = built.context
        missing = [name for name in FIELDS if name not in vars(ctx)]
        assert missing == []
        assert isinstance(ctx.pass_id, int) and isinstance(ctx.cost, float)
        assert isinstance(ctx.model, torch.nn.Module) and isinstance(ctx.device, torch.device)


def test_a_field_read_before_its_item_ran_names_that_item():
    seen = {}

    class ReadsCost(RunnerItem):
        def on_batch_begin(self, next_callback):
            try:
                seen["value"] = self.context.cost
            except ContextFieldError as exc:
                seen["early"] = str(exc)
            return next_callback()

    class OneBatch(RunnerItem):
        def on_batch_begin(self, next_callback):
            if self.context.batch_id:
                return True
            self.context.inputs = {"x": torch.eye(2), "label": torch.tensor([0, 1])}
            self.context.batch_size = 2
            return next_callback()

    runner = Runner([CreateModel(_net()), ReadsCost(), Counter(), OneBatch(), TrainOps()])
    with pytest.raises(ContextFieldError) as info:
        with runner:
            runner.run_one_pass()
    message = str(info.value)
    # TrainOps reads context.updater: no item of this runner sets it
    assert message.startswith("`context.updater` is not set: LocalUpdater sets it in "
                              "initialize, before next_callback(); add LocalUpdater or "
                              "BasicLocalParameterUpdaterOps or InheritModel to the runner.")
    assert message.endswith("This runner's items: CreateModel, ReadsCost, Counter, OneBatch, "
                            "TrainOps")
    assert isinstance(info.value, AttributeError) and isinstance(info.value, FeedlineError)

    from feedline.train.items import LocalUpdater

    runner = Runner([CreateModel(_net()), LocalUpdater(), ReadsCost(), Counter(), OneBatch(),
                     TrainOps()])
    with runner:
        runner.run_one_pass()
    # TrainOps is in the runner, inside ReadsCost: it has not run when ReadsCost looks
    assert re.match(r"`context.cost` is not set: TrainOps sets it in on_batch_begin, before "
                    r"next_callback\(\); TrainOps is in the runner but its hook has not run "
                    r"yet", seen["early"])


def test_the_context_is_still_an_open_namespace():
    ctx = RunnerContext(name="outer", pass_id=3)
    assert (ctx.name, ctx.pass_id, ctx.parent, ctx.stop_training) == ("outer", 3, None, False)
    ctx.anything = [1]  # an item's own field
    assert ctx.anything == [1]
    assert getattr(ctx, "cost", None) is None and not hasattr(ctx, "updater")
    with pytest.raises(AttributeError, match="'RunnerContext' object has no attribute 'nope'") as info:
        ctx.nope  # noqa: B018
    assert not isinstance(info.value, ContextFieldError)
    assert repr(ctx) == "RunnerContext(anything, name, pass_id)"
    ctx.cost = 1.5
    del ctx.cost
    assert not hasattr(ctx, "cost")
    import copy
    import pickle

    for twin in (pickle.loads(pickle.dumps(ctx)), copy.deepcopy(ctx)):
        assert repr(twin) == repr(ctx) and twin.anything == [1] and not hasattr(twin, "cost")
    # declared fields keep the names the items always used
    assert {"batch_size", "inputs", "batches_per_pass", "samples_seen", "world_size"} <= set(FIELDS)
