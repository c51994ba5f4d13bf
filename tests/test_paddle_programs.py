"""The PaddlePaddle design documents' programs, run with feedline (issue 29, PaddlePaddle).

Each program is the document's, with the renames written beside it. Where PaddlePaddle's
own output is the reference, it was recorded once by
``tests/peer_outputs/make_paddle_datasets_outputs.py`` under PaddlePaddle 3.3.1 (file
``tests/peer_outputs/paddle_datasets_outputs.json``) for the tiny files
``tests/peer_outputs/paddle_dataset_files.py`` writes, which the tests write again here.
"""

from __future__ import annotations

import json
import pathlib
import random

import numpy as np
import pytest
import torch

import feedline
import feedline.datasets
import feedline.reader
from feedline import data_type
from feedline.datasets import cifar, mnist
from feedline.exceptions import DataError
from feedline.train import SGD, AdamOptimizer, Runner, network
from feedline.train import train as feedline_train
from feedline.train.items import (
    BasicGradientMachineTestOps,
    BasicGradientMachineTrainOps,
    BasicLocalParameterUpdater,
    BasicLocalParameterUpdaterOps,
    BasicPaddleTestDataProvider,
    BasicPaddleTrainerDataProvider,
    Counter,
    CreateGradientMachine,
    DataProvider,
    InheritGradientMachineUpdater,
    LocalUpdater,
    PassType,
    SaveParamsOnPassEnd,
    TrainOps,
)

from tests.peer_outputs import paddle_dataset_files as files


@pytest.fixture(autouse=True)
def one_torch_thread():
    """The models here are tiny: one intra-op thread, so a busy machine's other processes
    do not make torch's thread pool wait (restored after each test)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


RECORDED = json.loads((pathlib.Path(files.__file__).parent / "paddle_datasets_outputs.json")
                      .read_text())


def digits_network(**settings):
    """``image_layer = paddle.layer.data("image", ...)``, ``label_layer = ...("label", ...)``
    -> the inputs of a ``@network``; the layers -> one ``torch.nn.Linear``."""
    settings.setdefault("learning_rate", 0.01)
    settings.setdefault("learning_method", AdamOptimizer())
    return network(inputs={"image": data_type.dense_vector(64),
                           "label": data_type.integer_value(10)}, **settings)(
        lambda: torch.nn.Linear(64, 10))


# --------------------------------------------------------------------------- the reader design


def test_reader_design_paddle_train_call_runs_as_written():
    """Reader design, "Usage"::

        batch_reader = paddle.batch(paddle.dataset.mnist.train(), 128)
        paddle.train(batch_reader, {"image":0, "label":1}, 128, 10, ...)

    Renames: ``paddle.batch`` -> ``feedline.batch``; ``paddle.dataset`` ->
    ``feedline.datasets`` (MNIST from local files; none given here, so scikit-learn's
    8x8 digits); ``paddle.train`` -> ``feedline.train.train``; ``...`` -> ``network=``.
    """
    batch_reader = feedline.batch(feedline.datasets.mnist.train(), 128)
    result = feedline_train(batch_reader, {"image": 0, "label": 1}, 128, 10,
                            network=digits_network(), seed=0)
    batches_per_pass = -(-1438 // 128)
    assert [p.pass_id for p in result.passes] == list(range(10))
    assert (result.global_step, result.samples_seen) == (10 * batches_per_pass, 10 * 1438)
    assert result.passes[-1].cost < result.passes[0].cost
    assert result.passes[-1].metrics["accuracy"] > 0.9
    test = result.trainer.test(feedline.batch(feedline.datasets.mnist.test(), 359),
                               {"image": 0, "label": 1})
    assert test.samples == 359 and test.metrics["accuracy"] > 0.85


def test_reader_design_custom_reader_creator_and_feeding_map_with_a_skipped_item(tmp_path):
    """Reader design, "How to create a custom data reader creator?" and "Why use a
    dictionary": ``image_reader_creator(image_path, label_path, n)`` as written
    (``xrange`` -> ``range``; 8x8 images instead of 28x28), composed with a third item the
    feeding map skips, ``paddle.train(paddle.batch(reader, 128), {...}, ...)``."""
    rng = np.random.default_rng(0)
    n = 300
    labels = rng.integers(0, 10, n).astype(np.uint8)
    pixels = rng.integers(0, 40, (n, 64)).astype(np.uint8)
    pixels[np.arange(n), labels] = 255  # pixel `label` lit: a separable toy set
    pixels.tofile(tmp_path / "images")
    labels.tofile(tmp_path / "labels")

    def image_reader_creator(image_path, label_path, n):
        def reader():
            f = open(image_path)
            l = open(label_path)  # noqa: E741 - the document's name
            images = np.fromfile(f, "ubyte", count=n * 8 * 8).reshape((n, 8 * 8)).astype("float32")
            images = images / 255.0 * 2.0 - 1.0
            labels = np.fromfile(l, "ubyte", count=n).astype("int")
            for i in range(n):
                yield images[i, :], labels[i]  # a single entry of data is created each time
            f.close()
            l.close()
        return reader

    reader = image_reader_creator(tmp_path / "images", tmp_path / "labels", n)
    tagged = feedline.reader.compose(reader, lambda: iter(["tag"] * n))
    result = feedline_train(feedline.batch(tagged, 128), {"image": 0, "label": 1}, 128, 20,
                            network=digits_network(learning_rate=0.05), seed=0)
    assert result.global_step == 20 * 3
    assert result.passes[-1].metrics["accuracy"] > 0.9


def test_train_forms_and_their_errors():
    data = feedline.batch(feedline.datasets.mnist.test(), 100)
    net = digits_network()
    # v2's positional form is unchanged; the design's takes a list of names too
    assert len(feedline_train(data, 2, None, {"image": 0, "label": 1}, network=net).passes) == 2
    result = feedline_train(data, ["image", "label"], 100, num_passes=1, network=net)
    assert result.samples_seen == 359
    assert net.batch_size is None  # the caller's network is left as it was
    batched = digits_network(batch_size=7)
    assert feedline_train(data, {"image": 0, "label": 1}, 100, 1, network=batched).global_step == 4
    assert batched.batch_size == 7
    with pytest.raises(ValueError, match="`batch_size` must be a positive int, got 0"):
        feedline_train(data, {"image": 0, "label": 1}, 0, 1, network=net)
    with pytest.raises(TypeError, match="at most 4 positional arguments, got 5"):
        feedline_train(data, {"image": 0, "label": 1}, 100, 1, None, network=net)
    with pytest.raises(TypeError, match="`num_passes` both by position and by keyword"):
        feedline_train(data, {"image": 0, "label": 1}, 100, 1, num_passes=2, network=net)
    with pytest.raises(TypeError, match="`num_passes` both by position and by keyword"):
        feedline_train(data, 1, num_passes=2, network=net)


# --------------------------------------------------------------------------- datasets


@pytest.fixture(scope="module")
def dataset_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("paddle_datasets")
    files.write_mnist(str(root))
    ten, hundred = files.write_cifar(str(root))
    return root, ten, hundred


def test_mnist_and_cifar_readers_give_paddles_samples(dataset_files):
    """``paddle.dataset.mnist`` / ``.cifar`` over the same files: the same samples, bit for
    bit, in the same order (PaddlePaddle's ``reader_creator`` on the local files)."""
    root, ten, hundred = dataset_files
    readers = {
        "mnist_train": mnist.train(root), "mnist_test": mnist.test(root),
        "cifar_train10": cifar.train10(ten), "cifar_test10": cifar.test10(ten),
        "cifar_train100": cifar.train100(hundred), "cifar_test100": cifar.test100(hundred),
    }
    for name, reader in readers.items():
        assert files.digest(list(reader())) == RECORDED["datasets"][name], name
    cycled = cifar.test10(ten, cycle=True)
    assert [label for _, label in cycled.take(5)()] == [9, 4, 9, 4, 9]


def test_dataset_errors_name_the_file(dataset_files, tmp_path):
    root, ten, _ = dataset_files
    with pytest.raises(FileNotFoundError, match="never downloads"):
        mnist.train(tmp_path)
    with pytest.raises(NotADirectoryError, match="MNIST's IDX files"):
        mnist.test(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="never downloads"):
        cifar.train10(tmp_path / "cifar-10-python.tar.gz")
    with pytest.raises(DataError, match="no member whose name contains 'data_batch'"):
        cifar.train10(files.write_cifar(str(tmp_path))[1])  # the CIFAR-100 tarball
    (tmp_path / "not.tar").write_bytes(b"\x00" * 10)
    with pytest.raises(DataError, match="not a tar archive"):
        cifar.test10(tmp_path / "not.tar")

    with pytest.raises(ValueError, match=r"`batches\['b'\]` images must be uint8 of shape "
                                         r"\(n, 3072\), got float64 \(1, 3072\)"):
        cifar.write(tmp_path / "w.tar", {"b": (np.zeros((1, 3072)), [1])})
    with pytest.raises(ValueError, match=r"`batches\['b'\]` has 1 images but 2 labels"):
        cifar.write(tmp_path / "w.tar", {"b": (np.zeros((1, 3072), np.uint8), [1, 2])})

    import io
    import os
    import pickle
    import tarfile

    evil = tmp_path / "evil.tar"
    blob = pickle.dumps({b"data": os.system}, protocol=2)  # would call a function when loaded
    with tarfile.open(evil, "w") as tar:
        info = tarfile.TarInfo("cifar-10-batches-py/test_batch")
        info.size = len(blob)
        tar.addfile(info, io.BytesIO(blob))
    with pytest.raises(DataError, match=r"evil.tar:cifar-10-batches-py/test_batch: not a CIFAR "
                                        r"batch: refusing to load"):
        cifar.test10(evil)


# --------------------------------------------------------------------------- chunk shuffle


def numbers(n):
    def reader():
        return iter(range(n))
    return reader


@pytest.mark.parametrize("case", RECORDED["chunk_shuffle"], ids=lambda c: f"n{c['items']}-buf{c['buf_size']}")
def test_chunk_shuffle_gives_paddles_order(case):
    """``random.seed(s); r = paddle.reader.shuffle(reader, buf_size)`` then one call per
    pass; rename: ``paddle.reader.shuffle(reader, buf)`` ->
    ``feedline.reader.shuffle(reader, buf, mode="chunk")`` (the ``random`` module's
    generator, as PaddlePaddle), or ``seed=s`` for a generator of its own."""
    n, buf, seed, orders = case["items"], case["buf_size"], case["seed"], case["orders"]
    random.seed(seed)
    shuffled = feedline.reader.shuffle(numbers(n), buf, mode="chunk")
    assert [list(shuffled()) for _ in orders] == orders
    random.seed(seed + 1)  # the module's generator is not the seeded reader's
    own = feedline.reader.shuffle(numbers(n), buf, mode="chunk", seed=seed)
    assert [list(own()) for _ in orders] == orders


def test_chunk_shuffle_resumes_exactly_from_every_position():
    n, buf, seed = 23, 5, 3
    data = feedline.Dataset.range(n)  # a resumable reader
    for passes_before in (0, 1):
        whole = feedline.reader.shuffle(data, buf, mode="chunk", seed=seed)
        for _ in range(passes_before):
            list(whole())
        states, items = [], []
        with whole.iterator() as it:
            states.append(it.get_state())
            for item in it:
                items.append(item)
                states.append(it.get_state())
        assert sorted(items) == list(range(n))
        assert all(set(items[i:i + buf]) == set(range(i, min(i + buf, n)))
                   for i in range(0, n, buf))  # items never leave their chunk
        for k, state in enumerate(states):
            json.dumps(state)  # JSON-serialisable
            fresh = feedline.reader.shuffle(data, buf, mode="chunk", seed=seed)
            with fresh.iterator(json.loads(json.dumps(state))) as it:
                assert list(it) == items[k:], k
    random.seed(0)
    module = feedline.reader.shuffle(data, buf, mode="chunk")
    with module.iterator() as it:
        head = [next(it) for _ in range(7)]
        state = it.get_state()
        tail = list(it)
    before = random.getstate()
    with module.iterator(state) as it:
        assert head + list(it) == head + tail
    assert random.getstate() == before  # resuming leaves the random module's generator alone


def test_shuffle_modes_and_errors():
    assert sorted(feedline.reader.shuffle(numbers(10), 4, seed=1)()) == list(range(10))
    with pytest.raises(ValueError, match="`mode` must be 'buffer' or 'chunk', got 'rows'"):
        feedline.reader.shuffle(numbers(3), 2, mode="rows")
    with pytest.raises(TypeError, match="`seed` must be an int or None"):
        feedline.reader.shuffle(numbers(3), 2, mode="chunk", seed="x")
    with pytest.raises(ValueError, match="`buf_size` must be a positive int, got 0"):
        feedline.reader.shuffle(numbers(3), 0, mode="chunk")


# --------------------------------------------------------------------------- the Runner design


def _digits_process(settings, filename):
    """A PaddlePaddle data provider over the digits (``filename`` is ``"train"``)."""
    for image, label in feedline.datasets.mnist.train():
        yield {"image": image, "label": label}


class CountingUpdater(BasicLocalParameterUpdater):
    def __init__(self, network=None):
        super().__init__(network)
        self.calls = {"start_pass": 0, "start_batch": 0, "finish_batch": 0, "finish_pass": 0}

    def start_pass(self):
        self.calls["start_pass"] += 1

    def start_batch(self, batch_size=None):
        self.calls["start_batch"] += 1
        return super().start_batch(batch_size)

    def finish_batch(self, cost=None):
        self.calls["finish_batch"] += 1
        super().finish_batch(cost)

    def finish_pass(self):
        self.calls["finish_pass"] += 1


def test_runner_design_item_list_composes_as_listed(tmp_path):
    """Runner design, "已经实现的RunnerItem" (the items implemented) composed in a runner as
    issue 29 lists them: ``CreateGradientMachine, BasicLocalParameterUpdaterOps, Counter,
    DataProvider, TrainOps`` (and the design's ``SaveParamsOnPassEnd``), then the tester
    ``InheritGradientMachineUpdater, BasicPaddleTestDataProvider,
    BasicGradientMachineTestOps``. No renames; the Ops item creates the updater the
    runner needs."""
    net = digits_network(batch_size=128)
    ops = BasicLocalParameterUpdaterOps()
    saver = SaveParamsOnPassEnd(tmp_path)
    runner = Runner([CreateGradientMachine(net, seed=0), ops, Counter(),
                     DataProvider(feedline.datasets.mnist.train(), feeding={"image": 0, "label": 1}),
                     saver, TrainOps()])
    with runner:
        runner.run(3)
        ctx = runner.context
        assert isinstance(ctx.updater, LocalUpdater) and ctx.optimizer is ctx.updater.optimizer
        assert ctx.updater.num_updates == ctx.global_step == 3 * 12
        assert ctx.pass_metrics["accuracy"] > 0.9
        assert ctx.updater.last_cost == ctx.cost
        assert runner.state_dict()["updater_ops"]["updater"]["num_updates"] == 36
        assert [p.rsplit("-", 1)[1] for p in saver.paths] == ["00000.flp", "00001.flp", "00002.flp"]
        tester = Runner([InheritGradientMachineUpdater(),
                         BasicPaddleTestDataProvider(net, _digits_process, ["train"]),
                         BasicGradientMachineTestOps()])
        tester.initialize(parent=ctx)
        try:
            tester.run_one_pass()
            assert tester.context.test_result.samples == 1438
            assert tester.context.test_result.pass_id == 3
        finally:
            tester.finalize()
    again = Runner([CreateGradientMachine(net, seed=0), BasicLocalParameterUpdaterOps(), Counter(),
                    BasicPaddleTrainerDataProvider(net, _digits_process, ["train"]),
                    BasicGradientMachineTrainOps()])
    with again:
        again.load_state_dict(runner.state_dict())
        assert again.context.updater.num_updates == 36


@pytest.mark.parametrize("order", ["updater_first", "ops_first"])
def test_updater_steps_run_once_whatever_the_combination(order):
    net = digits_network(batch_size=500)
    updater = CountingUpdater(net)
    pair = [updater, BasicLocalParameterUpdaterOps()]
    if order == "ops_first":
        pair.reverse()
    runner = Runner([CreateGradientMachine(net, seed=0), *pair, Counter(),
                     BasicPaddleTrainerDataProvider(net, _digits_process, ["train"]),
                     BasicGradientMachineTrainOps()])
    with runner:
        runner.run(2)
        assert runner.context.updater is updater
    # 3 batches a pass; start_batch also runs before the end of each pass's data
    assert updater.calls == {"start_pass": 2, "start_batch": 2 * 4, "finish_batch": 2 * 3,
                             "finish_pass": 2}
    assert updater.num_updates == 6


def test_two_updater_items_and_a_missing_model_are_clear_errors():
    net = digits_network()
    with pytest.raises(ValueError, match="two items have the checkpoint key 'updater'"):
        with Runner([CreateGradientMachine(net), BasicLocalParameterUpdater(), LocalUpdater()]):
            pass

    class Renamed(LocalUpdater):
        state_key = "second_updater"

    with pytest.raises(ValueError, match="this runner has two updaters"):
        with Runner([CreateGradientMachine(net), LocalUpdater(), Renamed()]):
            pass
    with pytest.raises(AttributeError, match=r"`context.module` is not set: CreateModel sets "
                                             r"it in initialize.*CreateGradientMachine is in "
                                             r"the runner but its hook has not run yet"):
        with Runner([BasicLocalParameterUpdaterOps(), CreateGradientMachine(net)]):
            pass


# --------------------------------------------------------------------------- the module wiki


def test_module_wiki_trainer_loop_with_the_updater_hooks():
    """Module wiki, "trainer训练逻辑" (the trainer's loop)::

        for pass_id in xrange(num_passes):
            self.__parameter_updater__.startPass()
            for batch_id, data_batch in enumerate(reader()):
                pass_type = self.__parameter_updater__.startBatch(len(data_batch))
                in_args = feeder(data_batch)
                self.__gradient_machine__.forwardBackward(in_args, out_args, pass_type)
                for each_param in self.__gradient_machine__.getNonStaticParameters():
                    self.__parameter_updater__.update(each_param)
                cost = out_args.sum() / len(data_batch)
                self.__parameter_updater__.finishBatch(cost)
            self.__parameter_updater__.finishPass()

    Renames: ``xrange`` -> ``range``; the gradient machine -> the runner's model
    (``forwardBackward`` -> the network's cost and ``backward()``;
    ``getNonStaticParameters()`` -> ``parameters()``); ``feeder`` -> the network's
    ``DataFeeder`` and ``to_torch``."""
    from feedline.pytorch.convert import to_torch

    net = digits_network(learning_method=SGD(), learning_rate=0.5)
    reader = feedline.batch(feedline.datasets.mnist.train().take(438), 100)
    feeder = net.data_feeder({"image": 0, "label": 1})

    def run(per_param):
        runner = Runner([CreateGradientMachine(net, seed=0), BasicLocalParameterUpdater(net)])
        with runner:
            machine, updater = runner.context.module, runner.context.updater
            costs = []
            for _pass_id in range(2):
                updater.startPass()
                for _batch_id, data_batch in enumerate(reader()):
                    pass_type = updater.startBatch(len(data_batch))
                    assert pass_type is PassType.TRAIN
                    in_args = to_torch(feeder(data_batch))
                    out = net.forward(machine, in_args)
                    cost = net.compute_cost(out, in_args)
                    cost.backward()
                    if per_param:
                        for each_param in machine.parameters():
                            updater.update(each_param)
                    else:
                        updater.update()
                    updater.finishBatch(cost.item())
                    costs.append(updater.last_cost)
                updater.finishPass()
            return [p.detach().clone() for p in machine.parameters()], costs, updater, machine

    params, costs, updater, machine = run(per_param=True)
    same, same_costs, _, _ = run(per_param=False)
    assert all(torch.equal(a, b) for a, b in zip(params, same)) and costs == same_costs
    assert updater.num_updates == 2 * 5 and updater.batch_size == 38  # 438 = 4 * 100 + 38
    assert costs[-1] < costs[0]
    # one parameter given alone is stepped alone at finishBatch
    weight, bias = (p.detach().clone() for p in updater.params)
    updater.startBatch(4)
    in_args = to_torch(feeder(reader.take(1).to_list()[0][:4]))
    cost = net.compute_cost(net.forward(machine, in_args), in_args)
    cost.backward()
    updater.update(updater.params[1])
    assert updater.num_updates == 10  # waits for the others
    updater.finishBatch(cost.item())
    assert updater.num_updates == 11
    assert torch.equal(updater.params[0], weight) and not torch.equal(updater.params[1], bias)
    with pytest.raises(ValueError, match="`param` must be one of the model's 2 trainable"):
        updater.update(torch.nn.Parameter(torch.zeros(3)))
    with pytest.raises(ValueError, match="`batch_size` must be a positive int, got 0"):
        updater.startBatch(0)
