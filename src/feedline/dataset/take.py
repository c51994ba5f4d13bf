"""``Dataset.take`` and ``Dataset.skip``.

>>> Dataset.range(10).take(3).to_list()
[0, 1, 2]
>>> Dataset.range(5).skip(3).to_list()
[3, 4]
"""

from __future__ import annotations

from typing import Any

from feedline._internal.state import state_int
from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.iterator import DatasetIterator, check_state

__all__ = ["TakeDataset", "SkipDataset"]


class _CountDataset(Dataset):
    """A parent and a count ``n``; subclasses name ``_kind`` and ``_iterator_cls``."""

    _kind = ""
    _iterator_cls: type[_CountIterator]

    def __init__(self, parent: Dataset, n: int) -> None:
        super().__init__()
        self._parents = (parent,)
        self._n = n

    @property
    def name(self) -> str:
        return f"{self._kind}({self._n})"

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return self._iterator_cls(self._parents[0]._build(ctx), self._n)


class _CountIterator(DatasetIterator):
    """Counts items in ``_count`` and saves it under the state key ``_key``."""

    _kind = ""
    _key = ""

    def __init__(self, parent: DatasetIterator, n: int) -> None:
        self._parent = parent
        self._n = n
        self._count = 0

    def get_state(self) -> dict[str, Any]:
        return {"type": self._kind, self._key: self._count, "parent": self._parent.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, self._kind, (self._key, "parent"))
        self._parent.set_state(state["parent"])
        self._count = state_int(state, self._key, self._kind, high=self._n)

    def close(self) -> None:
        self._parent.close()


class _TakeIterator(_CountIterator):
    _kind = "take"
    _key = "taken"

    def __next__(self) -> Any:
        if self._count >= self._n:
            raise StopIteration
        item = next(self._parent)
        self._count += 1
        return item


class _SkipIterator(_CountIterator):
    _kind = "skip"
    _key = "skipped"

    def __next__(self) -> Any:
        while self._count < self._n:
            next(self._parent)
            self._count += 1
        return next(self._parent)


class TakeDataset(_CountDataset):
    """The first ``n`` items of the parent; state ``{"taken", "parent"}``.

    >>> ds = Dataset.range(5).take(2)
    >>> type(ds).__name__, ds.to_list()
    ('TakeDataset', [0, 1])
    """

    _kind = "take"
    _iterator_cls = _TakeIterator


class SkipDataset(_CountDataset):
    """The parent's items after the first ``n``; state ``{"skipped", "parent"}``.

    >>> ds = Dataset.range(5).skip(3)
    >>> type(ds).__name__, ds.to_list()
    ('SkipDataset', [3, 4])
    """

    _kind = "skip"
    _iterator_cls = _SkipIterator
