"""``Dataset.repeat``: iterate the parent several times (forever when ``epochs=None``).

Each repetition builds a fresh parent iterator with its own epoch number, so seeded
stages before ``repeat`` (``shuffle``, ``global_shuffle``) produce a new order every
repetition. For top-level iteration ``e`` and ``epochs=c``, repetition ``k`` runs epoch
``e*c + k`` (``e*2**32 + k`` when repeating forever). A repetition that yields no item
ends the repeat, so an empty dataset repeated forever ends instead of spinning.

State: ``{"k": repetition, "child": parent state}``.

>>> Dataset.range(3).repeat(2).to_list()
[0, 1, 2, 0, 1, 2]
"""

from __future__ import annotations

from typing import Any

from feedline._internal.state import state_int
from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.iterator import DatasetIterator, check_state

__all__ = ["RepeatDataset"]

_FOREVER_STRIDE = 2**32


class RepeatDataset(Dataset):
    """``epochs`` repetitions of the parent (``None``: forever).

    Args:
        parent: the dataset read; each repetition runs with the next epoch number.
        epochs: the number of repetitions (validated by :meth:`Dataset.repeat`), or
            ``None`` for forever.

    >>> ds = Dataset.range(2).repeat(3)
    >>> type(ds).__name__, ds.to_list()
    ('RepeatDataset', [0, 1, 0, 1, 0, 1])
    """

    def __init__(self, parent: Dataset, epochs: int | None) -> None:
        super().__init__()
        self._parents = (parent,)
        self._epochs = epochs

    @property
    def name(self) -> str:
        return f"repeat({'' if self._epochs is None else self._epochs})"

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return _RepeatIterator(self._parents[0], ctx, self._epochs)


class _RepeatIterator(DatasetIterator):
    def __init__(self, parent: Dataset, ctx: BuildContext, epochs: int | None) -> None:
        self._parent = parent
        self._ctx = ctx
        self._epochs = epochs
        stride = _FOREVER_STRIDE if epochs is None else epochs
        self._base = ctx.epoch * stride
        self._k = 0
        self._child: DatasetIterator | None = None
        self._yielded_this_epoch = 0

    def _open(self) -> DatasetIterator:
        self._child = self._parent._build(self._ctx.with_epoch(self._base + self._k))
        self._yielded_this_epoch = 0
        return self._child

    def __next__(self) -> Any:
        while self._epochs is None or self._k < self._epochs:
            child = self._child if self._child is not None else self._open()
            try:
                item = next(child)
            except StopIteration:
                empty = self._yielded_this_epoch == 0
                child.close()
                self._child = None
                self._k += 1
                if empty:
                    break
                continue
            self._yielded_this_epoch += 1
            return item
        raise StopIteration

    def get_state(self) -> dict[str, Any]:
        child = None if self._child is None else self._child.get_state()
        return {"type": "repeat", "k": self._k, "child": child}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "repeat", ("k", "child"))
        self.close()
        self._k = state_int(state, "k", "repeat", high=self._epochs)
        if state["child"] is not None:
            self._open().set_state(state["child"])
            self._yielded_this_epoch = 1  # the epoch had produced items before the save

    def close(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            child.close()
