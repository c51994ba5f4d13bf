"""PaddlePaddle's training side: the seed's Runner programs, item names, sparse-row updates."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from feedline import Dataset, data_type
from feedline.train import (
    SGD,
    AdamOptimizer,
    L2Regularization,
    ModelAverage,
    Momentum,
    Runner,
    RunnerBuilder,
    network,
)
from feedline.train import items as feed_items
from feedline.train.items import (
    BaseObserveItem,
    BasicGradientMachineTestOps,
    BasicGradientMachineTrainOps,
    BasicLocalParameterUpdater,
    BasicLocalParameterUpdaterOps,
    BasicPaddleTestDataProvider,
    BasicPaddleTrainerDataProvider,
    Counter,
    CreateGradientMachine,
    InheritGradientMachineUpdater,
    provider_dataset,
)

# --------------------------------------------------------------------------- the seed's mnist program


def _write_mnist_like(path, n, seed):
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for _ in range(n):
            label = int(rng.integers(10))
            pixels = rng.random(784).round(3)
            f.write(f"{label};{' '.join(map(str, pixels))}\n")


def process(settings, filename):  # the seed's mnist_provider.process, for this text format
    with open(filename) as f:
        for line in f:
            label, pixels = line.split(";")
            yield {"pixel": [float(p) for p in pixels.split()], "label": int(label)}


@network(
    inputs={
        "pixel": data_type.dense_vector(784),
        "label": data_type.integer_value(10),
    },
    learning_rate=1e-4,
    learning_method=AdamOptimizer(),
    batch_size=1000,
    model_average=ModelAverage(average_window=0.5),
    regularization=L2Regularization(rate=0.5))
def mnist_network(pixel, label):
    return torch.nn.Sequential(  # fc_layer(200), fc_layer(200), fc_layer(10, softmax)
        torch.nn.Linear(784, 200), torch.nn.Tanh(),
        torch.nn.Linear(200, 200), torch.nn.Tanh(),
        torch.nn.Linear(200, 10),  # softmax + classification_cost = cross entropy on logits
    )


def test_seed_mnist_runner_program_runs_as_written(tmp_path):
    """Seed: PaddlePaddle's Runner design, the mnist example of RunnerBuilder
    (``@network(inputs={'pixel': dense_vector(784), 'label': integer_value(10)}, ...)``,
    ``mnist = mnist_network()``, ``RunnerBuilder(network=mnist, device_count=2)
    .with_std_local_trainer(method=mnist_provider.process, file_list=[...])
    .with_std_tester(method=..., file_list=[...]).build()``, ``with runner:`` two
    ``run_one_pass()``). Substitutions: the network body in torch, and
    ``device_count=1`` (two devices are two processes here, started by
    ``builder.run`` or torchrun)."""
    _write_mnist_like(tmp_path / "train", 30, 0)
    _write_mnist_like(tmp_path / "t10k", 12, 1)
    seen = []

    def main():
        mnist = mnist_network()
        runner = RunnerBuilder(
            network=mnist, device_count=1).with_std_local_trainer(
                method=process,
                file_list=[str(tmp_path / "train")]).with_std_tester(
                    method=process,
                    file_list=[str(tmp_path / "t10k")]).with_item(
                        BaseObserveItem(lambda ctx: seen.append(ctx.batch_size))).build()
        with runner:
            before = [p.detach().clone() for p in runner.context.module.parameters()]
            for _ in range(2):
                runner.run_one_pass()
            after = list(runner.context.module.parameters())
            return runner.context, before, after

    ctx, before, after = main()
    assert mnist_network() is mnist_network
    assert seen == [30, 30]  # one batch of every training sample per pass
    assert ctx.pass_id == 2 and ctx.samples_seen == 60
    assert ctx.test_result.samples == 12 and ctx.test_result.pass_id == 1
    assert set(ctx.test_result.metrics) == {"accuracy"}
    assert all(not torch.equal(b, a) for b, a in zip(before, after))
    assert type(ctx.optimizer).__name__ == "Adam"
    assert ctx.optimizer.param_groups[0]["weight_decay"] == 0.5


def test_provider_samples_are_fed_in_file_order_and_settings_say_train_or_test(tmp_path):
    """Seed: PaddlePaddle's Runner design, ``BasicPaddleTrainerDataProvider`` /
    ``BasicPaddleTestDataProvider`` (a data provider function applied to each file)."""
    for i in range(3):
        (tmp_path / f"f{i}").write_text("\n".join(str(10 * i + k) for k in range(i + 1)))
    flags = []

    def read(settings, filename):
        flags.append(settings.is_train)
        for line in open(filename):
            yield float(line), int(line) % 2

    got = provider_dataset(read, [tmp_path / f"f{i}" for i in range(3)]).to_list()
    assert got == [(0.0, 0), (10.0, 0), (11.0, 1), (20.0, 0), (21.0, 1), (22.0, 0)]
    provider_dataset(read, [tmp_path / "f0"], is_train=False).to_list()
    assert flags == [True, True, True, False]
    # a resumed iterator goes on after the last sample read, inside the current file
    ds = provider_dataset(read, [tmp_path / f"f{i}" for i in range(3)])
    it = ds.iterator()
    head = [next(it) for _ in range(4)]
    rest = list(ds.iterator(it.get_state()))
    assert head + rest == got


def test_provider_decorator_settings_and_filename_only_providers(tmp_path):
    """Seed: PaddlePaddle's Runner design, the ngram example's ``@ngram.provider()``
    decorated ``process(settings, filename, **kwargs)``."""
    (tmp_path / "a").write_text("x")
    net = network(inputs={"v": data_type.dense_vector(1)}, cost=None)(torch.nn.Linear(1, 1))

    @net.provider(scale=3.0)
    def scaled(settings, filename, **kwargs):
        yield {"v": [settings.scale * len(open(filename).read())]}

    def plain(filename):
        yield {"v": [1.0]}

    assert provider_dataset(scaled, [tmp_path / "a"]).to_list() == [{"v": [3.0]}]
    assert provider_dataset(plain, [tmp_path / "a"]).to_list() == [{"v": [1.0]}]
    with pytest.raises(TypeError, match="takes \\(settings, filename\\) or \\(filename\\)"):
        provider_dataset(lambda: None, ["a"])
    with pytest.raises(ValueError, match="`file_list` must name at least one file"):
        provider_dataset(plain, [])
    with pytest.raises(TypeError, match="`file_list` must be a list of file names"):
        provider_dataset(plain, "a")
    builder = RunnerBuilder(net)
    with pytest.raises(TypeError, match="`file_list` is missing"):
        builder.with_std_local_trainer(method=plain)
    with pytest.raises(TypeError, match="give either `data` or `method=`"):
        builder.with_std_local_trainer(lambda: iter([]), method=plain, file_list=["a"])
    with pytest.raises(TypeError, match="give the data"):
        builder.with_std_tester()


def test_network_is_its_own_factory_and_overrides_make_a_copy():
    """Seed: PaddlePaddle's Runner design, ``mnist = mnist_network()``."""
    net = mnist_network()
    assert net is mnist_network and net.batch_size == 1000
    small = mnist_network(batch_size=10, learning_rate=0.5)
    assert small is not mnist_network and (small.batch_size, small.learning_rate) == (10, 0.5)
    assert mnist_network.batch_size == 1000  # unchanged
    assert isinstance(small.create_model(), torch.nn.Sequential)
    with pytest.raises(TypeError, match="unknown network settings: bogus"):
        mnist_network(bogus=1)
    with pytest.raises(ValueError, match="`batch_size` must be a positive int, got 0"):
        mnist_network(batch_size=0)


def test_seed_item_names_are_the_items():
    """Seed: PaddlePaddle's Runner design, the standard items (``CreateGradientMachine``,
    ``BasicLocalParameterUpdaterOps``, ``BasicGradientMachineTrainOps``,
    ``BasicGradientMachineTestOps``, ``InheritGradientMachineUpdater``, ...)."""
    assert issubclass(CreateGradientMachine, feed_items.CreateModel)
    assert issubclass(BasicLocalParameterUpdater, feed_items.LocalUpdater)
    assert issubclass(BasicGradientMachineTrainOps, feed_items.TrainOps)
    assert issubclass(BasicGradientMachineTestOps, feed_items.TestOps)
    assert issubclass(InheritGradientMachineUpdater, feed_items.InheritModel)
    assert issubclass(BasicPaddleTrainerDataProvider, feed_items.DataProvider)
    for name in ("PassEvaluate", "BatchEvaluate", "BasicDataProviderOps",
                 "BasicPaddleTestDataProvider", "BasicLocalParameterUpdaterOps"):
        assert name in feed_items.__all__


def test_runner_assembled_from_seed_items_trains_and_tests(tmp_path):
    """Seed: PaddlePaddle's Runner design, a runner chain of ``CreateGradientMachine``,
    ``BasicLocalParameterUpdater``, ``Counter``, ``BasicPaddleTrainerDataProvider``,
    ``BasicGradientMachineTrainOps`` and a test runner of
    ``InheritGradientMachineUpdater``, ``BasicPaddleTestDataProvider``,
    ``BasicGradientMachineTestOps``."""
    (tmp_path / "d").write_text("\n".join(str(i % 2) for i in range(16)))

    def read(settings, filename):
        for line in open(filename):
            b = int(line)
            yield {"x": [float(b), 1.0 - b], "label": b}

    net = network(inputs={"x": data_type.dense_vector(2), "label": data_type.integer_value(2)},
                  learning_rate=0.5, learning_method=SGD(), batch_size=4)(torch.nn.Linear(2, 2))
    calls = []

    class Spy(feed_items.LocalUpdater):
        def start_pass(self):
            calls.append("start_pass")

        def finish_pass(self):
            calls.append("finish_pass")

    trainer = Runner([CreateGradientMachine(net, seed=0), BasicLocalParameterUpdater(net),
                      Counter(), BasicPaddleTrainerDataProvider(net, read, [tmp_path / "d"]),
                      BasicGradientMachineTrainOps()])
    with trainer:
        for _ in range(10):
            trainer.run_one_pass()
        assert trainer.context.pass_metrics["accuracy"] == 1.0
        tester = Runner([InheritGradientMachineUpdater(),
                         BasicPaddleTestDataProvider(net, read, [tmp_path / "d"], batch_size=16),
                         BasicGradientMachineTestOps()])
        tester.initialize(parent=trainer.context)
        try:
            tester.run_one_pass()
            assert tester.context.test_result.samples == 16
            assert tester.context.test_result.metrics["accuracy"] == 1.0
        finally:
            tester.finalize()
    ops = Runner([CreateGradientMachine(net), Spy(), BasicLocalParameterUpdaterOps(),
                  BasicPaddleTrainerDataProvider(net, read, [tmp_path / "d"]),
                  BasicGradientMachineTrainOps()])
    with ops:
        ops.run_one_pass()
    # the updater item steps itself; the Ops item passes through: each step runs once
    assert calls == ["start_pass", "finish_pass"]
    with pytest.raises(ValueError, match="BasicLocalParameterUpdater was made for"):
        other = network(inputs={"x": data_type.dense_vector(2)}, cost=None)(torch.nn.Linear(2, 1))
        with Runner([CreateGradientMachine(net), BasicLocalParameterUpdater(other)]):
            pass


# --------------------------------------------------------------------------- sparse-row updates


class _EmbedNet(torch.nn.Module):
    def __init__(self, rows=50, dim=4):
        super().__init__()
        self.embedding = torch.nn.Embedding(rows, dim)
        self.out = torch.nn.Linear(2 * dim, 3)

    def forward(self, a, b):
        return self.out(torch.cat([self.embedding(a), self.embedding(b)], dim=1))


def _embed_network(method, sparse, lr=0.1):
    return network(inputs={"a": data_type.integer_value(50), "b": data_type.integer_value(50),
                           "label": data_type.integer_value(3)},
                   learning_rate=lr, learning_method=method, batch_size=4,
                   sparse_update=sparse)(lambda: _EmbedNet())


def _train(net, samples, passes=1):
    data = Dataset.from_random_access(samples)
    runner = RunnerBuilder(network=net, seed=3).with_std_local_trainer(data).build()
    with runner:
        start = runner.context.module.embedding.weight.detach().clone()
        runner.run(passes)
        return runner.context, start, runner.context.module


def test_sparse_update_changes_only_touched_rows_and_equals_the_dense_sgd_update():
    """Seed: PaddlePaddle's Runner design, the ngram example (``embedding_layer`` with
    ``ParameterAttribute(name='embedding', sparse_update=True)``); RMSProp replaced by
    SGD, whose sparse step is exact."""
    rng = np.random.default_rng(0)
    samples = [(int(rng.integers(10)), int(rng.integers(10)), int(rng.integers(3)))
               for _ in range(12)]  # ids 0..9 of a 50-row table
    touched = sorted({s[0] for s in samples} | {s[1] for s in samples})
    sparse_ctx, start, sparse_model = _train(_embed_network(SGD(), ("embedding",)), samples, 2)
    _, start_d, dense_model = _train(_embed_network(SGD(), False), samples, 2)
    assert sparse_model.embedding.sparse and not dense_model.embedding.sparse
    assert torch.equal(start, start_d)
    w = sparse_model.embedding.weight.detach()
    changed = (w != start).any(dim=1).nonzero().ravel().tolist()
    assert changed == touched
    assert torch.allclose(w, dense_model.embedding.weight.detach(), atol=1e-6)
    for name, p in sparse_model.named_parameters():
        assert torch.allclose(p, dict(dense_model.named_parameters())[name], atol=1e-6), name
    parts = sparse_ctx.optimizer.parts
    assert [type(p).__name__ for p in parts] == ["SGD", "SGD"]


def test_sparse_adam_changes_only_touched_rows_and_its_first_step_equals_adam():
    """Seed: PaddlePaddle's Runner design, sparse-row parameter updates with an adaptive
    learning method (``torch.optim.SparseAdam`` on the table)."""
    one_batch = [(1, 2, 0), (3, 1, 1), (2, 2, 2), (5, 3, 0)]
    ctx, start, sparse_model = _train(_embed_network(AdamOptimizer(), True), one_batch)
    _, _, dense_model = _train(_embed_network(AdamOptimizer(), False), one_batch)
    assert [type(p).__name__ for p in ctx.optimizer.parts] == ["Adam", "SparseAdam"]
    # Adam's first step is lr * g / (|g| + eps) per element: equal up to float rounding
    # of the summed row gradients (the step itself is 0.1 per touched element)
    assert torch.allclose(sparse_model.embedding.weight, dense_model.embedding.weight, atol=1e-3)
    moved = (sparse_model.embedding.weight.detach() != start).any(dim=1).nonzero().ravel()
    assert moved.tolist() == [1, 2, 3, 5]
    more = one_batch + [(7, 7, 1), (1, 1, 1), (2, 3, 2), (3, 5, 0)]
    _, start, model = _train(_embed_network(AdamOptimizer(), True), more, 3)
    changed = (model.embedding.weight.detach() != start).any(dim=1).nonzero().ravel().tolist()
    assert changed == [1, 2, 3, 5, 7]
    sd = ctx.optimizer.state_dict()
    ctx.optimizer.load_state_dict(sd)
    with pytest.raises(ValueError, match="expected the states of 2 optimizers"):
        ctx.optimizer.load_state_dict({"parts": []})


def test_sparse_update_configuration_errors():
    with pytest.raises(ValueError, match="`sparse_update` needs a learning method with sparse "
                                         "updates \\(SGD or AdamOptimizer\\), got Momentum"):
        _embed_network(Momentum(), True)
    with pytest.raises(TypeError, match="`sparse_update` must be a bool or a non-empty list"):
        _embed_network(SGD(), "embedding")
    net = _embed_network(SGD(), ("out",))
    with pytest.raises(ValueError, match="`sparse_update` names 'out', which is not an embedding "
                                         "of the model \\(its embeddings: 'embedding'\\)"):
        net.create_model()


# --------------------------------------------------------------------------- CSC inputs


class _SparseLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.linspace(-1, 1, 12).reshape(6, 2))

    def forward(self, x):
        self.layouts.append(x.layout)
        return x @ self.weight


def test_sparse_inputs_train_alike_as_csr_and_csc():
    """Seed: PaddlePaddle's Argument, sparse inputs in the SPARSE_CSR and SPARSE_CSC
    formats (``sparse_binary_vector``/``sparse_float_vector`` fed as CSC tensors)."""
    samples = [([(0, 1.0), (3, 2.0)], 1), ([(5, -1.0)], 0), ([], 1), ([(1, 0.5), (2, 1.5)], 0)]
    results = {}
    for layout in ("csr", "csc"):
        model = _SparseLinear()
        model.layouts = []
        net = network(inputs={"x": data_type.sparse_float_vector(6),
                              "label": data_type.integer_value(2)},
                      learning_rate=0.1, learning_method=SGD(), batch_size=2)(model)
        builder = RunnerBuilder(network=net).with_std_local_trainer(
            Dataset.from_random_access(samples), sparse_layout=layout)
        result = builder.run(3)
        results[layout] = result.params["weight"]
        expected = torch.sparse_csc if layout == "csc" else torch.sparse_csr
        assert model.layouts and set(model.layouts) == {expected}
    assert torch.allclose(results["csr"], results["csc"], atol=1e-6)
    assert not torch.equal(results["csr"], torch.linspace(-1, 1, 12).reshape(6, 2))
    with pytest.raises(ValueError, match="`sparse_layout` must be one of 'csr', 'csc', got 'coo'"):
        RunnerBuilder(network=net).with_std_local_trainer(
            Dataset.from_random_access(samples), sparse_layout="coo")
