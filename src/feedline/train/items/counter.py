"""``Counter``: where the job is — pass, batch, steps and samples.

Fields it keeps on the context, field by field:

==================  ====================================================================
``pass_id``         0-based index of the current pass; after a pass ends (once every
                    inner item's ``on_pass_end`` has run) it is incremented, so between
                    passes it is the number of passes completed
``batch_id``        0-based index of the current batch within its pass; incremented after
                    every inner item's ``on_batch_end``, reset to 0 when the pass ends
``global_step``     batches completed over all passes (incremented with ``batch_id``,
                    never reset); equals the updater's update count in training
``samples_seen``    samples in those batches (``context.batch_size`` summed; per rank
                    when data parallel)
==================  ====================================================================

Items *inside* the counter (added after it) see the ids of the batch being processed;
items *outside* it that act after ``next_callback()`` see them already advanced. Resets
happen at the end of a pass, not at the start, so a runner restored from a mid-pass
checkpoint goes on with the restored ``batch_id``. Checkpoint entry: ``"counter"``.

>>> from feedline.train import Runner, RunnerItem
>>> class ThreeBatches(RunnerItem):
...     def on_batch_begin(self, next_callback):
...         if self.context.batch_id == 3:
...             return True
...         self.context.batch_size = 10
...         return next_callback()
>>> runner = Runner([Counter(), ThreeBatches()])
>>> with runner:
...     _ = runner.run(2)
>>> c = runner.context
>>> c.pass_id, c.batch_id, c.global_step, c.samples_seen
(2, 0, 6, 60)
"""

from __future__ import annotations

from typing import Any

from feedline.exceptions import CheckpointError
from feedline.train.runner import RunnerContext, RunnerItem

__all__ = ["Counter"]

_FIELDS = ("pass_id", "batch_id", "global_step", "samples_seen")


class Counter(RunnerItem):
    """Counts passes, batches, steps and samples; see the module docstring.

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
    ...     _ = runner.run(2)
    >>> c = runner.context
    >>> c.pass_id, c.global_step, c.samples_seen
    (2, 4, 8)
    """

    state_key = "counter"

    def initialize(self, context: RunnerContext, next_callback: Any) -> None:
        for name in _FIELDS:
            setattr(context, name, 0)
        next_callback(context)

    def on_batch_end(self, next_callback: Any) -> bool:
        stop = next_callback()
        ctx = self.context
        ctx.batch_id += 1
        ctx.global_step += 1
        ctx.samples_seen += int(getattr(ctx, "batch_size", 0) or 0)
        return stop

    def on_pass_end(self, next_callback: Any) -> None:
        next_callback()
        self.context.pass_id += 1
        self.context.batch_id = 0

    def state_dict(self) -> dict[str, Any]:
        return {name: int(getattr(self.context, name)) for name in _FIELDS}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        missing = [n for n in _FIELDS if n not in state]
        if missing:
            raise CheckpointError(f"the counter entry lacks {', '.join(missing)}")
        for name in _FIELDS:
            setattr(self.context, name, int(state[name]))
