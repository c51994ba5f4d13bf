"""``Dataset.rejection_resample``: drop items so that the classes follow a target
distribution (tf.data's ``rejection_resample``); yields ``(class, item)`` pairs as
tf.data does.

``class_func(item)`` gives the item's class, an int in ``0 .. len(target_dist) - 1``.
With the class distribution of the input ``p`` (``initial_dist``, or when it is not
given an estimate from the classes seen so far, each count starting at 10 as tf.data's
estimate does) and the target ``t``, an item of class ``i`` is kept with probability
``r_i / max_j r_j`` where ``r_i = t_i / p_i``, which makes the kept items follow
``t``. tf.data mixes in a second, unfiltered reading of the input to keep more items;
this stage reads the input once and only filters, so it keeps fewer items but never
repeats one. The random draws are feedline's, counter-based: the same ``seed`` and
epoch keep the same items.

State: the input's state, the number of draws and the class counts.

>>> ds = Dataset.range(1000).rejection_resample(lambda x: int(x % 4 == 0), [0.5, 0.5],
...                                             initial_dist=[0.75, 0.25], seed=0)
>>> pairs = ds.to_list()
>>> pairs[0][1] % 4 == 0 if pairs[0][0] else pairs[0][1] % 4 != 0
True
>>> sum(c for c, _ in pairs) == 250                    # every class-1 item is kept
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from feedline._internal.state import state_int, state_list
from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.dataset.shuffle import CounterRandom, resolve_seed
from feedline.exceptions import StateError

__all__ = ["RejectionResampleDataset"]

_SMOOTHING = 10
_TINY = float(np.finfo(np.float32).tiny)


def _distribution(name: str, values: Sequence[float]) -> np.ndarray:
    dist = np.asarray(values, dtype=np.float64)
    if dist.ndim != 1 or dist.size == 0 or not np.all(np.isfinite(dist)) or np.any(dist < 0) \
            or dist.sum() <= 0:
        raise ValueError(f"`{name}` must be a non-empty list of non-negative numbers with a "
                         f"positive sum, got {values!r}")
    return dist / dist.sum()


def acceptance(initial: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Per-class probability of keeping an item.

    >>> acceptance(np.array([0.75, 0.25]), np.array([0.5, 0.5])).round(3).tolist()
    [0.333, 1.0]
    """
    ratio = target / (initial + _TINY)
    return ratio / ratio.max()


class RejectionResampleDataset(Dataset):
    """``(class, item)`` pairs resampled to ``target_dist``; see the module docstring.

    Args:
        parent: the dataset read.
        class_func: an item's class, an int in ``0 .. len(target_dist) - 1``.
        target_dist: the wanted class distribution: non-negative numbers with a
            positive sum, normalised (else ``ValueError``).
        initial_dist: the input's class distribution, as ``target_dist`` and of the same
            length (else ``ValueError``); ``None`` estimates it from the classes seen.
        seed: the seed of the keep/drop draws (``None``: a fresh one drawn now).

    >>> ds = Dataset.range(4).rejection_resample(lambda x: x % 2, [0.5, 0.5], seed=1)
    >>> type(ds).__name__, all(c == x % 2 for c, x in ds.to_list())
    ('RejectionResampleDataset', True)
    """

    def __init__(self, parent: Dataset, class_func: Callable[[Any], int],
                 target_dist: Sequence[float], initial_dist: Sequence[float] | None,
                 seed: int | None) -> None:
        super().__init__()
        self._parents = (parent,)
        self._class_func = class_func
        self._target = _distribution("target_dist", target_dist)
        self._initial = None if initial_dist is None else _distribution("initial_dist",
                                                                         initial_dist)
        if self._initial is not None and self._initial.size != self._target.size:
            raise ValueError(f"`initial_dist` has {self._initial.size} classes, "
                             f"`target_dist` {self._target.size}")
        self._seed = resolve_seed(seed)

    @property
    def name(self) -> str:
        return "rejection_resample"

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return _ResampleIterator(self, self._parents[0]._build(ctx), ctx.epoch)


class _ResampleIterator(DatasetIterator):
    def __init__(self, owner: RejectionResampleDataset, parent: DatasetIterator,
                 epoch: int) -> None:
        self._owner = owner
        self._parent = parent
        self._random = CounterRandom(owner._seed, epoch)
        self._draws = 0
        n = owner._target.size
        self._counts = np.full(n, _SMOOTHING, dtype=np.int64)
        self._fixed = None if owner._initial is None else acceptance(owner._initial,
                                                                     owner._target)

    def __next__(self) -> tuple[int, Any]:
        owner = self._owner
        while True:
            item = next(self._parent)
            cls = owner._class_func(item)
            try:
                cls = int(cls)
                if cls < 0:
                    raise IndexError
                if self._fixed is not None:
                    keep = self._fixed[cls]
                else:
                    self._counts[cls] += 1
                    keep = acceptance(self._counts / self._counts.sum(), owner._target)[cls]
            except (IndexError, TypeError, ValueError):
                raise ValueError(f"rejection_resample: class_func gave {cls!r}, not a class "
                                 f"in 0..{owner._target.size - 1}") from None
            draw = self._random.u(self._draws)
            self._draws += 1
            if draw < keep:
                return cls, item

    def get_state(self) -> dict[str, Any]:
        return {"type": "rejection_resample", "parent": self._parent.get_state(),
                "draws": self._draws, "counts": self._counts.tolist()}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "rejection_resample", ("parent", "draws", "counts"))
        if len(state["counts"]) != self._counts.size:
            raise StateError(f"rejection_resample state has {len(state['counts'])} classes, "
                             f"this stage {self._counts.size}")
        counts = state_list(state, "counts", "rejection_resample")
        for k, count in enumerate(counts):
            state_int({f"counts[{k}]": count}, f"counts[{k}]", "rejection_resample")
        draws = state_int(state, "draws", "rejection_resample")
        self._parent.set_state(state["parent"])
        self._draws = draws
        self._counts = np.asarray(counts, dtype=np.int64)

    def close(self) -> None:
        self._parent.close()
