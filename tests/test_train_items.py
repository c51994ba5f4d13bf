"""Every standard runner item, the network decorator, the settings and the builder."""

from __future__ import annotations

import csv
import io
import math
import os
import pickle
import threading
import time

import pytest
import torch

from feedline import Dataset, data_type
from feedline.exceptions import CheckpointError, FeedError
from feedline.train import (
    SGD,
    AdamOptimizer,
    L2Regularization,
    ModelAverage,
    Momentum,
    Network,
    Runner,
    RunnerBuilder,
    RunnerItem,
    TestResult,
    network,
)
from feedline.train.checkpoint import read_params
from feedline.train.items import (
    Counter,
    CreateModel,
    DataProvider,
    EarlyStopping,
    LocalUpdater,
    MetricsLogger,
    Progress,
    SaveParamsOnPassEnd,
    TestOnPassEnd,
    TestOps,
    TrainOps,
)
from feedline.train.model_average import ModelAverager
from train_helpers import INPUTS, Grab, linear_net, make_data


@network(inputs=INPUTS, learning_rate=0.05, batch_size=4)
def module_level_net(x):
    return torch.nn.Linear(x.dim, 2)


# ---------------------------------------------------------------------- network + settings

def test_network_decorator_passes_input_types_and_defaults_cost():
    assert module_level_net.feature_names == ("x",)
    assert module_level_net.label == "label"
    assert module_level_net.cost == "classification"
    assert "accuracy" in module_level_net.metrics
    model = module_level_net.create_model()
    assert isinstance(model, torch.nn.Linear) and model.in_features == 3
    assert module_level_net.create_model() is not model  # a new model per call
    # a decorated module-level function pickles by reference (for worker processes)
    assert pickle.loads(pickle.dumps(module_level_net)) is module_level_net
    # a wrapped module pickles by value
    net = linear_net()
    copy = pickle.loads(pickle.dumps(net))
    assert torch.equal(copy.create_model().weight, net.create_model().weight)


def test_network_regression_and_cost_none():
    net = network(inputs={"x": data_type.dense_vector(2), "y": data_type.dense_vector(1)},
                  label="y")(torch.nn.Linear(2, 1))
    assert net.cost == "regression" and net.metrics == {}
    net = network(inputs={"x": data_type.dense_vector(2)})(torch.nn.Linear(2, 1))
    assert net.label is None and net.cost is None


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"inputs": {}}, ValueError, "`inputs` must declare at least one input"),
        ({"inputs": {"x": 3}}, TypeError, "the type of input 'x' must be a feedline.data_type"),
        ({"inputs": INPUTS, "label": "y"}, ValueError, "`label` must name one of the inputs"),
        ({"inputs": INPUTS, "cost": "hinge"}, ValueError, "`cost` must be 'classification'"),
        ({"inputs": {"x": data_type.dense_vector(1)}, "cost": "regression"}, ValueError,
         "needs a `label` input"),
        ({"inputs": INPUTS, "learning_rate": 0}, ValueError, "`learning_rate` must be a number > 0, got 0"),
        ({"inputs": INPUTS, "learning_method": "adam"}, TypeError, "`learning_method` must be"),
        ({"inputs": INPUTS, "batch_size": 0}, ValueError, "`batch_size` must be a positive int, got 0"),
        ({"inputs": INPUTS, "model_average": 0.5}, TypeError, "`model_average` must be a ModelAverage"),
        ({"inputs": INPUTS, "regularization": 1e-4}, TypeError, "`regularization` must be"),
        ({"inputs": INPUTS, "max_grad_norm": -1.0}, ValueError, "`max_grad_norm` must be a number > 0"),
        ({"inputs": {"s": data_type.integer_value_sequence(5), "label": data_type.integer_value_sequence(5)}},
         ValueError, "`cost` must be given for a label of type integer_value_sequence"),
    ],
)
def test_network_validates_settings_at_decoration(kwargs, error, match):
    with pytest.raises(error, match=match):
        network(**kwargs)


def test_network_wraps_only_models():
    with pytest.raises(TypeError, match="wraps a function returning a torch.nn.Module"):
        network(inputs=INPUTS)(42)
    net = network(inputs=INPUTS)(lambda: "not a module")
    with pytest.raises(TypeError, match="must return a torch.nn.Module, got str"):
        net.create_model()


def test_settings_objects_validate_and_build_torch_optimizers():
    p = [torch.nn.Parameter(torch.zeros(2))]
    adam = AdamOptimizer(beta1=0.8, beta2=0.9, epsilon=1e-6).build(p, learning_rate=0.01, weight_decay=0.1)
    assert isinstance(adam, torch.optim.Adam)
    g = adam.param_groups[0]
    assert (g["lr"], g["betas"], g["eps"], g["weight_decay"]) == (0.01, (0.8, 0.9), 1e-6, 0.1)
    mom = Momentum(momentum=0.5, nesterov=True).build(p, learning_rate=0.2)
    assert (mom.param_groups[0]["momentum"], mom.param_groups[0]["nesterov"]) == (0.5, True)
    assert SGD().build(p, learning_rate=0.3).param_groups[0]["momentum"] == 0
    with pytest.raises(ValueError, match=r"`beta2` must be a number in \[0, 1\), got 1.0"):
        AdamOptimizer(beta2=1.0)
    with pytest.raises(ValueError, match="`epsilon` must be a number > 0, got 0"):
        AdamOptimizer(epsilon=0)
    with pytest.raises(ValueError, match="`nesterov` needs a momentum > 0"):
        Momentum(momentum=0, nesterov=True)
    with pytest.raises(ValueError, match="`rate` must be a number >= 0, got -0.1"):
        L2Regularization(-0.1)
    with pytest.raises(ValueError, match=r"`average_window` must be a number in \(0, 1\], got 0"):
        ModelAverage(0)
    with pytest.raises(ValueError, match="`max_average_window` must be a positive int, got 0"):
        ModelAverage(0.5, max_average_window=0)


# ---------------------------------------------------------------------- model average

@pytest.mark.parametrize("config", [ModelAverage(0.5), ModelAverage(1.0, max_average_window=3),
                                    ModelAverage(0.2, min_average_window=4)])
def test_model_averager_is_the_mean_of_the_last_n_values_with_w_le_n_lt_2w(config):
    w = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))
    avg = ModelAverager([w], config)
    values = [float(v * v % 17) for v in range(1, 40)]
    for t, value in enumerate(values, start=1):
        with torch.no_grad():
            w.fill_(value)
        avg.accumulate()
        n = avg.previous_count + avg.current_count
        window = config.window(t)
        assert n <= t and (n >= window or n == t) and n < 2 * window
        expected = sum(values[t - n:t]) / n
        assert avg.averaged()[0].item() == pytest.approx(expected)
    avg.apply()
    assert w.item() == pytest.approx(expected)
    with pytest.raises(RuntimeError, match="already applied"):
        avg.apply()
    with pytest.raises(RuntimeError, match="call restore"):
        avg.accumulate()
    avg.restore()
    assert w.item() == values[-1]
    state = avg.state_dict()
    other = ModelAverager([torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))], config)
    other.load_state_dict(state)
    assert torch.equal(other.averaged()[0], avg.averaged()[0])
    with pytest.raises(CheckpointError, match=r"tensor 0 has shape \(1,\), parameter 0 has shape \(2,\)"):
        ModelAverager([torch.nn.Parameter(torch.zeros(2))], config).load_state_dict(state)


# ---------------------------------------------------------------------- create model + updater

def test_create_model_builds_on_device_with_seed():
    net = module_level_net
    a, b = Runner([CreateModel(net, device="cpu", seed=3)]), Runner([CreateModel(net, seed=3)])
    with a, b:
        assert a.context.device == torch.device("cpu") and a.context.world_size == 1
        assert a.context.model is a.context.module
        assert torch.equal(a.context.module.weight, b.context.module.weight)
        state = a.state_dict()
    assert set(state["model"]["params"]) == {"weight", "bias"}
    with pytest.raises(TypeError, match="`network` must be a feedline.train.Network"):
        CreateModel(torch.nn.Linear(1, 1))


def test_create_model_refuses_state_of_another_model():
    small = network(inputs=INPUTS)(torch.nn.Linear(3, 2))
    big = network(inputs=INPUTS)(torch.nn.Sequential(torch.nn.Linear(3, 2)))
    r1, r2 = Runner([CreateModel(small)]), Runner([CreateModel(big)])
    with r1, r2:
        with pytest.raises(CheckpointError, match=r"missing from checkpoint: '0.weight', '0.bias'; "
                                                  r"unexpected in checkpoint: 'weight', 'bias'"):
            r2.load_state_dict(r1.state_dict())


def test_updater_clips_regularizes_and_steps():
    net = linear_net(gradient_clipping_threshold=0.01, regularization=L2Regularization(0.5))
    runner = Runner([CreateModel(net), LocalUpdater()])
    with runner:
        ctx = runner.context
        upd = ctx.updater
        assert ctx.optimizer.param_groups[0]["weight_decay"] == 0.5
        w = ctx.module.weight
        before = w.detach().clone()
        upd.start_batch()
        (w.sum() * 100).backward()  # gradient 100 everywhere, clipped to 0.01
        upd.update()
        # SGD(lr 0.1): w -= 0.1 * (clip(100) + 0.5 * w)
        assert torch.allclose(w, before - 0.1 * (0.01 + 0.5 * before))
        assert upd.num_updates == 1
        upd.start_batch()
        assert w.grad is None
    net = linear_net(max_grad_norm=1.0)
    runner = Runner([CreateModel(net), LocalUpdater()])
    with runner:
        w, b = runner.context.module.weight, runner.context.module.bias
        w_before = w.detach().clone()
        (w.sum() * 10 + b.sum() * 0).backward()
        runner.context.updater.update()
        # global norm of the gradient was 10 * sqrt(6); it becomes 1
        assert torch.allclose(w_before - w, torch.full_like(w, 0.1 / math.sqrt(6)), atol=1e-6)


def test_updater_apply_restore_and_state_checks():
    net = linear_net(model_average=ModelAverage(1.0))
    runner = Runner([CreateModel(net), LocalUpdater()])
    with runner:
        upd = runner.context.updater
        w = runner.context.module.weight
        snapshots = []
        for _ in range(3):
            upd.start_batch()
            w.sum().backward()
            upd.update()
            upd.finish_batch()
            snapshots.append(w.detach().clone())
        upd.apply()
        assert torch.allclose(w, sum(snapshots) / 3)
        upd.restore()
        assert torch.equal(w, snapshots[-1])
        state = runner.state_dict()["updater"]
        assert state["num_updates"] == 3 and state["average"]["num_updates"] == 3
    plain = Runner([CreateModel(linear_net()), LocalUpdater()])
    with plain:
        with pytest.raises(CheckpointError, match="the checkpoint has model average state, the network does not use one"):
            plain.load_state_dict({"model": {"params": dict(net.create_model().state_dict())},
                                   "updater": state})
    with pytest.raises(CheckpointError, match="the updater has no optimizer yet"):
        LocalUpdater().load_state_dict(state)
    with pytest.raises(CheckpointError, match="the model is not created yet"):
        CreateModel(linear_net()).load_state_dict({"params": {}})


# ---------------------------------------------------------------------- data provider + counter

def test_data_provider_batches_feeds_and_counts():
    x, y = make_data(10)
    grab = Grab()
    runner = Runner([CreateModel(linear_net()), Counter(),
                     DataProvider(Dataset.from_arrays(x, y), batch_size=4), grab])
    with runner:
        assert runner.context.batches_per_pass == 3
        assert runner.run_one_pass() == 3
        ctx = runner.context
        assert (ctx.pass_id, ctx.batch_id, ctx.global_step, ctx.samples_seen) == (1, 0, 3, 10)
        assert ctx.batch_size == 2 and len(ctx.batch) == 2
    got = torch.cat([b["x"] for b in grab.batches])
    assert torch.equal(got, torch.from_numpy(x))
    assert grab.batches[0]["label"].dtype == torch.int64
    assert torch.equal(torch.cat([b["label"] for b in grab.batches]), torch.from_numpy(y))


def test_data_provider_uses_feeding_map_and_batched_readers():
    x, y = make_data(6)

    def reader():  # v2 style: yields batches, columns in another order
        for i in range(0, 6, 3):
            yield [(int(y[j]), "unused", x[j]) for j in range(i, i + 3)]

    grab = Grab()
    runner = Runner([CreateModel(linear_net()), DataProvider(reader, feeding={"x": 2, "label": 0}), grab])
    with runner:
        assert runner.context.batches_per_pass is None
        assert runner.run_one_pass() == 2
        assert runner.context.batches_per_pass == 2  # learnt from the full pass
    assert torch.equal(torch.cat([b["x"] for b in grab.batches]), torch.from_numpy(x))


def test_feeding_map_that_does_not_match_the_network_names_the_input():
    runner = Runner([CreateModel(linear_net()), DataProvider(lambda: iter([]), feeding={"x": 0})])
    with pytest.raises(ValueError, match="does not match the network's inputs: input 'label' is declared but not fed"):
        runner.initialize()
    runner = Runner([CreateModel(linear_net()),
                     DataProvider(lambda: iter([]), feeding={"x": 0, "label": 1, "pixel": 2})])
    with pytest.raises(ValueError, match="`feeding` names 'pixel', which is not a declared input"):
        runner.initialize()


def test_a_sample_the_feeder_cannot_convert_is_a_feed_error():
    def reader():
        yield [([1.0, 2.0, 3.0], 0), ([1.0, 2.0], 1)]

    runner = Runner([CreateModel(linear_net()), DataProvider(reader), TrainOps()])
    with runner:
        with pytest.raises(FeedError, match=r"input 'x', sample 1 in the batch: expected a dense value of shape \(3,\)"):
            runner.run_one_pass()


def test_samples_without_batch_size_get_a_hint():
    x, y = make_data(4)
    runner = Runner([CreateModel(linear_net()), DataProvider(Dataset.from_arrays(x, y)), TrainOps()])
    with runner:
        with pytest.raises(FeedError, match="it looks like one sample; give `batch_size`"):
            runner.run_one_pass()


def test_data_provider_validates_options():
    with pytest.raises(TypeError, match="training data must be a feedline Dataset or a reader"):
        DataProvider([1, 2, 3])
    with pytest.raises(ValueError, match="`batch_size` must be a positive int, got 0"):
        DataProvider(lambda: iter([]), batch_size=0)
    with pytest.raises(ValueError, match="`remainder` must be one of 'pad', 'drop', 'keep', got 'x'"):
        DataProvider(lambda: iter([]), remainder="x")
    with pytest.raises(TypeError, match="`prefetch_next_pass` must be a bool, got 1"):
        DataProvider(lambda: iter([]), prefetch=2, prefetch_next_pass=1)


def _feed_threads():
    return [t for t in threading.enumerate() if t.name == "feedline-feed" and t.is_alive()]


def _wait_for(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


class StopAfter(RunnerItem):
    """Ends every pass after ``n`` batches ("no more data" before the data ends)."""

    def __init__(self, n):
        self.n = n

    def on_batch_end(self, next_callback):
        stop = next_callback()
        return stop or self.context.batch_id + 1 >= self.n


@pytest.mark.parametrize("next_pass", [True, False])
def test_data_provider_prefetch_reads_the_next_pass_ahead(next_pass):
    x, y = make_data(12)
    read = []  # (epoch of the item's order, item) in the order the pipeline produced them
    data = (Dataset.from_arrays(x, y).shuffle(5, seed=3)
            .map(lambda s: read.append(s[0].tobytes()) or s).batch(4))
    grab = Grab()
    provider = DataProvider(data, prefetch=2, prefetch_next_pass=next_pass)
    with Runner([CreateModel(linear_net()), Counter(), provider, grab]) as runner:
        runner.run_one_pass()
        assert provider.state_dict() == {"iterator": None, "epoch": 1}
        if next_pass:  # the next pass's first batches are read before it begins
            assert _wait_for(lambda: len(read) >= 12 + 8)
            assert len(_feed_threads()) == 1
        else:
            assert len(read) == 12 and _feed_threads() == []
        runner.run_one_pass()
        runner.run_one_pass()
    assert _feed_threads() == []  # finalize stops the thread (and the pipeline under it)
    reference = Grab()
    with Runner([CreateModel(linear_net()), Counter(),
                 DataProvider(Dataset.from_arrays(x, y).shuffle(5, seed=3).batch(4)),
                 reference]) as runner:
        for _ in range(3):
            runner.run_one_pass()
    assert len(grab.batches) == len(reference.batches) == 9
    for got, want in zip(grab.batches, reference.batches):
        assert all(torch.equal(got[k], want[k]) for k in want)


def test_data_provider_prefetch_stops_reading_when_a_pass_ends_early():
    x, y = make_data(40)
    provider = DataProvider(Dataset.from_arrays(x, y).shuffle(8, seed=0).batch(4).prefetch(3),
                            prefetch=2)
    grab = Grab()
    with Runner([CreateModel(linear_net()), Counter(), provider, StopAfter(2), grab]) as runner:
        runner.run_one_pass()
        assert _feed_threads() == []  # stopped with the pass, as without reading ahead
        runner.run_one_pass()
    # each pass starts its own epoch from the beginning, as when fed in the training thread
    reference = Grab()
    with Runner([CreateModel(linear_net()), Counter(),
                 DataProvider(Dataset.from_arrays(x, y).shuffle(8, seed=0).batch(4)),
                 StopAfter(2), reference]) as runner:
        runner.run_one_pass()
        runner.run_one_pass()
    assert len(grab.batches) == len(reference.batches) == 4
    for got, want in zip(grab.batches, reference.batches):
        assert all(torch.equal(got[k], want[k]) for k in want)


# ---------------------------------------------------------------------- train / test ops

def trainer(net, data, *extra, batch_size=5):
    return Runner([CreateModel(net), LocalUpdater(), Counter(),
                   DataProvider(data, batch_size=batch_size), TrainOps(), *extra])


def test_train_ops_learn_and_report_sample_weighted_pass_means():
    x, y = make_data(40)
    costs = []

    class Costs(RunnerItem):
        def on_batch_end(self, next_callback):
            ctx = self.context
            costs.append((ctx.batch_size, ctx.cost, ctx.metrics["accuracy"]))
            return next_callback()

    runner = trainer(linear_net(learning_rate=0.5), Dataset.from_arrays(x, y), Costs(), batch_size=15)
    pass_costs = []
    with runner:
        for _ in range(5):
            runner.run_one_pass()
            ctx = runner.context
            pass_costs.append(ctx.pass_cost)
            batch = costs[-3:]
            assert [b[0] for b in batch] == [15, 15, 10]
            assert ctx.pass_cost == pytest.approx(sum(n * c for n, c, _ in batch) / 40)
            assert ctx.pass_metrics["accuracy"] == pytest.approx(sum(n * a for n, _, a in batch) / 40)
        assert runner.context.updater.num_updates == 15
    assert pass_costs[-1] < pass_costs[0] * 0.7


def test_test_on_pass_end_uses_the_model_average_and_restores_training_params():
    x, y = make_data(30)
    data = Dataset.from_arrays(x, y)
    net = linear_net(model_average=ModelAverage(0.5))
    seen = {}

    class Look(RunnerItem):
        def on_pass_end(self, next_callback):
            next_callback()
            seen["result"] = self.context.test_result

    tester = TestOnPassEnd(data, batch_size=7)
    runner = trainer(net, data, tester, Look())
    with runner:
        runner.run_one_pass()
        ctx = runner.context
        result = seen["result"]
        assert isinstance(result, TestResult) and result.pass_id == 0 and result.samples == 30
        trained = ctx.module.weight.detach().clone()
        ctx.updater.apply()
        with torch.no_grad():
            out = ctx.module(torch.from_numpy(x))
            expected_cost = torch.nn.functional.cross_entropy(out, torch.from_numpy(y)).item()
            expected_acc = (out.argmax(1) == torch.from_numpy(y)).float().mean().item()
        ctx.updater.restore()
        assert torch.equal(ctx.module.weight, trained)
        assert ctx.module.training
    assert result.cost == pytest.approx(expected_cost, rel=1e-5)
    assert result.metrics["accuracy"] == pytest.approx(expected_acc)


def test_standalone_test_runner_and_user_metrics():
    x, y = make_data(12)
    net = linear_net(metrics={"mean_logit": lambda out, label: out.mean()})
    runner = RunnerBuilder(net).with_std_tester(Dataset.from_arrays(x, y), batch_size=5).build()
    assert [type(i).__name__ for i in runner.items] == ["CreateModel", "DataProvider", "TestOps"]
    with runner:
        runner.run_one_pass()
        result = runner.context.test_result
        with torch.no_grad():
            out = runner.context.module(torch.from_numpy(x))
    assert result.pass_id is None and set(result.metrics) == {"accuracy", "mean_logit"}
    assert result.metrics["mean_logit"] == pytest.approx(out.mean().item(), rel=1e-5)
    assert isinstance(TestOps(), RunnerItem)


# ---------------------------------------------------------------------- observers

def test_save_params_on_pass_end_writes_loadable_averaged_params(tmp_path):
    x, y = make_data(20)
    net = linear_net(model_average=ModelAverage(1.0))
    saver = SaveParamsOnPassEnd(tmp_path, every_n_passes=2)
    runner = trainer(net, Dataset.from_arrays(x, y), saver)
    with runner:
        runner.run(4)
        ctx = runner.context
        ctx.updater.apply()
        averaged = ctx.module.weight.detach().clone()
        ctx.updater.restore()
    assert [os.path.basename(p) for p in saver.paths] == ["params-pass-00001.flp", "params-pass-00003.flp"]
    assert torch.equal(read_params(saver.paths[-1])["weight"], averaged)
    with pytest.raises(ValueError, match="`pattern` must contain"):
        SaveParamsOnPassEnd(tmp_path, pattern="params.flp")


def test_progress_prints_one_summary_line_per_pass():
    x, y = make_data(20)
    out = io.StringIO()
    progress = Progress(stream=out)
    runner = trainer(linear_net(), Dataset.from_arrays(x, y), progress,
                     TestOnPassEnd(Dataset.from_arrays(x, y), batch_size=8))
    # Progress must see the test result: put it outside the tester (it is, being added before)
    with runner:
        runner.run(2)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].startswith("pass 0: 4 batches, 20 samples in ")
    assert "cost " in lines[1] and "| test cost " in lines[1] and "\r" not in out.getvalue()
    assert [p["batches"] for p in progress.passes] == [4, 4]
    assert progress.passes[1]["test_metrics"].keys() == {"accuracy"}
    dyn = io.StringIO()
    runner = trainer(linear_net(), Dataset.from_arrays(x, y), Progress(stream=dyn, dynamic=True, refresh=0))
    with runner:
        runner.run(1)
    assert "\r" in dyn.getvalue() and "4/4" in dyn.getvalue()


def test_metrics_logger_writes_csv_and_tensorboard(tmp_path):
    x, y = make_data(20)
    data = Dataset.from_arrays(x, y)
    logger = MetricsLogger(tmp_path, every_n_batches=2, tensorboard=True)
    runner = trainer(linear_net(), data, logger, TestOnPassEnd(data, batch_size=8, every_n_passes=2))
    with runner:
        runner.run(2)
    with open(tmp_path / "passes.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["pass_id"] for r in rows] == ["0", "1"]
    assert list(rows[0]) == ["pass_id", "global_step", "samples_seen", "train_cost", "train_accuracy",
                             "test_cost", "test_accuracy"]
    assert rows[0]["test_cost"] == "" and float(rows[1]["test_cost"]) > 0
    assert rows[1]["global_step"] == "8" and rows[1]["samples_seen"] == "40"
    with open(tmp_path / "batches.csv") as f:
        batches = list(csv.DictReader(f))
    assert [b["global_step"] for b in batches] == ["2", "4", "6", "8"]
    assert any(name.startswith("events.out.tfevents") for name in os.listdir(tmp_path))
    assert logger.history[1]["test_accuracy"] is not None


def test_early_stopping_stops_after_patience_passes_without_improvement():
    values = iter([1.0, 0.5, 0.6, 0.55, 0.7, 0.1])

    class Fake(RunnerItem):
        def on_batch_begin(self, next_callback):
            return True

        def on_pass_end(self, next_callback):
            self.context.test_result = TestResult(pass_id=self.context.pass_id, cost=next(values))
            next_callback()

    stopper = EarlyStopping("test.cost", patience=3)
    runner = Runner([Counter(), stopper, Fake()])
    with runner:
        assert runner.run(10) == 5
    assert (stopper.best, stopper.best_pass, stopper.wait, stopper.stopped_pass) == (0.5, 1, 3, 4)
    assert runner.state_dict()["early_stopping"] == {"best": 0.5, "best_pass": 1, "wait": 3}
    assert EarlyStopping("train.accuracy").mode == "max"
    with pytest.raises(ValueError, match="`monitor` must be 'test.<name>' or 'train.<name>'"):
        EarlyStopping("accuracy")


def test_early_stopping_names_an_unknown_metric():
    x, y = make_data(10)
    runner = trainer(linear_net(), Dataset.from_arrays(x, y), EarlyStopping("train.f1"))
    with runner:
        with pytest.raises(KeyError, match="monitors 'train.f1' but the train metrics are cost, accuracy"):
            runner.run_one_pass()


# ---------------------------------------------------------------------- builder

def test_builder_assembles_the_documented_chain(tmp_path):
    x, y = make_data(10)
    data = Dataset.from_arrays(x, y)
    runner = (RunnerBuilder(module_level_net)
              .with_std_local_trainer(data)
              .with_std_tester(data)
              .with_event_handler(print)
              .with_progress()
              .with_metrics_logger(tmp_path / "logs")
              .with_checkpoints(tmp_path / "ckpt")
              .with_early_stopping("test.accuracy")
              .with_save_params(tmp_path / "params")
              .with_item(Grab())
              .build())
    assert [type(i).__name__ for i in runner.items] == [
        "CreateModel", "LocalUpdater", "Checkpointer", "Counter", "DataProvider", "Progress",
        "MetricsLogger", "EarlyStopping", "SaveParamsOnPassEnd", "History", "EventHandler",
        "TrainOps", "TestOnPassEnd", "Grab"]


def test_builder_validates():
    with pytest.raises(TypeError, match="use the @network decorator"):
        RunnerBuilder(torch.nn.Linear(1, 1))
    with pytest.raises(ValueError, match="`device_count` must be a positive int, got 0"):
        RunnerBuilder(module_level_net, device_count=0)
    with pytest.raises(ValueError, match="nothing to build"):
        RunnerBuilder(module_level_net).build()
    with pytest.raises(ValueError, match="device_count=2 builds the runner in new processes"):
        RunnerBuilder(module_level_net, device_count=2).with_std_local_trainer(
            lambda: iter([])).build(module=torch.nn.Linear(1, 1))
    with pytest.raises(ValueError, match="`every_n_batches` must be a positive int, got 0"):
        RunnerBuilder(module_level_net).with_checkpoints("x", every_n_batches=0)
    assert isinstance(module_level_net, Network)
