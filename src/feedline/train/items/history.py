"""``History``: keep every pass's :class:`~feedline.train.EndPass` record.

After the inner items' ``on_pass_end`` it appends ``EndPass(pass_id, cost, metrics,
test)`` to ``passes`` (the test result only when it belongs to this pass). The builder
adds it to every trainer; :class:`~feedline.train.TrainResult` reports it.

>>> import numpy as np, torch
>>> from feedline import Dataset, data_type
>>> from feedline.train import Runner, SGD, network
>>> from feedline.train.items import *
>>> x = np.eye(4, dtype=np.float32)[[0, 1, 2, 3] * 4]; y = np.array([0, 1, 0, 1] * 4)
>>> net = network(inputs={"x": data_type.dense_vector(4), "label": data_type.integer_value(2)},
...               learning_rate=0.5, learning_method=SGD(), batch_size=4)(torch.nn.Linear(4, 2))
>>> data = Dataset.from_arrays(x, y)
>>> history = History()
>>> with Runner([CreateModel(net), LocalUpdater(), Counter(), DataProvider(data), history,
...              TrainOps()]) as runner:
...     _ = runner.run(2)
>>> [(p.pass_id, sorted(p.metrics), p.test) for p in history.passes]
[(0, ['accuracy'], None), (1, ['accuracy'], None)]
"""

from __future__ import annotations

from typing import Any

from feedline.train.events import EndPass
from feedline.train.items._pass import pass_test_result
from feedline.train.runner import RunnerItem

__all__ = ["History"]


class History(RunnerItem):
    """Records pass results; see the module docstring. Counters: ``passes``.

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
    >>> history = History()
    >>> with trainer(history) as runner:
    ...     _ = runner.run(2)
    >>> [(p.pass_id, sorted(p.metrics), p.test) for p in history.passes]
    [(0, ['accuracy'], None), (1, ['accuracy'], None)]
    """

    def __init__(self) -> None:
        self.passes: list[EndPass] = []

    def on_pass_end(self, next_callback: Any) -> None:
        next_callback()
        ctx = self.context
        test = pass_test_result(ctx, ctx.pass_id)
        self.passes.append(EndPass(pass_id=ctx.pass_id, cost=getattr(ctx, "pass_cost", float("nan")),
                                   metrics=dict(getattr(ctx, "pass_metrics", {})), test=test))
