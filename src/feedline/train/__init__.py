"""Training on PyTorch: the runner, its standard items, v2 events, checkpoints, DDP.

Needs ``pip install 'feedline[torch]'``.

* :class:`Runner` / :class:`RunnerItem` / :class:`RunnerContext` — the engine: a chain
  of items, each hook receiving the next item's hook (:mod:`feedline.train.runner`);
* :mod:`feedline.train.items` — the standard items (model, updater, counter, data
  provider, train/test ops, tester, checkpoints, progress, logs, early stopping);
* :func:`network` and the optimization settings (:class:`AdamOptimizer`,
  :class:`Momentum`, :class:`SGD`, :class:`L2Regularization`, :class:`ModelAverage`);
* :class:`RunnerBuilder` — the standard trainer and tester chains;
* :func:`train` / :func:`test` / :class:`Trainer` — PaddlePaddle v2's API with the
  events :class:`BeginPass`, :class:`EndPass`, :class:`BeginIteration`,
  :class:`EndIteration`, :class:`TestResult`;
* :mod:`feedline.train.checkpoint` — atomic, complete, checksummed checkpoints and
  params exports; :mod:`feedline.train.distributed` — data parallel.

>>> from feedline.train import Runner, RunnerItem
>>> class Hello(RunnerItem):
...     def on_batch_begin(self, next_callback):
...         print("hello")
...         return True                # no more data: the pass ends
>>> runner = Runner([Hello()])
>>> with runner:
...     runner.run_one_pass()
hello
0
"""

from feedline._internal.optional import require

require("torch", extra="torch")

from feedline.train.builder import RunnerBuilder, TrainResult  # noqa: E402
from feedline.train.checkpoint import (  # noqa: E402
    latest_checkpoint,
    load_checkpoint,
    load_params,
    save_checkpoint,
    save_params,
)
from feedline.train.config import (  # noqa: E402
    SGD,
    AdamOptimizer,
    L2Regularization,
    ModelAverage,
    Momentum,
)
from feedline.train.events import (  # noqa: E402
    BeginIteration,
    BeginPass,
    EndIteration,
    EndPass,
    Event,
    TestResult,
)
from feedline.train.network import Network, accuracy, network  # noqa: E402
from feedline.train.runner import Runner, RunnerContext, RunnerItem  # noqa: E402
from feedline.train.trainer import Trainer, test, train  # noqa: E402

__all__ = [
    "Runner",
    "RunnerItem",
    "RunnerContext",
    "RunnerBuilder",
    "TrainResult",
    "Network",
    "network",
    "accuracy",
    "SGD",
    "Momentum",
    "AdamOptimizer",
    "L2Regularization",
    "ModelAverage",
    "Event",
    "BeginPass",
    "EndPass",
    "BeginIteration",
    "EndIteration",
    "TestResult",
    "Trainer",
    "train",
    "test",
    "save_checkpoint",
    "load_checkpoint",
    "latest_checkpoint",
    "save_params",
    "load_params",
]
