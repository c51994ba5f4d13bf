"""``Dataset.filter``: keep the items for which a predicate is true.

The state is the parent's: the filter holds no items of its own.

>>> Dataset.range(10).filter(lambda x: x % 3 == 0).to_list()
[0, 3, 6, 9]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.iterator import DatasetIterator

__all__ = ["FilterDataset"]


class FilterDataset(Dataset):
    """Items of the parent for which ``predicate(item)`` is true, in order."""

    def __init__(self, parent: Dataset, predicate: Callable[[Any], bool]) -> None:
        super().__init__()
        self._parents = (parent,)
        self._predicate = predicate

    @property
    def name(self) -> str:
        return f"filter({getattr(self._predicate, '__name__', 'predicate')})"

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return _FilterIterator(self._parents[0]._build(ctx), self._predicate)


class _FilterIterator(DatasetIterator):
    def __init__(self, parent: DatasetIterator, predicate: Callable[[Any], bool]) -> None:
        self._parent = parent
        self._predicate = predicate

    def __next__(self) -> Any:
        predicate = self._predicate
        for item in self._parent:
            if predicate(item):
                return item
        raise StopIteration

    def get_state(self) -> dict[str, Any]:
        return self._parent.get_state()

    def set_state(self, state: dict[str, Any]) -> None:
        self._parent.set_state(state)

    def close(self) -> None:
        self._parent.close()
