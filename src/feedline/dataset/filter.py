"""``Dataset.filter``: keep the items for which a predicate is true.

The state is the parent's: the filter holds no items of its own.

>>> Dataset.range(10).filter(lambda x: x % 3 == 0).to_list()
[0, 3, 6, 9]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
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
        self._it: Iterator | None = None

    def _fast(self) -> Iterator:
        if self._it is None:
            self._it = filter(self._predicate, self._parent._fast())
        return self._it

    def __next__(self) -> Any:
        return next(self._it if self._it is not None else self._fast())

    def get_state(self) -> dict[str, Any]:
        return self._parent.get_state()

    def set_state(self, state: dict[str, Any]) -> None:
        self._parent.set_state(state)
        self._it = None

    def close(self) -> None:
        self._parent.close()
