"""One progress display for feedline's long-running loops (the Runner, the CLI).

:class:`ProgressBar` draws one line that it redraws in place:

* with ``tqdm`` installed (``backend="auto"`` or ``"tqdm"``), a tqdm bar —
  ``desc: 45%|####5     | 9/20 [00:01<00:01, 7.9it/s, cost 0.2345]``;
* otherwise (``backend="plain"``) a plain line —
  ``desc [#############.................] 9/20  cost 0.2345  7.9 it/s`` — redrawn at
  most every ``refresh`` seconds;
* with ``total=None`` (not known yet), the count and the rate without a bar.

``update(means={"cost": c}, weight=n)`` shows running means: the mean of every value
passed so far, each update weighted by ``weight`` (a batch's samples), not the last
batch's value.
* nothing at all when the stream is not a terminal (a file, a pipe, a test's captured
  output), unless ``dynamic=True``: logs stay free of redraw characters.

``close()`` erases the line, so a summary printed afterwards starts on a clean line.

>>> import io
>>> out = io.StringIO()
>>> with ProgressBar(total=3, desc="pass 0", stream=out) as bar:
...     bar.update(postfix="cost 0.5")
>>> out.getvalue()  # not a terminal: nothing drawn
''
>>> out = io.StringIO()
>>> with ProgressBar(total=2, desc="pass 0", stream=out, dynamic=True, backend="plain",
...                  refresh=0, width=4) as bar:
...     bar.update(); bar.update(postfix="cost 0.5")
>>> out.getvalue().split("\\r")[2].split("  ")[:2]
['pass 0 [####] 2/2', 'cost 0.5']
"""

from __future__ import annotations

import importlib.util
import sys
import time
from typing import Any, TextIO

from feedline._internal.validate import one_of, positive_int

__all__ = ["ProgressBar", "BACKENDS", "is_terminal"]

BACKENDS = ("auto", "tqdm", "plain")


def is_terminal(stream: Any) -> bool:
    """Whether ``stream`` is an interactive terminal (``isatty()`` true).

    >>> import io
    >>> is_terminal(io.StringIO())
    False
    """
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed file
        return False


class ProgressBar:
    """A progress line on ``stream`` (default ``sys.stderr``); see the module docstring.

    ``total``: the expected count (``None``: unknown, no bar, only the count);
    ``dynamic``: draw (default: when ``stream`` is a terminal); ``backend``: ``"auto"``
    (tqdm when installed, else plain), ``"tqdm"`` (``ImportError`` naming
    ``feedline[progress]`` without it) or ``"plain"``; ``width``: the plain bar's
    characters; ``refresh``: the plain line's minimum seconds between redraws.
    """

    def __init__(self, *, total: int | None = None, desc: str = "", stream: TextIO | None = None,
                 dynamic: bool | None = None, backend: str = "auto", width: int = 30,
                 refresh: float = 0.2) -> None:
        one_of("backend", backend, BACKENDS)
        self.total = None if total is None or total == 0 else positive_int("total", total)
        self.desc = str(desc)
        self.stream = stream if stream is not None else sys.stderr
        self.width = positive_int("width", width)
        if isinstance(refresh, bool) or not isinstance(refresh, (int, float)) or refresh < 0:
            raise ValueError(f"`refresh` must be a non-negative number, got {refresh!r}")
        self.refresh = float(refresh)
        self.active = is_terminal(self.stream) if dynamic is None else bool(dynamic)
        if backend == "auto":
            backend = "tqdm" if importlib.util.find_spec("tqdm") is not None else "plain"
        self.backend = backend
        self.count = 0
        self._sums: dict[str, tuple[float, float]] = {}
        self._start = time.perf_counter()
        self._last_draw = float("-inf")
        self._tqdm: Any = None
        if self.active and backend == "tqdm":
            from feedline._internal.optional import require

            tqdm = require("tqdm", extra="progress")
            self._tqdm = tqdm.tqdm(total=self.total, desc=self.desc, file=self.stream,
                                   leave=False, dynamic_ncols=True, mininterval=self.refresh)

    def update(self, n: int = 1, *, postfix: str = "", means: dict[str, float] | None = None,
               weight: float = 1.0) -> None:
        """Count ``n`` more steps and show the running means of ``means`` (each value
        weighted by ``weight``, e.g. the batch's sample count), then ``postfix``.

        >>> bar = ProgressBar(total=2)
        >>> bar.update(means={"cost": 1.0}, weight=3); bar.update(means={"cost": 0.0}, weight=1)
        >>> bar.means(), bar.postfix()
        ({'cost': 0.75}, 'cost 0.7500')
        """
        self.count += n
        if means:
            w = float(weight)
            for key, value in means.items():
                if value is None:
                    continue
                total, weights = self._sums.get(key, (0.0, 0.0))
                self._sums[key] = (total + float(value) * w, weights + w)
        if self._sums:
            postfix = f"{self.postfix()}  {postfix}" if postfix else self.postfix()
        if not self.active:
            return
        if self._tqdm is not None:
            if postfix:
                self._tqdm.set_postfix_str(postfix, refresh=False)
            self._tqdm.update(n)
            return
        now = time.perf_counter()
        if now - self._last_draw >= self.refresh or self.count == self.total:
            self._last_draw = now
            self._draw(now, postfix)

    def means(self) -> dict[str, float]:
        """The running means of the values passed to :meth:`update` as ``means``."""
        return {k: total / weights for k, (total, weights) in self._sums.items() if weights}

    def postfix(self) -> str:
        """The running means as shown on the line: ``cost 0.2345  accuracy 0.9375``."""
        return "  ".join(f"{k} {v:.4f}" for k, v in self.means().items())

    def _draw(self, now: float, postfix: str) -> None:
        if self.total:
            filled = min(self.width, self.width * self.count // self.total)
            bar = f"[{'#' * filled}{'.' * (self.width - filled)}] {self.count}/{self.total}"
        else:
            bar = f"{self.count}"
        rate = self.count / max(now - self._start, 1e-9)
        parts = [f"{self.desc} {bar}" if self.desc else bar]
        if postfix:
            parts.append(postfix)
        parts.append(f"{rate:,.1f} it/s")
        self.stream.write("\r" + "  ".join(parts) + "\x1b[K")
        self.stream.flush()

    def close(self) -> None:
        """Erase the line (idempotent)."""
        if self._tqdm is not None:
            self._tqdm.close()
            self._tqdm = None
        elif self.active and self._last_draw != float("-inf"):
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._last_draw = float("-inf")

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
