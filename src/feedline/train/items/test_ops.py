"""``TestOps``: evaluate the model on every fed batch and report the pass's means.

``on_pass_begin`` swaps the model average in (``context.updater.apply()``, when the
context has an updater with one) and puts the model in evaluation mode; every
``on_batch_begin`` computes, without gradients, the output of ``context.module`` (the
bare module: evaluation needs no gradient synchronisation), the cost and the metrics,
and adds them to the pass's sums; ``on_pass_end`` reduces the sums over all ranks, sets
``context.test_result`` (a :class:`~feedline.train.TestResult`), swaps the trained
parameters back, restores training mode, and then calls the inner items.

The test pass's ``pass_id`` is ``context.pass_id`` when a counter or a parent sets it.

>>> import numpy as np, torch
>>> from feedline import Dataset, data_type
>>> from feedline.train import Runner, SGD, network
>>> from feedline.train.items import *
>>> x = np.eye(4, dtype=np.float32)[[0, 1, 2, 3] * 4]; y = np.array([0, 1, 0, 1] * 4)
>>> net = network(inputs={"x": data_type.dense_vector(4), "label": data_type.integer_value(2)},
...               learning_rate=0.5, learning_method=SGD(), batch_size=4)(torch.nn.Linear(4, 2))
>>> data = Dataset.from_arrays(x, y)
>>> runner = Runner([CreateModel(net), DataProvider(data, batch_size=16), TestOps()])
>>> with runner:
...     _ = runner.run_one_pass()
...     result = runner.context.test_result
>>> result.samples, sorted(result.metrics)
(16, ['accuracy'])
"""

from __future__ import annotations

from typing import Any

from feedline.train.events import TestResult
from feedline.train.metrics import MetricSums
from feedline.train.runner import RunnerItem

__all__ = ["TestOps"]


class TestOps(RunnerItem):
    """Evaluation of one pass; see the module docstring.

    >>> import numpy as np, torch
    >>> from feedline import Dataset, data_type
    >>> from feedline.train import Runner, SGD, network
    >>> from feedline.train.items import *
    >>> net = network(inputs={"x": data_type.dense_vector(2), "label": data_type.integer_value(2)},
    ...               learning_rate=0.1, learning_method=SGD(), batch_size=2)(torch.nn.Linear(2, 2))
    >>> data = Dataset.from_arrays(np.eye(2, dtype=np.float32)[[0, 1, 0, 1]], np.array([0, 1, 0, 1]))
    >>> def trainer(*extra):        # 4 samples, 2 batches per pass
    ...     return Runner([CreateModel(net, seed=0), LocalUpdater(), Counter(), DataProvider(data),
    ...                    *extra, TrainOps()])
    >>> with Runner([CreateModel(net), DataProvider(data, state_key=None), TestOps()]) as tester:
    ...     _ = tester.run_one_pass()
    >>> result = tester.context.test_result
    >>> result.pass_id, result.samples, sorted(result.metrics)
    (None, 4, ['accuracy'])
    """

    __test__ = False  # not a pytest test class

    def __init__(self) -> None:
        self.sums = MetricSums()
        self._was_training = True

    def on_pass_begin(self, next_callback: Any) -> None:
        ctx = self.context
        self.sums.reset()
        updater = getattr(ctx, "updater", None)
        if updater is not None:
            updater.apply()
        self._was_training = ctx.module.training
        ctx.module.eval()
        next_callback()

    def on_batch_begin(self, next_callback: Any) -> bool:
        import torch

        ctx = self.context
        net = ctx.network
        with torch.no_grad():
            output = net.forward(ctx.module, ctx.inputs)
            cost = float(net.compute_cost(output, ctx.inputs).item())
            metrics = net.compute_metrics(output, ctx.inputs)
        ctx.output = output
        self.sums.add(ctx.batch_size, cost=cost, metrics=metrics)
        return next_callback()

    def on_pass_end(self, next_callback: Any) -> None:
        ctx = self.context
        try:
            names = list(ctx.network.metrics)
            device = ctx.device if ctx.device.type == "cuda" else None
            self.sums.all_reduce(names, device)
            cost, metrics = self.sums.means()
            ctx.test_result = TestResult(pass_id=getattr(ctx, "pass_id", None), cost=cost,
                                         metrics=metrics, samples=self.sums.samples)
        finally:
            self.restore()
        next_callback()

    def restore(self) -> None:
        """Swap the trained parameters back and restore the training mode."""
        ctx = self.context
        updater = getattr(ctx, "updater", None)
        if updater is not None:
            updater.restore()
        ctx.module.train(self._was_training)
