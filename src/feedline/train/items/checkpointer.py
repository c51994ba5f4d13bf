"""``Checkpointer``: write checkpoints during training and resume from one.

Saves :func:`~feedline.train.checkpoint.save_checkpoint` files named
``checkpoint-p<pass>-s<global step>.flc`` in ``directory``:

* every ``every_n_batches`` batches (``global_step % n == 0``), after the batch is
  complete — the update, the model average, the counters, the pass's metric sums and the
  data position are all past it;
* at the end of every ``every_n_passes``-th pass (after the test, events and logs);
  ``None`` disables either.

Only the ``keep`` newest files are kept (``None``: all). ``resume``: in
``initialize``, after every inner item is initialized, restore ``"latest"`` (the newest
file in ``directory``, if there is one), a given path, or nothing (``None``).

The item must be *outside* the :class:`~feedline.train.items.Counter` (added before
it) so that it acts after the counter has advanced: a checkpoint holds the position of
the *next* batch. Under data parallel every rank takes part (positions and random
states are gathered) and rank 0 writes.

>>> import numpy as np, torch
>>> from feedline import Dataset, data_type
>>> from feedline.train import Runner, SGD, network
>>> from feedline.train.items import *
>>> x = np.eye(4, dtype=np.float32)[[0, 1, 2, 3] * 4]; y = np.array([0, 1, 0, 1] * 4)
>>> net = network(inputs={"x": data_type.dense_vector(4), "label": data_type.integer_value(2)},
...               learning_rate=0.5, learning_method=SGD(), batch_size=4)(torch.nn.Linear(4, 2))
>>> data = Dataset.from_arrays(x, y)
>>> import os, tempfile
>>> d = tempfile.mkdtemp()
>>> def trainer(**options):
...     return Runner([CreateModel(net), LocalUpdater(), Checkpointer(d, **options), Counter(),
...                    DataProvider(data), TrainOps()])
>>> with trainer(every_n_batches=3) as runner:
...     _ = runner.run(1)
>>> sorted(os.listdir(d))
['checkpoint-p0000-s000000003.flc', 'checkpoint-p0001-s000000004.flc']
>>> with trainer(resume="latest") as runner:
...     runner.context.pass_id, runner.context.global_step
(1, 4)
"""

from __future__ import annotations

import os
from typing import Any

from feedline._internal.validate import optional_positive_int
from feedline.train.checkpoint import (
    checkpoint_name,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    save_checkpoint,
)
from feedline.train.runner import RunnerContext, RunnerItem

__all__ = ["Checkpointer"]


class Checkpointer(RunnerItem):
    """Periodic checkpoints and resume; see the module docstring.

    Counters: ``saved`` — files written by this item; ``restored_from`` — the path it
    resumed from, or ``None``; ``last_path`` — the newest file it wrote.

    Args:
        directory: where the checkpoints are written (and ``"latest"`` is looked for);
            created on the first write.
        every_n_batches: also checkpoint after every batch whose ``global_step`` is a
            multiple of it; a positive int, or ``None`` (not within passes).
        every_n_passes: checkpoint at the end of every pass whose number of completed
            passes is a multiple of it; a positive int, or ``None`` (never at a pass
            end).
        keep: how many of the newest checkpoint files of ``directory`` to keep after
            each write (older ones are deleted); a positive int, or ``None``: all.
        resume: in ``initialize``, after every inner item is initialized, restore
            ``"latest"`` (the newest file in ``directory``, if there is one), this
            path, or nothing (``None``).

    The ints must be positive (else ``ValueError``; a non-int raises ``TypeError``).

    >>> import os, tempfile, numpy as np, torch
    >>> from feedline import Dataset, data_type
    >>> from feedline.train import Runner, SGD, network
    >>> from feedline.train.items import CreateModel, LocalUpdater, Counter, DataProvider, TrainOps
    >>> net = network(inputs={"x": data_type.dense_vector(2), "label": data_type.integer_value(2)},
    ...               learning_rate=0.1, learning_method=SGD(), batch_size=2)(torch.nn.Linear(2, 2))
    >>> data = Dataset.from_arrays(np.eye(2, dtype=np.float32)[[0, 1, 0, 1]], np.array([0, 1, 0, 1]))
    >>> d = tempfile.mkdtemp()
    >>> def trainer(checkpointer):
    ...     return Runner([CreateModel(net), LocalUpdater(), checkpointer, Counter(),
    ...                    DataProvider(data), TrainOps()])
    >>> first = Checkpointer(d)                          # one checkpoint at every pass end
    >>> with trainer(first) as runner:
    ...     _ = runner.run(2)
    >>> first.saved, os.path.basename(first.last_path)
    (2, 'checkpoint-p0002-s000000004.flc')
    >>> again = Checkpointer(d, resume="latest")
    >>> with trainer(again) as runner:
    ...     os.path.basename(again.restored_from), runner.context.pass_id, runner.context.global_step
    ('checkpoint-p0002-s000000004.flc', 2, 4)
    """

    def __init__(
        self,
        directory: str | os.PathLike,
        *,
        every_n_batches: int | None = None,
        every_n_passes: int | None = 1,
        keep: int | None = 2,
        resume: str | os.PathLike | None = None,
    ) -> None:
        self.directory = os.fspath(directory)
        self.every_n_batches = optional_positive_int("every_n_batches", every_n_batches)
        self.every_n_passes = optional_positive_int("every_n_passes", every_n_passes)
        self.keep = optional_positive_int("keep", keep)
        self.resume = None if resume is None else os.fspath(resume)
        self.saved = 0
        self.restored_from: str | None = None
        self.last_path: str | None = None

    def initialize(self, context: RunnerContext, next_callback: Any) -> None:
        next_callback(context)
        path = self.resume
        if path == "latest":
            path = latest_checkpoint(self.directory)
        if path is not None:
            load_checkpoint(path, context.runner)
            self.restored_from = path

    def save(self) -> str:
        """Write a checkpoint of the current state now; return its path."""
        ctx = self.context
        path = os.path.join(self.directory, checkpoint_name(ctx.pass_id, ctx.global_step))
        save_checkpoint(path, ctx.runner,
                        metadata={"pass_id": ctx.pass_id, "batch_id": ctx.batch_id,
                                  "global_step": ctx.global_step})
        if getattr(ctx, "rank", 0) == 0:
            self.saved += 1
            self.last_path = path
            self._prune()
        return path

    def _prune(self) -> None:
        if self.keep is None:
            return
        for old in list_checkpoints(self.directory)[: -self.keep]:
            try:
                os.unlink(old)
            except FileNotFoundError:  # pragma: no cover
                pass

    def on_batch_end(self, next_callback: Any) -> bool:
        stop = next_callback()
        if self.every_n_batches is not None and self.context.global_step % self.every_n_batches == 0:
            self.save()
        return stop

    def on_pass_end(self, next_callback: Any) -> None:
        next_callback()
        # pass_id was advanced by the counter: it is the number of passes completed
        if self.every_n_passes is not None and self.context.pass_id % self.every_n_passes == 0:
            self.save()

    def __repr__(self) -> str:
        return f"Checkpointer({self.directory!r})"
