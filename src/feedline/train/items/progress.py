"""``Progress``: a progress bar per pass and a summary line at its end.

On a terminal it redraws one line at most every ``refresh`` seconds::

    pass 2 [##########..........] 23/45  cost 0.2345  accuracy 0.9375  3,512 samples/s

and at the end of the pass (after the inner items, so the test result is known) prints::

    pass 2: 45 batches, 1,437 samples in 0.41 s (3,512 samples/s)  cost 0.1234  accuracy 0.9680  | test cost 0.1011  accuracy 0.9722

Elsewhere (a file, a pipe, a test's captured output) only the end-of-pass lines are
written. The total comes from ``context.batches_per_pass`` when known. Under data
parallel only rank 0 prints.

Counters: ``passes`` — one dict per finished pass: ``pass_id``, ``batches``,
``samples``, ``seconds`` (from the start of the pass to the end of its last batch: the
training, without a test run at the end), ``samples_per_second``, ``cost``, ``metrics``, ``test_cost``,
``test_metrics`` (the last two ``None`` without a test).

>>> import numpy as np, torch
>>> from feedline import Dataset, data_type
>>> from feedline.train import Runner, SGD, network
>>> from feedline.train.items import *
>>> x = np.eye(4, dtype=np.float32)[[0, 1, 2, 3] * 4]; y = np.array([0, 1, 0, 1] * 4)
>>> net = network(inputs={"x": data_type.dense_vector(4), "label": data_type.integer_value(2)},
...               learning_rate=0.5, learning_method=SGD(), batch_size=4)(torch.nn.Linear(4, 2))
>>> data = Dataset.from_arrays(x, y)
>>> import io
>>> out = io.StringIO()
>>> with Runner([CreateModel(net), LocalUpdater(), Counter(), DataProvider(data),
...              Progress(stream=out), TrainOps()]) as runner:
...     _ = runner.run(1)
>>> out.getvalue().startswith("pass 0: 4 batches, 16 samples in ")
True
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from feedline._internal.validate import check_float
from feedline.train.runner import RunnerItem

__all__ = ["Progress"]


def _fmt_metrics(cost: float | None, metrics: dict[str, float]) -> str:
    parts = [] if cost is None else [f"cost {cost:.4f}"]
    parts += [f"{k} {v:.4f}" for k, v in metrics.items()]
    return "  ".join(parts)


class Progress(RunnerItem):
    """Progress bar and per-pass summary; see the module docstring.

    ``stream``: where to write (default ``sys.stderr``); ``dynamic``: redraw a bar
    (default: when ``stream`` is a terminal); ``width``: bar width in characters.
    """

    def __init__(self, *, stream: TextIO | None = None, dynamic: bool | None = None,
                 width: int = 30, refresh: float = 0.2) -> None:
        self.stream = stream
        self.dynamic = dynamic
        self.width = int(width)
        self.refresh = check_float("refresh", refresh)
        self.passes: list[dict[str, Any]] = []

    def _out(self) -> TextIO:
        return self.stream if self.stream is not None else sys.stderr

    def _active(self) -> bool:
        return getattr(self.context, "rank", 0) == 0

    def on_pass_begin(self, next_callback: Any) -> None:
        self._start = time.perf_counter()
        self._last_batch = self._start
        self._last_draw = 0.0
        self._batches = 0
        self._samples = 0
        dyn = self.dynamic
        if dyn is None:
            isatty = getattr(self._out(), "isatty", None)
            dyn = bool(isatty and isatty())
        self._dyn = dyn and self._active()
        next_callback()

    def on_batch_end(self, next_callback: Any) -> bool:
        stop = next_callback()
        ctx = self.context
        self._batches += 1
        self._samples += int(getattr(ctx, "batch_size", 0) or 0)
        now = self._last_batch = time.perf_counter()
        if self._dyn:
            if now - self._last_draw >= self.refresh:
                self._last_draw = now
                self._draw(now)
        return stop

    def _draw(self, now: float) -> None:
        ctx = self.context
        total = getattr(ctx, "batches_per_pass", None)
        done = getattr(ctx, "batch_id", self._batches - 1) + 1
        if total:
            filled = min(self.width, int(self.width * done / total))
            bar = f"[{'#' * filled}{'.' * (self.width - filled)}] {done}/{total}"
        else:
            bar = f"{done} batches"
        rate = self._samples / max(now - self._start, 1e-9)
        line = (f"pass {getattr(ctx, 'pass_id', len(self.passes))} {bar}  "
                f"{_fmt_metrics(getattr(ctx, 'cost', None), getattr(ctx, 'metrics', {}))}  "
                f"{rate:,.0f} samples/s")
        out = self._out()
        out.write("\r" + line + "\x1b[K")
        out.flush()

    def on_pass_end(self, next_callback: Any) -> None:
        next_callback()
        ctx = self.context
        seconds = self._last_batch - self._start  # the batches only, not a test at the end
        test = getattr(ctx, "test_result", None)
        pass_id = getattr(ctx, "pass_id", len(self.passes))
        if test is not None and test.pass_id != pass_id:
            test = None
        record = {
            "pass_id": pass_id,
            "batches": self._batches,
            "samples": self._samples,
            "seconds": seconds,
            "samples_per_second": self._samples / seconds if seconds > 0 else float("inf"),
            "cost": getattr(ctx, "pass_cost", None),
            "metrics": dict(getattr(ctx, "pass_metrics", {})),
            "test_cost": None if test is None else test.cost,
            "test_metrics": None if test is None else dict(test.metrics),
        }
        self.passes.append(record)
        if not self._active():
            return
        line = (f"pass {pass_id}: {self._batches:,} batches, {self._samples:,} samples in "
                f"{seconds:.2f} s ({record['samples_per_second']:,.0f} samples/s)  "
                f"{_fmt_metrics(record['cost'], record['metrics'])}")
        if test is not None:
            line += f"  | test {_fmt_metrics(test.cost, test.metrics)}"
        out = self._out()
        out.write(("\r\x1b[K" if self._dyn else "") + line + "\n")
        out.flush()
