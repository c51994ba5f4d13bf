"""``EarlyStopping``: end training when a monitored value stops improving.

After the inner items' ``on_pass_end`` it reads ``monitor``: ``"test.cost"``,
``"test.<metric>"`` (from ``context.test_result``; passes without a test are
skipped), ``"train.cost"`` or ``"train.<metric>"`` (the pass means). A value better than
the best so far by more than ``min_delta`` (lower for ``mode="min"``, higher for
``"max"``) resets the wait; otherwise the wait grows, and when it reaches ``patience``
the item sets ``context.stop_training = True`` — :meth:`Runner.run` stops after this
pass.

Counters: ``best`` (best value so far, ``None`` before the first), ``best_pass`` (its
pass id), ``wait`` (passes since the last improvement), ``stopped_pass`` (the pass after
which it stopped training, else ``None``). Checkpoint entry ``"early_stopping"``.

>>> import numpy as np, torch
>>> from feedline import Dataset, data_type
>>> from feedline.train import Runner, SGD, network
>>> from feedline.train.items import *
>>> x = np.eye(4, dtype=np.float32)[[0, 1, 2, 3] * 4]; y = np.array([0, 1, 0, 1] * 4)
>>> net = network(inputs={"x": data_type.dense_vector(4), "label": data_type.integer_value(2)},
...               learning_rate=0.5, learning_method=SGD(), batch_size=4)(torch.nn.Linear(4, 2))
>>> data = Dataset.from_arrays(x, y)
>>> stop = EarlyStopping("train.cost", patience=1, min_delta=100.0)
>>> with Runner([CreateModel(net), LocalUpdater(), Counter(), DataProvider(data), stop,
...              TrainOps()]) as runner:
...     runner.run(10)
2
>>> stop.best_pass, stop.stopped_pass
(0, 1)
"""

from __future__ import annotations

import math
from typing import Any

from feedline._internal.validate import check_float, one_of, positive_int
from feedline.exceptions import CheckpointError
from feedline.train.runner import RunnerItem

__all__ = ["EarlyStopping"]


class EarlyStopping(RunnerItem):
    """Stops training after ``patience`` passes without improvement; see the module docstring.

    Args:
        monitor: the value watched: ``"test.cost"``, ``"test.<metric>"``,
            ``"train.cost"`` or ``"train.<metric>"``; any other form raises
            ``ValueError``, a metric the runner does not report ``KeyError`` at the
            first pass end.
        mode: ``"min"`` (lower is better) or ``"max"``; ``None``: ``"min"`` for a cost,
            ``"max"`` for a metric.
        patience: passes without improvement after which training stops; a positive
            int.
        min_delta: how much better than the best so far a value must be to count as
            an improvement; a number >= 0.

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
    >>> stop = EarlyStopping("train.cost", patience=1, min_delta=100.0)   # nothing counts as better
    >>> with trainer(stop) as runner:
    ...     runner.run(10)                         # stops after the pass without improvement
    2
    >>> stop.best_pass, stop.stopped_pass
    (0, 1)
    >>> EarlyStopping("cost")
    Traceback (most recent call last):
    ...
    ValueError: `monitor` must be 'test.<name>' or 'train.<name>' (e.g. 'test.cost'), got 'cost'
    """

    state_key = "early_stopping"

    def __init__(self, monitor: str = "test.cost", *, mode: str | None = None, patience: int = 3,
                 min_delta: float = 0.0) -> None:
        source, _, name = monitor.partition(".")
        if source not in ("test", "train") or not name:
            raise ValueError(
                f"`monitor` must be 'test.<name>' or 'train.<name>' (e.g. 'test.cost'), got {monitor!r}"
            )
        self.monitor = monitor
        self._source, self._name = source, name
        if mode is None:
            mode = "min" if name == "cost" else "max"
        self.mode = one_of("mode", mode, ("min", "max"))
        self.patience = positive_int("patience", patience)
        self.min_delta = check_float("min_delta", min_delta)
        self.best: float | None = None
        self.best_pass: int | None = None
        self.wait = 0
        self.stopped_pass: int | None = None

    def _value(self) -> float | None:
        ctx = self.context
        if self._source == "test":
            result = getattr(ctx, "test_result", None)
            if result is None:
                return None
            cost, metrics = result.cost, result.metrics
        else:
            cost, metrics = getattr(ctx, "pass_cost", None), getattr(ctx, "pass_metrics", {})
        if self._name == "cost":
            return cost
        if self._name not in metrics:
            raise KeyError(
                f"EarlyStopping monitors {self.monitor!r} but the {self._source} metrics are "
                f"{', '.join(['cost', *metrics])}"
            )
        return metrics[self._name]

    def on_pass_end(self, next_callback: Any) -> None:
        next_callback()
        value = self._value()
        if value is None or math.isnan(value):
            return
        better = (
            self.best is None
            or (self.mode == "min" and value < self.best - self.min_delta)
            or (self.mode == "max" and value > self.best + self.min_delta)
        )
        if better:
            self.best, self.best_pass, self.wait = value, getattr(self.context, "pass_id", None), 0
            return
        self.wait += 1
        if self.wait >= self.patience:
            self.context.stop_training = True
            self.stopped_pass = getattr(self.context, "pass_id", None)

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "best_pass": self.best_pass, "wait": self.wait}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        try:
            self.best, self.best_pass, self.wait = state["best"], state["best_pass"], int(state["wait"])
        except (KeyError, TypeError) as exc:
            raise CheckpointError(f"the early_stopping entry does not restore: {exc!r}") from None
