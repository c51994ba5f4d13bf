"""``Progress``: a progress bar per pass and a summary line at its end.

On a terminal it redraws one progress line (:class:`feedline._internal.progress.ProgressBar`:
a tqdm bar when tqdm is installed, else a plain line redrawn at most every ``refresh``
seconds)::

    pass 2:  51%|#####     | 23/45 [00:00<00:00, 56.1it/s, cost 0.2345  accuracy 0.9375]
    pass 2 [##########..........] 23/45  cost 0.2345  accuracy 0.9375  56.1 it/s

where cost and metrics are the pass's running means so far (weighted by the batches'
sizes), not the last batch's values; at the end of the pass (after the inner items, so
the test result is known) it prints::

    pass 2: 45 batches, 1,437 samples in 0.41 s (3,512 samples/s)  cost 0.1234  accuracy 0.9680  | test cost 0.1011  accuracy 0.9722

Elsewhere (a file, a pipe, a test's captured output) only the end-of-pass lines are
written. The total comes from ``context.batches_per_pass`` when known (a random-access
pipeline; a stream's from the end of its first pass on), else from ``total``, the
batches per pass the caller expects (a stream's first pass has no total without it).
Under data parallel only rank 0 prints.

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

from feedline._internal.progress import BACKENDS, ProgressBar, is_terminal
from feedline._internal.validate import check_float, one_of, optional_positive_int
from feedline.train.items._pass import pass_test_result
from feedline.train.runner import RunnerItem

__all__ = ["Progress"]


def _fmt_metrics(cost: float | None, metrics: dict[str, float]) -> str:
    parts = [] if cost is None else [f"cost {cost:.4f}"]
    parts += [f"{k} {v:.4f}" for k, v in metrics.items()]
    return "  ".join(parts)


class Progress(RunnerItem):
    """Progress bar and per-pass summary; see the module docstring.

    Args:
        stream: where to write (``None``: ``sys.stderr``, looked up at each pass).
        dynamic: redraw a bar during the pass; ``None``: when ``stream`` is a terminal.
        width: the plain bar's width in characters.
        refresh: the minimum seconds between redraws of the bar; a number >= 0.
        backend: ``"auto"`` (tqdm when installed), ``"tqdm"`` or ``"plain"`` (else
            ``ValueError``).
        total: batches per pass to show while the data cannot tell; a positive int, or
            ``None``: none.

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
    >>> import io
    >>> out = io.StringIO()
    >>> with trainer(Progress(stream=out, backend="plain")) as runner:
    ...     _ = runner.run(1)
    >>> out.getvalue().split(" in ")[0]
    'pass 0: 2 batches, 4 samples'
    """

    def __init__(self, *, stream: TextIO | None = None, dynamic: bool | None = None,
                 width: int = 30, refresh: float = 0.2, backend: str = "auto",
                 total: int | None = None) -> None:
        self.stream = stream
        self.total = optional_positive_int("total", total)
        self.dynamic = dynamic
        self.width = int(width)
        self.refresh = check_float("refresh", refresh)
        self.backend = one_of("backend", backend, BACKENDS)
        self._bar: ProgressBar | None = None
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
            dyn = is_terminal(self._out())
        self._dyn = dyn and self._active()
        if self._dyn:
            ctx = self.context
            self._bar = ProgressBar(
                total=getattr(ctx, "batches_per_pass", None) or self.total,
                desc=f"pass {getattr(ctx, 'pass_id', len(self.passes))}", stream=self._out(),
                dynamic=True, backend=self.backend, width=self.width, refresh=self.refresh)
        next_callback()

    def on_batch_end(self, next_callback: Any) -> bool:
        stop = next_callback()
        ctx = self.context
        self._batches += 1
        self._samples += int(getattr(ctx, "batch_size", 0) or 0)
        self._last_batch = time.perf_counter()
        if self._bar is not None:
            cost = getattr(ctx, "cost", None)
            means = {} if cost is None else {"cost": cost}
            means.update(getattr(ctx, "metrics", {}))
            self._bar.update(means=means, weight=int(getattr(ctx, "batch_size", 0) or 1))
        return stop

    def on_pass_end(self, next_callback: Any) -> None:
        next_callback()
        ctx = self.context
        seconds = self._last_batch - self._start  # the batches only, not a test at the end
        pass_id = getattr(ctx, "pass_id", len(self.passes))
        test = pass_test_result(ctx, pass_id)
        record: dict[str, Any] = {
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
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        out = self._out()
        out.write(line + "\n")
        out.flush()

    def finalize(self, next_callback: Any) -> None:
        if self._bar is not None:  # a pass that ended by an error: erase its line
            self._bar.close()
            self._bar = None
        next_callback()
