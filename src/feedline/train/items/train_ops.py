"""``TrainOps``: forward, cost, backward and update on every fed batch.

In ``on_batch_begin`` (before the inner items run) it puts the model in training mode,
computes ``output = model(*features)`` and the network's cost, back-propagates, calls
``context.updater.update()`` (clip + optimizer step), computes the network's metrics on
the output, and sets ``context.output``, ``context.cost`` and ``context.metrics``. Under
data parallel the batch's cost and metrics are averaged over all ranks (one small
all-reduce per batch), so every rank reports the global batch's values.

It sums them, weighted by batch size, over the pass; in ``on_pass_end`` it sets
``context.pass_cost`` and ``context.pass_metrics`` before calling the inner items, and
starts new sums after. Checkpoint entry ``"train_ops"``: the running pass's sums, so
that a pass resumed mid-way reports the same means as an uninterrupted one.

>>> import numpy as np, torch
>>> from feedline import Dataset, data_type
>>> from feedline.train import Runner, SGD, network
>>> from feedline.train.items import *
>>> x = np.eye(4, dtype=np.float32)[[0, 1, 2, 3] * 4]; y = np.array([0, 1, 0, 1] * 4)
>>> net = network(inputs={"x": data_type.dense_vector(4), "label": data_type.integer_value(2)},
...               learning_rate=0.5, learning_method=SGD(), batch_size=4)(torch.nn.Linear(4, 2))
>>> data = Dataset.from_arrays(x, y)
>>> runner = Runner([CreateModel(net, seed=0), LocalUpdater(), DataProvider(data), TrainOps()])
>>> with runner:
...     for _ in range(20):
...         _ = runner.run_one_pass()
...     round(runner.context.pass_metrics["accuracy"], 2), runner.context.pass_cost < 0.1
(1.0, True)
"""

from __future__ import annotations

from typing import Any

from feedline.train.metrics import MetricSums, reduce_batch
from feedline.train.runner import RunnerItem

__all__ = ["TrainOps"]


class TrainOps(RunnerItem):
    """One training step per batch; see the module docstring.

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
    >>> with trainer() as runner:
    ...     before = runner.context.model.weight.detach().clone()
    ...     _ = runner.run(1)
    ...     changed = not torch.equal(before, runner.context.model.weight)
    >>> changed, isinstance(runner.context.cost, float), sorted(runner.context.metrics)
    (True, True, ['accuracy'])
    """

    state_key = "train_ops"

    def __init__(self) -> None:
        self.sums = MetricSums()

    def on_batch_begin(self, next_callback: Any) -> bool:
        ctx = self.context
        net = ctx.network
        model = ctx.model
        if not model.training:
            model.train()
        output = net.forward(model, ctx.inputs)
        cost = net.compute_cost(output, ctx.inputs)
        cost.backward()
        ctx.updater.update()
        # metrics see the detached output: no graph is built, as under no_grad
        metrics = net.compute_metrics(output.detach() if hasattr(output, "detach") else output,
                                      ctx.inputs)
        samples, cost_value, metrics = reduce_batch(ctx.batch_size, cost.item(), metrics,
                                                    _reduce_device(ctx))
        ctx.output = output
        ctx.cost = cost_value
        ctx.metrics = metrics
        self.sums.add(samples, cost=cost_value, metrics=metrics)  # global batch size
        return next_callback()

    def on_pass_end(self, next_callback: Any) -> None:
        ctx = self.context
        ctx.pass_cost, ctx.pass_metrics = self.sums.means()
        next_callback()
        self.sums.reset()

    def state_dict(self) -> dict[str, Any]:
        return self.sums.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.sums.load_state_dict(state)


def _reduce_device(ctx: Any) -> Any:
    device = getattr(ctx, "device", None)
    return device if device is not None and device.type == "cuda" else None
