"""``EventHandler``: call a PaddlePaddle v2 style event handler from the chain.

Fires :class:`~feedline.train.BeginPass` in ``on_pass_begin``,
:class:`~feedline.train.BeginIteration` in ``on_batch_begin`` (before the inner items,
i.e. before the train ops when added before them), :class:`~feedline.train.EndIteration`
after the inner items' ``on_batch_end``, and, after the inner items' ``on_pass_end``,
:class:`~feedline.train.TestResult` (when ``context.test_result`` is set for this pass)
then :class:`~feedline.train.EndPass`. It reads ``pass_id``/``batch_id`` from the
counter (so it must be inside it), ``cost``/``metrics`` from the train ops and
``pass_cost``/``pass_metrics`` at the end of a pass. Under data parallel only rank 0
calls the handler (``all_ranks=True`` calls it everywhere).

>>> import numpy as np, torch
>>> from feedline import Dataset, data_type
>>> from feedline.train import Runner, SGD, network
>>> from feedline.train.items import *
>>> x = np.eye(4, dtype=np.float32)[[0, 1, 2, 3] * 4]; y = np.array([0, 1, 0, 1] * 4)
>>> net = network(inputs={"x": data_type.dense_vector(4), "label": data_type.integer_value(2)},
...               learning_rate=0.5, learning_method=SGD(), batch_size=4)(torch.nn.Linear(4, 2))
>>> data = Dataset.from_arrays(x, y)
>>> events = []
>>> runner = Runner([CreateModel(net), LocalUpdater(), Counter(), DataProvider(data),
...                  EventHandler(events.append), TrainOps()])
>>> with runner:
...     _ = runner.run_one_pass()
>>> [type(e).__name__ for e in events][:3], events[-1].pass_id
(['BeginPass', 'BeginIteration', 'EndIteration'], 0)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from feedline._internal.validate import callable_arg
from feedline.train.events import BeginIteration, BeginPass, EndIteration, EndPass
from feedline.train.runner import RunnerItem

__all__ = ["EventHandler"]


class EventHandler(RunnerItem):
    """Calls ``handler(event)``; see the module docstring.

    Args:
        handler: a function of one event (:mod:`feedline.train.events`); its return
            value is ignored. A non-callable raises ``TypeError``.
        all_ranks: under data parallel, call it on every rank; ``False``: on rank 0
            only.

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
    >>> seen = []
    >>> with trainer(EventHandler(lambda event: seen.append(type(event).__name__))) as runner:
    ...     _ = runner.run(1)
    >>> seen
    ['BeginPass', 'BeginIteration', 'EndIteration', 'BeginIteration', 'EndIteration', 'EndPass']
    """

    def __init__(self, handler: Callable[[Any], Any], *, all_ranks: bool = False) -> None:
        self.handler = callable_arg("handler", handler)
        self.all_ranks = bool(all_ranks)

    def _fire(self, event: Any) -> None:
        if self.all_ranks or getattr(self.context, "rank", 0) == 0:
            self.handler(event)

    def on_pass_begin(self, next_callback: Any) -> None:
        self._fire(BeginPass(pass_id=self.context.pass_id))
        next_callback()

    def on_batch_begin(self, next_callback: Any) -> bool:
        ctx = self.context
        self._fire(BeginIteration(pass_id=ctx.pass_id, batch_id=ctx.batch_id))
        return next_callback()

    def on_batch_end(self, next_callback: Any) -> bool:
        stop = next_callback()
        ctx = self.context
        self._fire(EndIteration(pass_id=ctx.pass_id, batch_id=ctx.batch_id,
                                cost=getattr(ctx, "cost", float("nan")),
                                metrics=dict(getattr(ctx, "metrics", {})),
                                batch_size=getattr(ctx, "batch_size", 0)))
        return stop

    def on_pass_end(self, next_callback: Any) -> None:
        next_callback()
        ctx = self.context
        test = getattr(ctx, "test_result", None)
        if test is not None and test.pass_id == ctx.pass_id:
            self._fire(test)
        else:
            test = None
        self._fire(EndPass(pass_id=ctx.pass_id, cost=getattr(ctx, "pass_cost", float("nan")),
                           metrics=dict(getattr(ctx, "pass_metrics", {})), test=test))

    def __repr__(self) -> str:
        name = getattr(self.handler, "__qualname__", type(self.handler).__name__)
        return f"EventHandler({name})"
