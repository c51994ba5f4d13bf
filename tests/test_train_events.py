"""PaddlePaddle v2's train/test API and its events, built on the runner."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import feedline
from feedline import Dataset, data_type
from feedline.train import (
    SGD,
    BeginIteration,
    BeginPass,
    EndIteration,
    EndPass,
    ModelAverage,
    TestResult,
    Trainer,
    network,
    test,
    train,
)

INPUTS = {"x": data_type.dense_vector(3), "label": data_type.integer_value(2)}


def data(n=24, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3)).astype(np.float32)
    y = (x[:, 1] > 0).astype(np.int64)
    return x, y


def net(**settings):
    torch.manual_seed(0)
    return network(inputs=INPUTS, learning_rate=0.2, learning_method=SGD(), **settings)(
        torch.nn.Linear(3, 2))


def test_events_come_in_v2_order_with_ids_costs_and_metrics():
    x, y = data(24)
    events = []
    result = train(Dataset.from_arrays(x, y), num_passes=2, event_handler=events.append,
                   network=net(), batch_size=10, test_reader=Dataset.from_arrays(x, y),
                   test_batch_size=24)
    kinds = [type(e).__name__ for e in events]
    one_pass = ["BeginPass"] + ["BeginIteration", "EndIteration"] * 3 + ["TestResult", "EndPass"]
    assert kinds == one_pass * 2
    begins = [e for e in events if isinstance(e, BeginIteration)]
    assert [(e.pass_id, e.batch_id) for e in begins] == [(p, b) for p in range(2) for b in range(3)]
    ends = [e for e in events if isinstance(e, EndIteration)]
    assert [e.batch_size for e in ends[:3]] == [10, 10, 4]
    assert all(isinstance(e.cost, float) and set(e.metrics) == {"accuracy"} for e in ends)
    end_passes = [e for e in events if isinstance(e, EndPass)]
    tests = [e for e in events if isinstance(e, TestResult)]
    for p, (end, tst) in enumerate(zip(end_passes, tests)):
        assert end.pass_id == p and tst.pass_id == p and end.test == tst and tst.samples == 24
        batch = ends[3 * p:3 * p + 3]
        assert end.cost == pytest.approx(sum(e.cost * e.batch_size for e in batch) / 24)
        assert end.metrics["accuracy"] == pytest.approx(
            sum(e.metrics["accuracy"] * e.batch_size for e in batch) / 24)
    assert [e.pass_id for e in events if isinstance(e, BeginPass)] == [0, 1]
    assert result.passes == end_passes and result.test == tests[-1]
    assert (result.pass_id, result.global_step, result.samples_seen) == (2, 6, 48)
    assert torch.equal(result.params["weight"], result.trainer.model.weight.detach())


def test_train_with_a_batched_reader_and_a_feeding_map():
    x, y = data(12)

    def reader():  # PaddlePaddle's convention: label first, then the features
        for i in range(12):
            yield int(y[i]), x[i].tolist()

    costs = []

    def handler(event):
        if isinstance(event, EndIteration):
            costs.append(event.cost)

    result = train(feedline.batch(reader, 4), num_passes=3, event_handler=handler,
                   feeding={"label": 0, "x": 1}, network=net())
    assert len(costs) == 9 and len(result.passes) == 3
    assert result.passes[-1].cost < result.passes[0].cost


def test_trainer_keeps_training_and_tests_with_the_model_average():
    x, y = data(32)
    trainer = Trainer(net(model_average=ModelAverage(0.5)), seed=0)
    first = trainer.train(Dataset.from_arrays(x, y), num_passes=2, batch_size=8)
    assert first.global_step == 8 and trainer.updater.num_updates == 8
    trainer.train(Dataset.from_arrays(x, y), num_passes=1, batch_size=8)
    assert trainer.updater.num_updates == 12  # the optimizer state carried over
    result = trainer.test(Dataset.from_arrays(x, y), batch_size=32)
    model = trainer.model
    trainer.updater.apply()
    with torch.no_grad():
        out = model(torch.from_numpy(x))
    trainer.updater.restore()
    expected = torch.nn.functional.cross_entropy(out, torch.from_numpy(y)).item()
    assert isinstance(result, TestResult) and result.pass_id is None
    assert result.cost == pytest.approx(expected, rel=1e-5)


def test_module_level_test_with_trainer_or_exported_params(tmp_path):
    x, y = data(16)
    trainer = train(Dataset.from_arrays(x, y), num_passes=2, network=net(), batch_size=4).trainer
    expected = test(Dataset.from_arrays(x, y), trainer=trainer, batch_size=16)
    path = tmp_path / "params.flp"
    trainer.save_params(path)
    fresh = network(inputs=INPUTS)(torch.nn.Linear(3, 2))
    again = test(Dataset.from_arrays(x, y), network=fresh, params=path, batch_size=16)
    assert again.cost == pytest.approx(expected.cost) and again.metrics == expected.metrics
    with pytest.raises(TypeError, match="test\\(\\) needs `trainer` or `network`"):
        test(Dataset.from_arrays(x, y))


def test_early_stopping_and_resume_options_through_train(tmp_path):
    x, y = data(16)
    handler_passes = []

    def handler(event):
        if isinstance(event, EndPass):
            handler_passes.append(event.pass_id)

    result = train(Dataset.from_arrays(x, y), num_passes=20, event_handler=handler, network=net(),
                   batch_size=8, test_reader=Dataset.from_arrays(x, y),
                   early_stopping={"monitor": "train.cost", "patience": 1, "min_delta": 10.0})
    assert handler_passes == [0, 1]  # pass 1 does not improve by 10: stop
    assert result.pass_id == 2
    with pytest.raises(ValueError, match="`resume=True` needs `checkpoint_dir`"):
        train(Dataset.from_arrays(x, y), network=net(), batch_size=8, resume=True)


def test_v2_event_objects():
    e = EndIteration(pass_id=1, batch_id=2, cost=0.5)
    assert e.metrics == {} and e.batch_size == 0
    with pytest.raises(AttributeError):
        e.cost = 1.0  # frozen
    assert EndPass(pass_id=0, cost=1.0).test is None
