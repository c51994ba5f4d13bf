"""``Dataset.take`` and ``Dataset.skip``.

>>> Dataset.range(10).take(3).to_list()
[0, 1, 2]
>>> Dataset.range(5).skip(3).to_list()
[3, 4]
"""

from __future__ import annotations

from typing import Any

from feedline._internal.validate import non_negative_int
from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.iterator import DatasetIterator, check_state

__all__ = ["TakeDataset", "SkipDataset"]


class TakeDataset(Dataset):
    """The first ``n`` items of the parent; state ``{"taken", "parent"}``.

    >>> ds = Dataset.range(5).take(2)
    >>> type(ds).__name__, ds.to_list()
    ('TakeDataset', [0, 1])
    """

    def __init__(self, parent: Dataset, n: int) -> None:
        super().__init__()
        self._parents = (parent,)
        self._n = n

    @property
    def name(self) -> str:
        return f"take({self._n})"

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return _TakeIterator(self._parents[0]._build(ctx), self._n)


class _TakeIterator(DatasetIterator):
    def __init__(self, parent: DatasetIterator, n: int) -> None:
        self._parent = parent
        self._n = n
        self._taken = 0

    def __next__(self) -> Any:
        if self._taken >= self._n:
            raise StopIteration
        item = next(self._parent)
        self._taken += 1
        return item

    def get_state(self) -> dict[str, Any]:
        return {"type": "take", "taken": self._taken, "parent": self._parent.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "take", ("taken", "parent"))
        self._parent.set_state(state["parent"])
        self._taken = non_negative_int("state['taken']", state["taken"])

    def close(self) -> None:
        self._parent.close()


class SkipDataset(Dataset):
    """The parent's items after the first ``n``; state ``{"skipped", "parent"}``.

    >>> ds = Dataset.range(5).skip(3)
    >>> type(ds).__name__, ds.to_list()
    ('SkipDataset', [3, 4])
    """

    def __init__(self, parent: Dataset, n: int) -> None:
        super().__init__()
        self._parents = (parent,)
        self._n = n

    @property
    def name(self) -> str:
        return f"skip({self._n})"

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return _SkipIterator(self._parents[0]._build(ctx), self._n)


class _SkipIterator(DatasetIterator):
    def __init__(self, parent: DatasetIterator, n: int) -> None:
        self._parent = parent
        self._n = n
        self._skipped = 0

    def __next__(self) -> Any:
        while self._skipped < self._n:
            next(self._parent)
            self._skipped += 1
        return next(self._parent)

    def get_state(self) -> dict[str, Any]:
        return {"type": "skip", "skipped": self._skipped, "parent": self._parent.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "skip", ("skipped", "parent"))
        self._parent.set_state(state["parent"])
        self._skipped = non_negative_int("state['skipped']", state["skipped"])

    def close(self) -> None:
        self._parent.close()
