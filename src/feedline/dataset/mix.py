"""``Dataset.mix`` and ``Dataset.choose``: one stream drawn from several datasets.

``mix(datasets, weights, seed=...)`` (tf.data ``sample_from_datasets``, Grain ``mix``)
draws each item from dataset ``i`` with probability ``weights[i] / sum(weights)``. Draw
``k`` of top-level iteration ``e`` uses the uniform number ``u(seed, e, k)``, so the
sequence of choices depends only on ``(seed, epoch)``: the same in every run, new in
every iteration. What happens when a chosen dataset has no item left:

* ``stop_on_empty=True`` (default, as tf.data): the mix ends there;
* ``stop_on_empty=False``: that dataset leaves the mix, the remaining weights are
  renormalised, and the mix ends when every dataset is exhausted;
* ``cycle=True``: that dataset starts again (its next repetition runs with epoch
  ``e * 2**32 + r`` for repetition ``r``, so its seeded stages reshuffle) and the mix
  never ends (Grain's mix); a dataset that is empty from the start raises ``ValueError``.

``choose(datasets, index_dataset)`` (tf.data ``choose_from_datasets``) takes item ``k``
from ``datasets[index_k]`` where ``index_k`` is item ``k`` of ``index_dataset``; it ends
with the index dataset, or at the first chosen dataset that is exhausted
(``stop_on_empty=True``; with ``False`` such an index is passed over).

State: ``{"children": [state of each dataset], "step": draws made, "active": which
datasets are still in the mix, "rounds": repetitions started per dataset}`` (choose adds
the index dataset's state), so resuming continues every source and the choice sequence
exactly. Shard before mixing (each rank mixes its own shards) or after it (the mixed
stream is sharded like any stream); both read every item exactly once across ranks.

>>> a, b = Dataset.from_iterable(["a"] * 4), Dataset.from_iterable(["b"] * 4)
>>> ds = Dataset.mix([a, b], [0.5, 0.5], seed=3)
>>> first = list(ds.iterator(epoch=0))
>>> first == list(ds.iterator(epoch=0)), 4 <= len(first) < 8, sorted(set(first))
(True, True, ['a', 'b'])
>>> Dataset.mix([a, b], [0.5, 0.5], seed=3, stop_on_empty=False).to_list().count("b")
4
>>> Dataset.choose([a, b], Dataset.from_iterable([0, 1, 1, 0])).to_list()
['a', 'b', 'b', 'a']
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from typing import Any

from feedline._internal.state import state_bool, state_int, state_list
from feedline._internal.validate import check_bool
from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.concat import check_datasets
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.dataset.shuffle import CounterRandom, resolve_seed
from feedline.exceptions import InvalidStateError, StateError

__all__ = ["MixDataset", "ChooseDataset"]

_CYCLE_STRIDE = 2**32


def _weights(weights: Sequence[float], n: int) -> list[float]:
    if isinstance(weights, (str, bytes)) or not isinstance(weights, Sequence):
        raise TypeError(f"`weights` must be a sequence of numbers, got {weights!r}")
    if len(weights) != n:
        raise ValueError(f"`weights` has {len(weights)} entries for {n} datasets")
    out = []
    for i, w in enumerate(weights):
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
            raise ValueError(f"`weights[{i}]` must be a finite number >= 0, got {w!r}")
        out.append(float(w))
    if not sum(out) > 0:
        raise ValueError(f"`weights` must have a positive sum, got {list(weights)!r}")
    return out


def _datasets(datasets: Sequence[Dataset], op: str) -> tuple[Dataset, ...]:
    if isinstance(datasets, Dataset) or not isinstance(datasets, Sequence):
        raise TypeError(f"{op}: `datasets` must be a list of datasets, got {type(datasets).__name__}")
    if not datasets:
        raise ValueError(f"{op}: `datasets` must hold at least one dataset")
    return check_datasets(tuple(datasets), op)


def _build_all(datasets: Sequence[Dataset], ctx: BuildContext) -> list[DatasetIterator]:
    children: list[DatasetIterator] = []
    try:
        for d in datasets:
            children.append(d._build(ctx))
    except BaseException:
        for c in children:
            c.close()
        raise
    return children


class MixDataset(Dataset):
    """Items drawn from several datasets by weight; see the module docstring.

    Args:
        datasets: a non-empty list of datasets (else ``TypeError``/``ValueError``).
        weights: one finite number >= 0 per dataset with a positive sum (else
            ``ValueError``); dataset ``i`` is drawn with probability
            ``weights[i] / sum(weights)``.
        seed: the seed of the choices (``None``: a fresh one drawn now).
        stop_on_empty: ``True`` ends the mix at the first chosen dataset that is
            exhausted; ``False`` drops it from the mix and renormalises the weights.
        cycle: ``True`` restarts an exhausted dataset with a new epoch, so the mix never
            ends; one empty from the start raises ``ValueError``.

    >>> ds = Dataset.mix([Dataset.range(3), Dataset.range(10, 13)], [1, 1], seed=0)
    >>> out = ds.to_list()
    >>> again = Dataset.mix([Dataset.range(3), Dataset.range(10, 13)], [1, 1], seed=0)
    >>> type(ds).__name__, sorted(out), again.to_list() == out       # same seed: same order
    ('MixDataset', [0, 1, 2, 10, 11, 12], True)
    """

    def __init__(self, datasets: Sequence[Dataset], weights: Sequence[float], *,
                 seed: int | None = None, stop_on_empty: bool = True,
                 cycle: bool = False) -> None:
        super().__init__()
        self._parents = _datasets(datasets, "mix")
        self._weights = _weights(weights, len(self._parents))
        self._seed = resolve_seed(seed)
        check_bool("stop_on_empty", stop_on_empty)
        check_bool("cycle", cycle)
        self._stop = stop_on_empty
        self._cycle = cycle

    @property
    def name(self) -> str:
        return f"mix({len(self._parents)})"

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return _MixIterator(self, ctx)


class _MixIterator(DatasetIterator):
    def __init__(self, ds: MixDataset, ctx: BuildContext) -> None:
        self._ds = ds
        self._ctx = ctx
        self._rng = CounterRandom(ds._seed, ctx.epoch)
        self._children = _build_all(ds._parents, ctx)
        n = len(ds._parents)
        self._active = [w > 0 for w in ds._weights]
        self._rounds = [0] * n
        self._given = [0] * n  # items given by each child's current repetition
        self._step = 0
        self._done = False
        self._update_cdf()

    def _update_cdf(self) -> None:
        weights = [w if a else 0.0 for w, a in zip(self._ds._weights, self._active)]
        total = sum(weights)
        self._cdf: list[float] = []
        acc = 0.0
        for w in weights:
            acc += w
            self._cdf.append(acc / total if total > 0 else 0.0)
        self._cdf[-1] = 1.0 if total > 0 else 0.0

    def _restart(self, i: int) -> None:
        if self._given[i] == 0:
            raise ValueError(f"mix: dataset {i} is empty, so it cannot cycle")
        self._children[i].close()
        self._rounds[i] += 1
        self._given[i] = 0
        epoch = self._ctx.epoch * _CYCLE_STRIDE + self._rounds[i]
        self._children[i] = self._ds._parents[i]._build(self._ctx.with_epoch(epoch))

    def __next__(self) -> Any:
        while not self._done:
            u = self._rng.u(self._step)
            i = min(bisect_right(self._cdf, u), len(self._cdf) - 1)
            while not self._active[i]:  # a zero-width interval at the edge of the cdf
                i -= 1
            try:
                item = next(self._children[i])
            except StopIteration:
                if self._ds._cycle:
                    self._restart(i)
                    continue
                if self._ds._stop:
                    self._done = True
                    break
                self._active[i] = False
                if not any(self._active):
                    self._done = True
                    break
                self._update_cdf()
                continue
            self._step += 1
            self._given[i] += 1
            return item
        raise StopIteration

    def get_state(self) -> dict[str, Any]:
        return {
            "type": "mix", "children": [c.get_state() for c in self._children],
            "step": self._step, "active": list(self._active), "rounds": list(self._rounds),
            "given": list(self._given), "done": self._done,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "mix", ("children", "step", "active", "rounds", "given", "done"))
        n = len(self._children)
        if not isinstance(state["children"], list) or len(state["children"]) != n:
            raise StateError(f"mix state has {len(state['children'])} datasets, this mix has {n}")
        step = state_int(state, "step", "mix")
        done = state_bool(state, "done", "mix")
        fields = {key: state_list(state, key, "mix") for key in ("active", "rounds", "given")}
        for key, values in fields.items():
            check = state_bool if key == "active" else state_int
            if len(values) != n:
                raise InvalidStateError(f"state of stage 'mix': `{key}` must hold {n} values")
            for i in range(n):
                check({f"{key}[{i}]": values[i]}, f"{key}[{i}]", "mix")
        if sum(fields["given"]) > step or (not self._ds._cycle and any(fields["rounds"])):
            raise InvalidStateError("state of stage 'mix': `given`/`rounds` do not fit `step` "
                                    f"{step} and cycle={self._ds._cycle}")
        for i, rounds in enumerate(state["rounds"]):
            if rounds != self._rounds[i]:
                self._children[i].close()
                self._rounds[i] = int(rounds)
                epoch = self._ctx.epoch * _CYCLE_STRIDE + self._rounds[i]
                self._children[i] = self._ds._parents[i]._build(self._ctx.with_epoch(epoch))
        for c, s in zip(self._children, state["children"]):
            c.set_state(s)
        self._step = step
        self._active = list(fields["active"])
        self._given = list(fields["given"])
        self._done = done
        self._update_cdf()

    def close(self) -> None:
        for c in self._children:
            c.close()


class ChooseDataset(Dataset):
    """Item ``k`` from ``datasets[index_k]``; see the module docstring.

    Args:
        datasets: a non-empty list of datasets (else ``TypeError``/``ValueError``).
        index_dataset: a :class:`Dataset` of ints (else ``TypeError``): item ``k`` comes
            from ``datasets[index_k]``; the result ends with it.
        stop_on_empty: ``True`` ends at the first chosen dataset that is exhausted;
            ``False`` passes over such an index.

    >>> ds = Dataset.choose([Dataset.range(3), Dataset.range(10, 13)], Dataset.from_iterable([0, 1, 1, 0]))
    >>> type(ds).__name__, ds.to_list()
    ('ChooseDataset', [0, 10, 11, 1])
    """

    def __init__(self, datasets: Sequence[Dataset], index_dataset: Dataset, *,
                 stop_on_empty: bool = True) -> None:
        super().__init__()
        parents = _datasets(datasets, "choose")
        if not isinstance(index_dataset, Dataset):
            raise TypeError(
                f"choose: `index_dataset` must be a Dataset, got {type(index_dataset).__name__}"
            )
        check_bool("stop_on_empty", stop_on_empty)
        self._parents = (index_dataset, *parents)
        self._stop = stop_on_empty

    @property
    def name(self) -> str:
        return f"choose({len(self._parents) - 1})"

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return _ChooseIterator(_build_all(self._parents, ctx), self._stop)


class _ChooseIterator(DatasetIterator):
    def __init__(self, children: list[DatasetIterator], stop: bool) -> None:
        self._index, *self._children = children
        self._stop = stop
        self._empty = [False] * len(self._children)
        self._done = False
        self._count = 0

    def __next__(self) -> Any:
        while not self._done:
            try:
                i = next(self._index)
            except StopIteration:
                self._done = True
                break
            n = len(self._children)
            if isinstance(i, bool) or not isinstance(i, int) and not hasattr(i, "__index__"):
                raise TypeError(f"choose: index {self._count} must be an int, got {i!r}")
            i = int(i)
            if not 0 <= i < n:
                raise ValueError(
                    f"choose: index {self._count} is {i}, outside 0..{n - 1} for {n} datasets"
                )
            self._count += 1
            if self._empty[i]:
                continue
            try:
                return next(self._children[i])
            except StopIteration:
                if self._stop:
                    self._done = True
                    break
                self._empty[i] = True
        raise StopIteration

    def get_state(self) -> dict[str, Any]:
        return {
            "type": "choose", "index": self._index.get_state(),
            "children": [c.get_state() for c in self._children],
            "empty": list(self._empty), "done": self._done, "count": self._count,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "choose", ("index", "children", "empty", "done", "count"))
        if len(state["children"]) != len(self._children):
            raise StateError(
                f"choose state has {len(state['children'])} datasets, "
                f"this one has {len(self._children)}"
            )
        empty = state_list(state, "empty", "choose")
        if len(empty) != len(self._children):
            raise InvalidStateError(
                f"state of stage 'choose': `empty` must hold {len(self._children)} values")
        for i, value in enumerate(empty):
            state_bool({f"empty[{i}]": value}, f"empty[{i}]", "choose")
        done = state_bool(state, "done", "choose")
        count = state_int(state, "count", "choose")
        self._index.set_state(state["index"])
        for c, s in zip(self._children, state["children"]):
            c.set_state(s)
        self._empty, self._done, self._count = list(empty), done, count

    def close(self) -> None:
        self._index.close()
        for c in self._children:
            c.close()
