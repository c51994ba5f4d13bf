"""Ranks that end an epoch together: one small all-reduce per step.

A split of a *stream* (a byte-range :class:`~feedline.io.input_split.InputSplit`, files
dealt to ranks, a stream ``shard``) gives the ranks parts of different lengths: one rank
runs out of batches while the others still have some, and under
``DistributedDataParallel`` it leaves the others waiting in their gradient all-reduce
(a hang, or "Connection closed by peer"). A :class:`RankJoin` makes the ranks agree at
every step whether they all still have a batch — each rank adds ``1`` if it has one to a
two-number ``all_reduce`` (the second number counts ranks that have nothing to repeat)
— and end the epoch together, by ``policy``:

* ``"pad"`` (default): while any rank has a batch every rank makes a step; a rank whose
  part has ended repeats its last batch, flagged as padding (``padding`` is true for that
  step). Every record is delivered once per epoch, plus the counted repeats. A rank whose
  part is empty has nothing to repeat: every rank raises the same ``RuntimeError``.
* ``"drop_remainder"``: the epoch ends for every rank at the first step at which some
  rank has no batch; the batches the other ranks still had are read and dropped (so the
  counts are exact and the next epoch starts from the beginning).

Every rank makes the same number of steps. Per epoch, :meth:`RankJoin.stats` counts
``steps``, ``batches`` (this rank's own), ``padded_batches``/``padded_samples`` and
``dropped_batches``/``dropped_samples``. Samples are counted with ``samples(batch)``
(default :func:`count_samples`: the first dimension of the first tensor or array).

Without an initialised ``torch.distributed`` group of more than one process (or with a
``group`` of one) nothing is exchanged: the batches pass through unchanged.

Use :func:`join` around a ``DataLoader`` (its iterator runs in the main process, where
the process group lives, also with ``num_workers > 0``); the
:class:`~feedline.pytorch.lightning.FeedlineDataModule` and the Runner's
:class:`~feedline.train.items.DataProvider` join their stream pipelines themselves.

>>> loader = join([[1, 2], [3]])       # one process: unchanged
>>> [b for b in loader], loader.stats()["steps"]
([[1, 2], [3]], 2)
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from feedline._internal.optional import require
from feedline._internal.validate import callable_arg, one_of

__all__ = ["POLICIES", "RankJoin", "Joined", "join", "joined", "count_samples", "END"]

if TYPE_CHECKING:
    import torch
else:
    torch = require("torch", extra="torch")

POLICIES = ("pad", "drop_remainder")

# The last all-reduced tensors, kept alive from Python: gloo's worker thread must never
# hold the last reference (see feedline.train.distributed.leave_group).
_RECENT_TENSORS: collections.deque = collections.deque(maxlen=8)

#: what :meth:`RankJoin.step` is given when this rank's part has ended
END: Any = type("End", (), {"__repr__": lambda self: "<end>"})()


def count_samples(batch: Any) -> int:
    """Samples in ``batch``: the first dimension of a tensor or array (1 for a scalar),
    the length of a list or tuple of scalars, else the count of the first value of a
    dict, list or tuple (a collated batch); 1 for anything else.

    Args:
        batch: a batch as a loader yields it.

    >>> import numpy as np
    >>> count_samples({"x": np.zeros((3, 2)), "y": np.zeros(3)}), count_samples([5, 6]), count_samples(7)
    (3, 2, 1)
    """
    while True:
        if isinstance(batch, (torch.Tensor, np.ndarray)):
            return int(batch.shape[0]) if batch.ndim else 1
        if isinstance(batch, Mapping) and batch:
            batch = next(iter(batch.values()))
        elif isinstance(batch, (list, tuple)) and batch:
            if isinstance(batch[0], (int, float, str, bytes, np.generic)):
                return len(batch)
            batch = batch[0]
        else:
            return 1


def _world(group: Any) -> int:
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()):
        return 1
    return dist.get_world_size(group)


class RankJoin:
    """The per-step agreement of the ranks of ``group`` (default: the whole job); see the
    module docstring. Call :meth:`begin` at the start of every epoch and :meth:`step`
    once per step with this rank's next batch, or :data:`END` when its part has ended.

    Args:
        policy: ``"pad"`` (the default) repeats a rank's last batch, flagged as padding,
            while another rank still has one; ``"drop_remainder"`` ends the epoch for
            every rank at the first step at which some rank has no batch. Another value
            raises ``ValueError``.
        samples: counts the samples of a batch for the padded and dropped counts
            (default :func:`count_samples`); a non-callable raises ``TypeError``.
        group: the ``torch.distributed`` process group whose ranks agree; ``None`` (the
            default) is the whole job. A group of one exchanges nothing.

    >>> j = RankJoin("pad")
    >>> j.begin(); j.step([1, 2]), j.step(END), j.stats()["batches"]
    (([1, 2], False), None, 1)
    """

    def __init__(self, policy: str = "pad", *, samples: Callable[[Any], int] = count_samples,
                 group: Any = None) -> None:
        self.policy = one_of("policy", policy, POLICIES)
        self.samples = callable_arg("samples", samples)
        self.group = group
        self.begin()

    def begin(self) -> None:
        """Start an epoch: forget the last batch, zero the counters."""
        self.padding = False  # whether the last step repeated an earlier batch
        self._last: Any = END
        self._ended = False
        self._counts = dict.fromkeys(("steps", "batches", "padded_batches", "padded_samples",
                                      "dropped_batches", "dropped_samples"), 0)

    @property
    def world_size(self) -> int:
        """Ranks that take part (1 without a process group)."""
        return _world(self.group)

    def _agree(self, have: bool, stuck: bool) -> tuple[int, int]:
        dist = torch.distributed
        device = None
        if dist.get_backend(self.group) == "nccl":
            device = torch.device("cuda", torch.cuda.current_device())
        t = torch.tensor([int(have), int(stuck)], dtype=torch.int64, device=device)
        _RECENT_TENSORS.append(t)
        dist.all_reduce(t, op=dist.ReduceOp.SUM, group=self.group)
        return int(t[0]), int(t[1])

    def step(self, item: Any, rest: Callable[[], Iterable[Any]] | None = None
             ) -> tuple[Any, bool] | None:
        """``(batch, padding)`` for this step, or ``None`` when the epoch has ended on every
        rank.

        Under ``"pad"``, a step at which some rank has an empty part (no batch to repeat)
        raises the same ``RuntimeError`` on every rank.

        Args:
            item: this rank's next batch, or :data:`END` when its part has ended.
            rest: returns the batches after ``item``, read and counted as dropped when
                ``"drop_remainder"`` ends the epoch early (not called otherwise);
                ``None``: nothing more is counted.
        """
        c = self._counts
        if self._ended:
            return None
        have = item is not END
        world = self.world_size
        if world == 1:
            n, stuck = int(have), 0
        else:
            n, stuck = self._agree(have, not have and self._last is END)
        if n == 0:
            self._ended = True
            return None
        if n < world and self.policy == "drop_remainder":
            self._ended = True
            if have:  # counted as they are read, not held
                for batch in itertools.chain((item,), rest() if rest is not None else ()):
                    c["dropped_batches"] += 1
                    c["dropped_samples"] += self.samples(batch)
            return None
        if stuck:
            self._ended = True
            raise RuntimeError(
                f"{stuck} rank(s) have an empty part of the data and no batch to repeat under "
                "policy='pad': give every rank data (fewer ranks, more files or records), or "
                "use policy='drop_remainder'"
            )
        c["steps"] += 1
        self.padding = not have
        if have:
            self._last = item
            c["batches"] += 1
            return item, False
        c["padded_batches"] += 1
        c["padded_samples"] += self.samples(self._last)
        return self._last, True

    def stats(self) -> dict[str, Any]:
        """This epoch's counts (see the module docstring) and the policy.

        >>> RankJoin("drop_remainder").stats()["policy"]
        'drop_remainder'
        """
        return {"policy": self.policy, **self._counts}


class Joined:
    """``iterable`` with its ranks joined (see the module docstring); every ``iter()`` is
    an epoch. ``padding``: whether the batch last yielded repeats an earlier one. Other
    attributes are the iterable's own (``batch_size``, ...).

    Args:
        iterable: the batches, re-iterable once per epoch (a ``DataLoader``).
        policy: ``"pad"`` (the default) or ``"drop_remainder"``, as for
            :class:`RankJoin` (another value raises ``ValueError``).
        samples: counts a batch's samples, as for :class:`RankJoin` (default
            :func:`count_samples`).
        group: the process group whose ranks agree, as for :class:`RankJoin`
            (``None``: the whole job).
        flag_key: also set ``batch[flag_key]`` (a bool tensor, true for a repeated
            batch) in dict batches, on a copy; ``None`` (the default) sets nothing.

    >>> joined = Joined([{"x": 1}], flag_key="padding")
    >>> [b for b in joined], joined.padding
    ([{'x': 1, 'padding': tensor(False)}], False)
    """

    def __init__(self, iterable: Iterable[Any], *, policy: str = "pad",
                 samples: Callable[[Any], int] = count_samples, group: Any = None,
                 flag_key: str | None = None) -> None:
        self.iterable = iterable
        self.rank_join = RankJoin(policy, samples=samples, group=group)
        self.flag_key = flag_key

    @property
    def padding(self) -> bool:
        """Whether the batch last yielded repeats an earlier one."""
        return self.rank_join.padding

    def __iter__(self) -> Iterator[Any]:
        return joined(self.rank_join, iter(self.iterable), self.flag_key)

    def stats(self) -> dict[str, Any]:
        """The counts of the epoch last iterated (:meth:`RankJoin.stats`)."""
        return self.rank_join.stats()

    def __getattr__(self, name: str) -> Any:  # the loader's own attributes (batch_size, ...)
        if name == "iterable":
            raise AttributeError(name)
        return getattr(self.iterable, name)


def joined(rank_join: RankJoin, it: Iterator[Any], flag_key: str | None = None
           ) -> Iterator[Any]:
    """One epoch of ``it`` with the ranks joined by ``rank_join`` (see :class:`Joined`).

    ``it`` is closed (when it has ``close``) when the epoch ends or the generator is
    closed.

    Args:
        rank_join: the agreement to use; :meth:`RankJoin.begin` is called first.
        it: this rank's batches for the epoch.
        flag_key: also set ``batch[flag_key]`` (a bool tensor, true for a repeated
            batch) in dict batches, on a copy; ``None`` (the default) sets nothing.

    >>> list(joined(RankJoin(), iter("ab")))
    ['a', 'b']
    """
    rank_join.begin()
    try:
        while True:
            got = rank_join.step(next(it, END), lambda: it)
            if got is None:
                return
            batch, padding = got
            if flag_key is not None and isinstance(batch, dict):
                batch = {**batch, flag_key: torch.tensor(padding)}
            yield batch
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()


def join(iterable: Iterable[Any], *, policy: str = "pad",
         samples: Callable[[Any], int] = count_samples, group: Any = None,
         flag_key: str | None = None) -> Joined:
    """``iterable`` (a ``DataLoader``) with the ranks of the job joined at every step; see
    the module docstring and :class:`Joined`.

    Args:
        iterable: the batches, re-iterable once per epoch (a ``DataLoader``).
        policy: ``"pad"`` (the default) or ``"drop_remainder"``; see :class:`Joined`.
        samples: counts the samples of a batch (default :func:`count_samples`).
        group: the process group whose ranks agree; ``None``: the whole job.
        flag_key: the key of the padding flag set in dict batches; ``None``: none.

    >>> loader = join([[1, 2], [3]], policy="drop_remainder")
    >>> list(loader)
    [[1, 2], [3]]
    """
    return Joined(iterable, policy=policy, samples=samples, group=group, flag_key=flag_key)
