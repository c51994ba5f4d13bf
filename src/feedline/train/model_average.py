"""Model averaging: a running average of the parameters, swapped in for testing.

:class:`ModelAverager` implements the window rule of
:class:`~feedline.train.config.ModelAverage` over a list of parameters. The updater
calls :meth:`~ModelAverager.accumulate` after every optimizer step; the tester calls
:meth:`~ModelAverager.apply` before a test pass (the parameters now hold the average,
the trained values are kept aside) and :meth:`~ModelAverager.restore` after it.

>>> import torch
>>> from feedline.train.config import ModelAverage
>>> w = torch.nn.Parameter(torch.tensor([0.0]))
>>> avg = ModelAverager([w], ModelAverage(average_window=1.0))
>>> for value in (1.0, 2.0, 3.0):
...     with torch.no_grad():
...         _ = w.fill_(value)
...     avg.accumulate()
>>> avg.apply(); w.item()          # the average of the values in the window
2.0
>>> avg.restore(); w.item()        # the trained value again
3.0
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from feedline.exceptions import CheckpointError
from feedline.train.config import ModelAverage

__all__ = ["ModelAverager"]


class ModelAverager:
    """Keeps the running sums for ``params`` under ``config``; see the module docstring.

    Args:
        params: the parameters to average (their sums are allocated like them, on their
            devices).
        config: the window rule.

    Counters, field by field:

    * ``num_updates``: accumulate calls so far (the ``t`` of the window rule);
    * ``current_count``: updates in the running sum;
    * ``previous_count``: updates in the previous (closed) sum;
    * ``applied``: True between :meth:`apply` and :meth:`restore`.

    >>> import torch
    >>> from feedline.train.config import ModelAverage
    >>> w = torch.nn.Parameter(torch.tensor([0.0]))
    >>> avg = ModelAverager([w], ModelAverage(average_window=0.5, min_average_window=2))
    >>> for value in (1.0, 2.0, 3.0, 4.0, 5.0):
    ...     with torch.no_grad(): _ = w.fill_(value)
    ...     avg.accumulate()
    >>> avg.num_updates, avg.previous_count, avg.current_count   # previous: 3, 4; running: 5
    (5, 2, 1)
    >>> avg.apply(); w.item(), avg.applied        # mean of 3, 4, 5
    (4.0, True)
    >>> avg.restore(); w.item()
    5.0
    """

    def __init__(self, params: Sequence[torch.Tensor], config: ModelAverage) -> None:
        self.params = list(params)
        self.config = config
        self.num_updates = 0
        self.current_count = 0
        self.previous_count = 0
        self._current = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]
        self._previous = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]
        self._backup: list[torch.Tensor] | None = None

    @property
    def applied(self) -> bool:
        return self._backup is not None

    @torch.no_grad()
    def accumulate(self) -> None:
        """Add the current parameters (after an update) to the running sum."""
        if self.applied:
            raise RuntimeError("accumulate() while the average is applied; call restore() first")
        self.num_updates += 1
        torch._foreach_add_(self._current, [p.detach() for p in self.params])
        self.current_count += 1
        if self.current_count >= self.config.window(self.num_updates):
            self._previous, self._current = self._current, self._previous
            torch._foreach_zero_(self._current)
            self.previous_count, self.current_count = self.current_count, 0

    @torch.no_grad()
    def averaged(self) -> Sequence[torch.Tensor]:
        """New tensors holding the averaged parameters (the parameters themselves before
        the first update)."""
        n = self.previous_count + self.current_count
        if n == 0:
            return [p.detach().clone() for p in self.params]
        total = torch._foreach_add(self._previous, self._current)
        torch._foreach_div_(total, float(n))
        return total

    @torch.no_grad()
    def apply(self) -> None:
        """Put the averaged values into the parameters, keeping the trained ones aside."""
        if self.applied:
            raise RuntimeError("the model average is already applied")
        averaged = self.averaged()
        self._backup = [p.detach().clone() for p in self.params]
        for p, a in zip(self.params, averaged):
            p.copy_(a)

    @torch.no_grad()
    def restore(self) -> None:
        """Put the trained values back (no-op when not applied)."""
        if self._backup is None:
            return
        for p, b in zip(self.params, self._backup):
            p.copy_(b)
        self._backup = None

    def state_dict(self) -> dict[str, Any]:
        return {
            "num_updates": self.num_updates,
            "current_count": self.current_count,
            "previous_count": self.previous_count,
            "current": [t.clone() for t in self._current],
            "previous": [t.clone() for t in self._previous],
        }

    @torch.no_grad()
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (and drop an applied average).

        Args:
            state: the counters and sums of an averager over parameters of the same
                number and shapes; a missing entry or a mismatch raises
                :class:`~feedline.exceptions.CheckpointError`.
        """
        for key in ("num_updates", "current_count", "previous_count", "current", "previous"):
            if key not in state:
                raise CheckpointError(f"model average state lacks {key!r}")
        for key in ("current", "previous"):
            saved = state[key]
            if len(saved) != len(self.params):
                raise CheckpointError(
                    f"model average state holds {len(saved)} tensors, the model has "
                    f"{len(self.params)} trainable parameters"
                )
            for i, (t, p) in enumerate(zip(saved, self.params)):
                if tuple(t.shape) != tuple(p.shape):
                    raise CheckpointError(
                        f"model average tensor {i} has shape {tuple(t.shape)}, parameter {i} "
                        f"has shape {tuple(p.shape)}"
                    )
        for dst, src in zip(self._current, state["current"]):
            dst.copy_(src)
        for dst, src in zip(self._previous, state["previous"]):
            dst.copy_(src)
        self.num_updates = int(state["num_updates"])
        self.current_count = int(state["current_count"])
        self.previous_count = int(state["previous_count"])
        self._backup = None
