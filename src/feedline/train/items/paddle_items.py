"""PaddlePaddle's runner item names, on feedline's items.

PaddlePaddle's Runner design names its standard items after the C++ objects they drive
(GradientMachine, ParameterUpdater). A program written against those names keeps them:

==================================  ======================================================
PaddlePaddle item                   here
==================================  ======================================================
``CreateGradientMachine(network)``  :class:`~feedline.train.items.CreateModel`
``BasicLocalParameterUpdater``      :class:`~feedline.train.items.LocalUpdater` (creates
                                    the optimizer and drives its pass/batch steps)
``BasicLocalParameterUpdaterOps``   the pass/batch steps of ``context.updater``
                                    (creating one when the runner has none)
``BasicGradientMachineTrainOps``    :class:`~feedline.train.items.TrainOps`
``BasicGradientMachineTestOps``     :class:`~feedline.train.items.TestOps`
``InheritGradientMachineUpdater``   :class:`~feedline.train.items.InheritModel`
``BasicPaddleTrainerDataProvider``  a :class:`~feedline.train.items.DataProvider` over a
``BasicPaddleTestDataProvider``     data provider function and a file list
``BatchEvaluate`` / ``PassEvaluate`` log the cost and metrics of each batch / pass
``BaseObserveItem``                 call functions at batch and pass ends
==================================  ======================================================

The items pass PaddlePaddle's context as a :class:`~feedline.train.RunnerContext`
(``context.module`` is the gradient machine's parameters, ``context.updater`` the
updater).

>>> import numpy as np, torch
>>> from feedline import data_type
>>> from feedline.train import Runner, SGD, network
>>> from feedline.train.items import Counter
>>> @network(inputs={"x": data_type.dense_vector(2), "label": data_type.integer_value(2)},
...          learning_rate=0.5, learning_method=SGD(), batch_size=2)
... def net(x):
...     return torch.nn.Linear(x.dim, 2)
>>> def process(settings, filename):
...     for i in range(4):
...         yield {"x": [float(i % 2), 1.0], "label": i % 2}
>>> seen = []
>>> runner = Runner([CreateGradientMachine(net()), BasicLocalParameterUpdater(net()), Counter(),
...                  BasicPaddleTrainerDataProvider(net(), process, ["f"], batch_size=2),
...                  BasicGradientMachineTrainOps(),
...                  BaseObserveItem(lambda ctx: seen.append(ctx.batch_id))])
>>> with runner:
...     runner.run_one_pass()
2
>>> seen
[0, 1]
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from feedline.exceptions import CheckpointError
from feedline.train.items.create_model import CreateModel
from feedline.train.items.data_provider import DataProvider, provider_dataset
from feedline.train.items.test_ops import TestOps
from feedline.train.items.tester import InheritModel
from feedline.train.items.train_ops import TrainOps
from feedline.train.items.updater import LocalUpdater, PassType, UpdaterSteps
from feedline.train.network import Network
from feedline.train.runner import RunnerItem

__all__ = [
    "CreateGradientMachine",
    "BasicLocalParameterUpdater",
    "BasicLocalParameterUpdaterOps",
    "BasicGradientMachineTrainOps",
    "BasicGradientMachineTestOps",
    "InheritGradientMachineUpdater",
    "BasicDataProviderOps",
    "BasicPaddleTrainerDataProvider",
    "BasicPaddleTestDataProvider",
    "BatchEvaluate",
    "PassEvaluate",
    "BaseObserveItem",
]

logger = logging.getLogger(__name__)


class CreateGradientMachine(CreateModel):
    """PaddlePaddle's name for :class:`~feedline.train.items.CreateModel`: build
    ``network``'s model. Other keywords (``device``, ``module``, ``seed``,
    ``data_parallel``) go to ``CreateModel``.

    Args:
        network: the :class:`~feedline.train.Network` whose model to build; anything
            else raises ``TypeError``.
        local: accepted for compatibility and stored as ``self.local``; it changes
            nothing (training is always local or ``torch.distributed``).

    >>> import numpy as np, torch
    >>> from feedline import data_type
    >>> from feedline.train import Runner, SGD, network
    >>> from feedline.train.items import Counter
    >>> net = network(inputs={"x": data_type.dense_vector(2), "label": data_type.integer_value(2)},
    ...               learning_rate=0.1, learning_method=SGD(), batch_size=2)(torch.nn.Linear(2, 2))
    >>> def process(settings, filename):           # a PaddlePaddle data provider function
    ...     for i in range(4):
    ...         yield {"x": [float(i % 2), 1.0], "label": i % 2}
    >>> with Runner([CreateGradientMachine(net, local=True, device="cpu")]) as runner:
    ...     type(runner.context.model).__name__, runner.context.device
    ('Linear', device(type='cpu'))
    """

    def __init__(self, network: Network, local: bool = True, **kwargs: Any) -> None:
        super().__init__(network, **kwargs)
        self.local = bool(local)


class BasicLocalParameterUpdater(LocalUpdater):
    """PaddlePaddle's name for :class:`~feedline.train.items.LocalUpdater`. It also
    answers to the module wiki's ParameterUpdater calls: ``startPass()``,
    ``startBatch(batch_size)`` (returns the :class:`~feedline.train.items.PassType`),
    ``update(param)``, ``finishBatch(cost)``, ``finishPass()``.

    Args:
        network: the network the runner must train, checked in ``initialize``
            (another one raises ``ValueError``); ``None``: not checked. A value that is
            not a :class:`~feedline.train.Network` raises ``TypeError``.

    >>> import numpy as np, torch
    >>> from feedline import data_type
    >>> from feedline.train import Runner, SGD, network
    >>> from feedline.train.items import Counter
    >>> net = network(inputs={"x": data_type.dense_vector(2), "label": data_type.integer_value(2)},
    ...               learning_rate=0.1, learning_method=SGD(), batch_size=2)(torch.nn.Linear(2, 2))
    >>> def process(settings, filename):           # a PaddlePaddle data provider function
    ...     for i in range(4):
    ...         yield {"x": [float(i % 2), 1.0], "label": i % 2}
    >>> with Runner([CreateGradientMachine(net), BasicLocalParameterUpdater(net)]) as runner:
    ...     type(runner.context.optimizer).__name__
    'SGD'
    >>> with Runner([CreateGradientMachine(net, seed=0), BasicLocalParameterUpdater(net)]) as runner:
    ...     updater, model = runner.context.updater, runner.context.module
    ...     updater.startPass()
    ...     pass_type = updater.startBatch(4)
    ...     cost = model(torch.ones(4, 2)).pow(2).mean()
    ...     cost.backward()
    ...     for param in model.parameters():        # the wiki's loop over the parameters
    ...         updater.update(param)
    ...     updater.finishBatch(cost.item()); updater.finishPass()
    >>> pass_type, updater.num_updates, updater.batch_size, updater.last_cost == cost.item()
    (<PassType.TRAIN: 'train'>, 1, 4, True)
    >>> other = network(inputs={"x": data_type.dense_vector(2)}, cost=None)(torch.nn.Linear(2, 1))
    >>> with Runner([CreateGradientMachine(net), BasicLocalParameterUpdater(other)]) as runner:
    ...     pass
    Traceback (most recent call last):
    ...
    ValueError: BasicLocalParameterUpdater was made for ...
    """

    def __init__(self, network: Network | None = None) -> None:
        super().__init__()
        if network is not None and not isinstance(network, Network):
            raise TypeError(f"`network` must be a feedline.train.Network, got {network!r}")
        self._expected_network = network

    def initialize(self, context: Any, next_callback: Any) -> None:
        expected = self._expected_network
        if expected is not None and expected is not context.network:
            raise ValueError(
                f"BasicLocalParameterUpdater was made for {expected!r}, the runner trains "
                f"{context.network!r}"
            )
        super().initialize(context, next_callback)

    # PaddlePaddle's ParameterUpdater names (the module wiki's trainer loop)
    def startPass(self) -> None:
        """``start_pass()``."""
        self.start_pass()

    def startBatch(self, batch_size: int | None = None) -> PassType:
        """``start_batch(batch_size)``: the batch's :class:`~feedline.train.items.updater.PassType`.

        Args:
            batch_size: the batch's number of samples; a positive int, or ``None`` when
                not known.
        """
        return self.start_batch(batch_size)

    def finishBatch(self, cost: float | None = None) -> None:
        """``finish_batch(cost)``.

        Args:
            cost: the batch's cost, recorded as ``last_cost`` (or ``None``).
        """
        self.finish_batch(cost)

    def finishPass(self) -> None:
        """``finish_pass()``."""
        self.finish_pass()


class BasicLocalParameterUpdaterOps(UpdaterSteps):
    """The pass and batch steps of the runner's updater: ``start_pass``/``finish_pass``
    around each pass, ``start_batch()`` before each batch (and before the end of the
    data), ``finish_batch(context.cost)`` after each batch that ran.

    An Ops item creates what it needs: without an updater on the context (or an updater
    item anywhere in this runner) it builds a
    :class:`~feedline.train.items.LocalUpdater` in ``initialize`` from
    ``context.network`` and ``context.module`` (so it must be inside
    ``CreateGradientMachine``), sets ``context.updater``/``context.optimizer`` and keeps
    the updater's state under the checkpoint entry ``"updater_ops"``. When the runner
    also has a ``BasicLocalParameterUpdater`` (or any ``LocalUpdater``) item, that item
    runs the steps and this one passes every hook through: each step runs once per pass
    or batch whatever the combination.

    >>> import torch
    >>> from feedline import Dataset, data_type
    >>> from feedline.train import Runner, SGD, network
    >>> from feedline.train.items import Counter, DataProvider
    >>> inputs = {"x": data_type.dense_vector(1), "y": data_type.dense_vector(1)}
    >>> net = network(inputs=inputs, label="y", learning_rate=0.5,
    ...               learning_method=SGD())(torch.nn.Linear(1, 1, bias=False))
    >>> xs = torch.linspace(-1, 1, 8).reshape(-1, 1).numpy()
    >>> runner = Runner([CreateGradientMachine(net, seed=0), BasicLocalParameterUpdaterOps(),
    ...                  Counter(), DataProvider(Dataset.from_arrays(xs, 3 * xs), batch_size=4),
    ...                  BasicGradientMachineTrainOps()])
    >>> with runner:                                 # the Ops item made the updater
    ...     _ = runner.run(20)
    ...     updates = runner.context.updater.num_updates
    ...     weight = runner.context.module.weight.item()
    >>> updates, round(weight, 3)
    (40, 3.0)
    """

    state_key = "updater_ops"

    def __init__(self) -> None:
        self._own: LocalUpdater | None = None
        self._steps: Any = None

    def stepped(self) -> Any:
        return self._steps

    def initialize(self, context: Any, next_callback: Any) -> None:
        if context.runner.find(LocalUpdater) is not None:
            self._steps = None  # the updater item steps itself
        else:
            updater = context.__dict__.get("updater")
            if updater is None:
                if self._own is None:
                    self._own = LocalUpdater()
                # builds its optimizer (kept while the module is the same), sets
                # context.updater and context.optimizer; the chain goes on from here
                self._own.initialize(context, _stay)
                updater = self._own
            self._steps = updater
        next_callback(context)

    def state_dict(self) -> dict[str, Any]:
        return {} if self._own is None else {"updater": self._own.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self._own is not None:
            if "updater" not in state:
                raise CheckpointError("the updater_ops entry holds no updater state")
            self._own.load_state_dict(state["updater"])


def _stay(context: Any) -> None:
    """A ``next_callback`` that calls nothing (an item initialized by another one)."""


class BasicGradientMachineTrainOps(TrainOps):
    """PaddlePaddle's name for :class:`~feedline.train.items.TrainOps` (forward,
    backward and update on every batch).

    >>> import numpy as np, torch
    >>> from feedline import data_type
    >>> from feedline.train import Runner, SGD, network
    >>> from feedline.train.items import Counter
    >>> net = network(inputs={"x": data_type.dense_vector(2), "label": data_type.integer_value(2)},
    ...               learning_rate=0.1, learning_method=SGD(), batch_size=2)(torch.nn.Linear(2, 2))
    >>> def process(settings, filename):           # a PaddlePaddle data provider function
    ...     for i in range(4):
    ...         yield {"x": [float(i % 2), 1.0], "label": i % 2}
    >>> with Runner([CreateGradientMachine(net, seed=0), BasicLocalParameterUpdater(), Counter(),
    ...              BasicPaddleTrainerDataProvider(net, process, ["part-0"]),
    ...              BasicGradientMachineTrainOps()]) as runner:
    ...     runner.run_one_pass(), runner.context.global_step, sorted(runner.context.pass_metrics)
    (2, 2, ['accuracy'])
    """


class BasicGradientMachineTestOps(TestOps):
    """PaddlePaddle's name for :class:`~feedline.train.items.TestOps` (evaluation with the
    averaged parameters swapped in).

    >>> import numpy as np, torch
    >>> from feedline import data_type
    >>> from feedline.train import Runner, SGD, network
    >>> from feedline.train.items import Counter
    >>> net = network(inputs={"x": data_type.dense_vector(2), "label": data_type.integer_value(2)},
    ...               learning_rate=0.1, learning_method=SGD(), batch_size=2)(torch.nn.Linear(2, 2))
    >>> def process(settings, filename):           # a PaddlePaddle data provider function
    ...     for i in range(4):
    ...         yield {"x": [float(i % 2), 1.0], "label": i % 2}
    >>> with Runner([CreateGradientMachine(net), BasicPaddleTestDataProvider(net, process, ["f"]),
    ...              BasicGradientMachineTestOps()]) as tester:
    ...     _ = tester.run_one_pass()
    ...     tester.context.test_result.samples
    4
    """

    __test__ = False


class InheritGradientMachineUpdater(InheritModel):
    """PaddlePaddle's name for :class:`~feedline.train.items.InheritModel`: a sub-runner
    uses its parent's model, updater and pass id.

    >>> import numpy as np, torch
    >>> from feedline import data_type
    >>> from feedline.train import Runner, SGD, network
    >>> from feedline.train.items import Counter
    >>> net = network(inputs={"x": data_type.dense_vector(2), "label": data_type.integer_value(2)},
    ...               learning_rate=0.1, learning_method=SGD(), batch_size=2)(torch.nn.Linear(2, 2))
    >>> def process(settings, filename):           # a PaddlePaddle data provider function
    ...     for i in range(4):
    ...         yield {"x": [float(i % 2), 1.0], "label": i % 2}
    >>> with Runner([CreateGradientMachine(net), BasicLocalParameterUpdater()]) as runner:
    ...     sub = Runner([InheritGradientMachineUpdater()])
    ...     sub.initialize(runner.context)
    ...     sub.context.model is runner.context.model, sub.context.updater is runner.context.updater
    ...     sub.finalize()
    (True, True)
    """


class BasicDataProviderOps(DataProvider):
    """PaddlePaddle's name for :class:`~feedline.train.items.DataProvider`: reads and feeds
    one batch per ``on_batch_begin``; the end of the data ends the pass.

    >>> import numpy as np, torch
    >>> from feedline import data_type
    >>> from feedline.train import Runner, SGD, network
    >>> from feedline.train.items import Counter
    >>> net = network(inputs={"x": data_type.dense_vector(2), "label": data_type.integer_value(2)},
    ...               learning_rate=0.1, learning_method=SGD(), batch_size=2)(torch.nn.Linear(2, 2))
    >>> def process(settings, filename):           # a PaddlePaddle data provider function
    ...     for i in range(4):
    ...         yield {"x": [float(i % 2), 1.0], "label": i % 2}
    >>> from feedline import Dataset
    >>> data = Dataset.from_arrays(np.eye(2, dtype=np.float32)[[0, 1, 0]], np.array([0, 1, 0]))
    >>> with Runner([CreateGradientMachine(net), Counter(), BasicDataProviderOps(data)]) as runner:
    ...     runner.run_one_pass(), runner.context.samples_seen      # batches of 2, then 1
    (2, 3)
    """


def _provider_item(is_train: bool) -> type:
    class _Provider(BasicDataProviderOps):
        def __init__(self, network: Network, method: Callable, file_list: Any,
                     batch_size: int | None = None, **kwargs: Any) -> None:
            if not isinstance(network, Network):
                raise TypeError(f"`network` must be a feedline.train.Network, got {network!r}")
            data = provider_dataset(method, file_list, input_types=network.input_types,
                                    is_train=is_train)
            if not is_train:
                kwargs.setdefault("state_key", None)
            super().__init__(data, batch_size=batch_size, **kwargs)

    return _Provider


class BasicPaddleTrainerDataProvider(_provider_item(True)):  # type: ignore[misc]
    """Training data from a data provider function: ``method`` applied to each file of
    ``file_list`` (:func:`~feedline.train.items.provider_dataset`), batched by
    ``batch_size`` (default: the network's). Other keywords go to ``DataProvider``.

    >>> import numpy as np, torch
    >>> from feedline import data_type
    >>> from feedline.train import Runner, SGD, network
    >>> from feedline.train.items import Counter
    >>> net = network(inputs={"x": data_type.dense_vector(2), "label": data_type.integer_value(2)},
    ...               learning_rate=0.1, learning_method=SGD(), batch_size=2)(torch.nn.Linear(2, 2))
    >>> def process(settings, filename):           # a PaddlePaddle data provider function
    ...     for i in range(4):
    ...         yield {"x": [float(i % 2), 1.0], "label": i % 2}
    >>> with Runner([CreateGradientMachine(net), Counter(),
    ...              BasicPaddleTrainerDataProvider(net, process, ["a", "b"], batch_size=4)]) as runner:
    ...     runner.run_one_pass(), runner.context.samples_seen   # 4 samples from each of 2 files
    (2, 8)
    """


class BasicPaddleTestDataProvider(_provider_item(False)):  # type: ignore[misc]
    """Test data from a data provider function (``settings.is_train`` is false; no
    checkpoint entry); as :class:`BasicPaddleTrainerDataProvider` otherwise.

    >>> import numpy as np, torch
    >>> from feedline import data_type
    >>> from feedline.train import Runner, SGD, network
    >>> from feedline.train.items import Counter
    >>> net = network(inputs={"x": data_type.dense_vector(2), "label": data_type.integer_value(2)},
    ...               learning_rate=0.1, learning_method=SGD(), batch_size=2)(torch.nn.Linear(2, 2))
    >>> def process(settings, filename):           # a PaddlePaddle data provider function
    ...     for i in range(4):
    ...         yield {"x": [float(i % 2), 1.0], "label": i % 2}
    >>> def labelled(settings, filename):
    ...     yield {"x": [0.0, 1.0], "label": int(settings.is_train)}
    >>> provider = BasicPaddleTestDataProvider(net, labelled, ["f"], batch_size=1)
    >>> with Runner([CreateGradientMachine(net), provider]) as runner:
    ...     _ = runner.run_one_pass()
    ...     runner.context.inputs["label"].tolist()       # settings.is_train was False
    [0]
    """


class BatchEvaluate(RunnerItem):
    """Log ``prefix``, pass id, batch id, cost and metrics after every batch (INFO on
    this module's logger).

    Args:
        prefix: text put before every message, as it is (``None``: none).

    >>> import numpy as np, torch
    >>> from feedline import data_type
    >>> from feedline.train import Runner, SGD, network
    >>> from feedline.train.items import Counter
    >>> net = network(inputs={"x": data_type.dense_vector(2), "label": data_type.integer_value(2)},
    ...               learning_rate=0.1, learning_method=SGD(), batch_size=2)(torch.nn.Linear(2, 2))
    >>> def process(settings, filename):           # a PaddlePaddle data provider function
    ...     for i in range(4):
    ...         yield {"x": [float(i % 2), 1.0], "label": i % 2}
    >>> import logging
    >>> records = []
    >>> class Keep(logging.Handler):
    ...     def emit(self, record): records.append(record.getMessage())
    >>> log = logging.getLogger("feedline.train.items.paddle_items"); keep = Keep()
    >>> log.addHandler(keep); old = log.level; log.setLevel(logging.INFO)
    >>> with Runner([CreateGradientMachine(net), BasicLocalParameterUpdater(), Counter(),
    ...              BasicPaddleTrainerDataProvider(net, process, ["f"]), BatchEvaluate("train: "),
    ...              BasicGradientMachineTrainOps()]) as runner:
    ...     _ = runner.run_one_pass()
    >>> log.removeHandler(keep); log.setLevel(old)
    >>> [r.split(" Cost=")[0] for r in records]
    ['train: Pass=0, Batch=0', 'train: Pass=0, Batch=1']
    """

    def __init__(self, prefix: str | None = None) -> None:
        self.prefix = prefix or ""

    def on_batch_end(self, next_callback: Any) -> bool:
        stop = next_callback()
        ctx = self.context
        if logger.isEnabledFor(logging.INFO):
            logger.info("%sPass=%d, Batch=%d Cost=%f, Eval: %s", self.prefix,
                        getattr(ctx, "pass_id", 0), getattr(ctx, "batch_id", 0),
                        getattr(ctx, "cost", float("nan")), getattr(ctx, "metrics", {}))
        return stop


class PassEvaluate(RunnerItem):
    """Log ``prefix``, pass id, the pass's mean cost and metrics (or its test result)
    after every pass (INFO on this module's logger).

    Args:
        prefix: text put before every message, as it is (``None``: none).

    >>> import numpy as np, torch
    >>> from feedline import data_type
    >>> from feedline.train import Runner, SGD, network
    >>> from feedline.train.items import Counter
    >>> net = network(inputs={"x": data_type.dense_vector(2), "label": data_type.integer_value(2)},
    ...               learning_rate=0.1, learning_method=SGD(), batch_size=2)(torch.nn.Linear(2, 2))
    >>> def process(settings, filename):           # a PaddlePaddle data provider function
    ...     for i in range(4):
    ...         yield {"x": [float(i % 2), 1.0], "label": i % 2}
    >>> import logging
    >>> records = []
    >>> class Keep(logging.Handler):
    ...     def emit(self, record): records.append(record.getMessage())
    >>> log = logging.getLogger("feedline.train.items.paddle_items"); keep = Keep()
    >>> log.addHandler(keep); old = log.level; log.setLevel(logging.INFO)
    >>> with Runner([CreateGradientMachine(net), BasicLocalParameterUpdater(), Counter(),
    ...              BasicPaddleTrainerDataProvider(net, process, ["f"]), PassEvaluate(),
    ...              BasicGradientMachineTrainOps()]) as runner:
    ...     _ = runner.run(2)
    >>> log.removeHandler(keep); log.setLevel(old)
    >>> [r.split(" Cost=")[0] for r in records]
    ['Pass=0', 'Pass=1']
    """

    def __init__(self, prefix: str | None = None) -> None:
        self.prefix = prefix or ""

    def on_pass_end(self, next_callback: Any) -> None:
        next_callback()
        ctx = self.context
        result = getattr(ctx, "test_result", None)
        cost = getattr(ctx, "pass_cost", None) if result is None else result.cost
        metrics = getattr(ctx, "pass_metrics", {}) if result is None else result.metrics
        logger.info("%sPass=%d Cost=%s Eval: %s", self.prefix, getattr(ctx, "pass_id", 0),
                    cost, metrics)


class BaseObserveItem(RunnerItem):
    """Call ``batch_end_callback(context)`` after every batch and
    ``pass_end_callback(context)`` after every pass (the inner items have run).

    Args:
        batch_end_callback: called with the runner's context after every batch;
            ``None``: nothing. A non-callable raises ``TypeError``.
        pass_end_callback: called with the runner's context after every pass;
            ``None``: nothing. A non-callable raises ``TypeError``.

    >>> import numpy as np, torch
    >>> from feedline import data_type
    >>> from feedline.train import Runner, SGD, network
    >>> from feedline.train.items import Counter
    >>> net = network(inputs={"x": data_type.dense_vector(2), "label": data_type.integer_value(2)},
    ...               learning_rate=0.1, learning_method=SGD(), batch_size=2)(torch.nn.Linear(2, 2))
    >>> def process(settings, filename):           # a PaddlePaddle data provider function
    ...     for i in range(4):
    ...         yield {"x": [float(i % 2), 1.0], "label": i % 2}
    >>> seen = []
    >>> observer = BaseObserveItem(lambda ctx: seen.append(("batch", ctx.batch_id)),
    ...                            lambda ctx: seen.append(("pass", ctx.pass_id)))
    >>> with Runner([CreateGradientMachine(net), Counter(),
    ...              BasicPaddleTrainerDataProvider(net, process, ["f"]), observer]) as runner:
    ...     _ = runner.run_one_pass()
    >>> seen
    [('batch', 0), ('batch', 1), ('pass', 0)]
    """

    def __init__(self, batch_end_callback: Callable | None = None,
                 pass_end_callback: Callable | None = None) -> None:
        for name, fn in (("batch_end_callback", batch_end_callback),
                         ("pass_end_callback", pass_end_callback)):
            if fn is not None and not callable(fn):
                raise TypeError(f"`{name}` must be callable or None, got {fn!r}")
        self.batch_end_callback = batch_end_callback
        self.pass_end_callback = pass_end_callback

    def on_batch_end(self, next_callback: Any) -> bool:
        stop = next_callback()
        if self.batch_end_callback is not None:
            self.batch_end_callback(self.context)
        return stop

    def on_pass_end(self, next_callback: Any) -> None:
        next_callback()
        if self.pass_end_callback is not None:
            self.pass_end_callback(self.context)
