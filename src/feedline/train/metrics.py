"""Sample-weighted sums of cost and metrics, reducible across ranks.

A batch's cost and metrics are batch means; a pass's are the means over all its
samples, i.e. the batch means weighted by batch size:

>>> sums = MetricSums()
>>> sums.add(2, cost=1.0, metrics={"accuracy": 0.5})
>>> sums.add(6, cost=3.0, metrics={"accuracy": 1.0})
>>> sums.means()
(2.5, {'accuracy': 0.875})
>>> sums.samples
8
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from feedline.exceptions import CheckpointError
from feedline.train.distributed import all_reduce_sum, is_distributed

__all__ = ["MetricSums", "reduce_batch"]


def reduce_batch(batch_size: int, cost: float, metrics: Mapping[str, float], device: Any = None
                 ) -> tuple[int, float, dict[str, float]]:
    """The global batch's size, mean cost and mean metrics over all ranks (the inputs
    unchanged when not distributed).

    Args:
        batch_size: this rank's samples in the batch (the weight of its means).
        cost: this rank's mean cost of the batch.
        metrics: this rank's ``{name: mean}`` of the batch; every rank must pass the
            same names.
        device: where the sums are reduced (see :func:`~feedline.train.distributed.all_reduce_sum`:
            a CUDA device under NCCL; ``None``: the CPU).

    >>> reduce_batch(4, 0.5, {"accuracy": 0.75})     # not distributed: unchanged
    (4, 0.5, {'accuracy': 0.75})
    """
    if not is_distributed():
        return batch_size, cost, dict(metrics)
    names = list(metrics)
    sums = all_reduce_sum([batch_size, cost * batch_size, *(metrics[n] * batch_size for n in names)],
                          device)
    n = sums[0]
    return int(n), sums[1] / n, {name: v / n for name, v in zip(names, sums[2:])}


class MetricSums:
    """Running sums: ``samples``, ``cost`` x samples, and each metric x samples.

    >>> sums = MetricSums()
    >>> sums.add(2, cost=1.0, metrics={"accuracy": 0.5})
    >>> sums.add(2, cost=3.0, metrics={"accuracy": 1.0})
    >>> sums.means()                                 # sample-weighted means
    (2.0, {'accuracy': 0.75})
    >>> sums.state_dict()
    {'samples': 4, 'cost': 8.0, 'metrics': {'accuracy': 3.0}}
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.samples = 0
        self.cost = 0.0
        self.metrics: dict[str, float] = {}

    def add(self, batch_size: int, *, cost: float, metrics: Mapping[str, float]) -> None:
        """Add one batch's mean ``cost`` and ``metrics`` over ``batch_size`` samples.

        Args:
            batch_size: samples in the batch (the weight of its means).
            cost: the batch's mean cost.
            metrics: ``{name: mean}`` of the batch; a name not seen before starts at 0.
        """
        self.samples += batch_size
        self.cost += cost * batch_size
        for name, value in metrics.items():
            self.metrics[name] = self.metrics.get(name, 0.0) + value * batch_size

    def means(self) -> tuple[float, dict[str, float]]:
        """``(mean cost, {name: mean})`` over the samples added (NaN when none)."""
        n = self.samples
        if n == 0:
            return float("nan"), {name: float("nan") for name in self.metrics}
        return self.cost / n, {name: v / n for name, v in self.metrics.items()}

    def all_reduce(self, names: list[str] | None = None, device: Any = None) -> None:
        """Replace the sums by their totals over all ranks (no-op when not distributed).

        Args:
            names: the metrics to reduce, the same list on every rank (a rank without
                samples has none yet); ``None``: this rank's metric names.
            device: where the sums are reduced (a CUDA device under NCCL; ``None``: the
                CPU).
        """
        if not is_distributed():
            return
        names = list(self.metrics) if names is None else list(names)
        total = all_reduce_sum([self.samples, self.cost, *(self.metrics.get(n, 0.0) for n in names)],
                               device)
        self.samples = int(total[0])
        self.cost = total[1]
        self.metrics = dict(zip(names, total[2:]))

    def state_dict(self) -> dict[str, Any]:
        return {"samples": self.samples, "cost": self.cost, "metrics": dict(self.metrics)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned.

        Args:
            state: ``{"samples", "cost", "metrics"}``; anything else raises
                :class:`~feedline.exceptions.CheckpointError`.
        """
        try:
            self.samples = int(state["samples"])
            self.cost = float(state["cost"])
            self.metrics = {str(k): float(v) for k, v in state["metrics"].items()}
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise CheckpointError(f"the metric sums do not restore: {exc!r}") from None
