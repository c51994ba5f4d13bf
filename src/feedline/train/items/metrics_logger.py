"""``MetricsLogger``: write costs and metrics to CSV files and TensorBoard.

In ``directory`` it writes (rank 0 only):

* ``passes.csv``: one row per pass, after the inner items' ``on_pass_end``: ``pass_id``,
  ``global_step``, ``samples_seen``, ``train_cost``, ``train_<metric>`` ...,
  ``test_cost``, ``test_<metric>`` ... (empty cells for passes without a test);
* ``batches.csv`` (with ``every_n_batches``): ``pass_id``, ``batch_id``,
  ``global_step``, ``cost``, ``<metric>`` ... every ``n``-th batch;
* with ``tensorboard=True``, event files readable by TensorBoard (through
  ``torch.utils.tensorboard``; needs the ``tensorboard`` package): scalars
  ``train/cost``, ``train/<metric>`` per logged batch and ``pass/train_cost``,
  ``pass/test_<metric>`` ... per pass, at the global step.

Files are appended to, so a resumed job continues its logs (batches logged after the
checkpoint it resumed from appear twice). ``history`` holds the pass rows as dicts.

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
>>> with Runner([CreateModel(net), LocalUpdater(), Counter(), DataProvider(data),
...              MetricsLogger(d), TrainOps()]) as runner:
...     _ = runner.run(2)
>>> open(os.path.join(d, "passes.csv")).readline().strip()
'pass_id,global_step,samples_seen,train_cost,train_accuracy,test_cost,test_accuracy'
"""

from __future__ import annotations

import csv
import os
from typing import Any

from feedline._internal.optional import require
from feedline._internal.validate import optional_positive_int
from feedline.train.items._pass import pass_test_result
from feedline.train.runner import RunnerContext, RunnerItem

__all__ = ["MetricsLogger"]


class _CsvLog:
    def __init__(self, path: str) -> None:
        self.path = path
        self._file: Any = None
        self._writer: Any = None
        self._fields: list[str] | None = None

    def write(self, row: dict[str, Any]) -> None:
        if self._file is None:
            fresh = not os.path.exists(self.path) or os.path.getsize(self.path) == 0
            self._file = open(self.path, "a", newline="", encoding="utf-8")
            self._fields = list(row)
            self._writer = csv.DictWriter(self._file, fieldnames=self._fields, extrasaction="ignore")
            if fresh:
                self._writer.writeheader()
        self._writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class MetricsLogger(RunnerItem):
    """CSV (and TensorBoard) logs of costs and metrics; see the module docstring.

    Args:
        directory: where the logs go (created in ``initialize``, on rank 0).
        csv: write ``passes.csv`` (and, with ``every_n_batches``, ``batches.csv``).
        tensorboard: also write TensorBoard event files (needs the ``tensorboard``
            package, checked in ``initialize``).
        every_n_batches: also log every ``n``-th batch (by global step); a positive int,
            or ``None``: passes only.

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
    >>> import csv, os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> with trainer(MetricsLogger(d)) as runner:
    ...     _ = runner.run(2)
    >>> rows = list(csv.DictReader(open(os.path.join(d, "passes.csv"))))
    >>> os.listdir(d), [(r["pass_id"], r["global_step"], r["samples_seen"]) for r in rows]
    (['passes.csv'], [('0', '2', '4'), ('1', '4', '8')])
    """

    def __init__(self, directory: str | os.PathLike, *, csv: bool = True, tensorboard: bool = False,
                 every_n_batches: int | None = None) -> None:
        self.directory = os.fspath(directory)
        self.csv = bool(csv)
        self.tensorboard = bool(tensorboard)
        self.every_n_batches = optional_positive_int("every_n_batches", every_n_batches)
        self.history: list[dict[str, Any]] = []
        self._passes: _CsvLog | None = None
        self._batches: _CsvLog | None = None
        self._tb: Any = None

    def initialize(self, context: RunnerContext, next_callback: Any) -> None:
        if getattr(context, "rank", 0) == 0:
            os.makedirs(self.directory, exist_ok=True)
            if self.csv:
                self._passes = _CsvLog(os.path.join(self.directory, "passes.csv"))
                if self.every_n_batches:
                    self._batches = _CsvLog(os.path.join(self.directory, "batches.csv"))
            if self.tensorboard:
                require("tensorboard", extra="tensorboard")
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(log_dir=self.directory)
        next_callback(context)

    def on_batch_end(self, next_callback: Any) -> bool:
        stop = next_callback()
        ctx = self.context
        step = ctx.global_step + 1  # inside the counter: this batch is not counted yet
        if self.every_n_batches and step % self.every_n_batches == 0 and getattr(ctx, "rank", 0) == 0:
            metrics = getattr(ctx, "metrics", {})
            if self._batches is not None:
                self._batches.write({"pass_id": ctx.pass_id, "batch_id": ctx.batch_id,
                                     "global_step": step, "cost": ctx.cost, **metrics})
            if self._tb is not None:
                self._tb.add_scalar("train/cost", ctx.cost, step)
                for k, v in metrics.items():
                    self._tb.add_scalar(f"train/{k}", v, step)
        return stop

    def on_pass_end(self, next_callback: Any) -> None:
        next_callback()
        ctx = self.context
        test = pass_test_result(ctx, ctx.pass_id)
        row: dict[str, Any] = {"pass_id": ctx.pass_id, "global_step": ctx.global_step,
                               "samples_seen": ctx.samples_seen,
                               "train_cost": getattr(ctx, "pass_cost", None)}
        for k, v in getattr(ctx, "pass_metrics", {}).items():
            row[f"train_{k}"] = v
        row["test_cost"] = None if test is None else test.cost
        for k in ctx.network.metrics:
            row[f"test_{k}"] = None if test is None else test.metrics.get(k)
        self.history.append(row)
        if getattr(ctx, "rank", 0) != 0:
            return
        if self._passes is not None:
            self._passes.write(row)
        if self._tb is not None:
            for k, v in row.items():
                if k.startswith(("train_", "test_")) and v is not None:
                    self._tb.add_scalar(f"pass/{k}", v, ctx.global_step)
            self._tb.flush()

    def finalize(self, next_callback: Any) -> None:
        for log in (self._passes, self._batches):
            if log is not None:
                log.close()
        if self._tb is not None:
            self._tb.close()
            self._tb = None
        next_callback()
