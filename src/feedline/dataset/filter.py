"""``Dataset.filter``: keep the items for which a predicate is true.

The state is the parent's: the filter holds no items of its own.

>>> Dataset.range(10).filter(lambda x: x % 3 == 0).to_list()
[0, 3, 6, 9]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.iterator import DatasetIterator, TransformIterator

__all__ = ["FilterDataset"]


class FilterDataset(Dataset):
    """Items of the parent for which ``predicate(item)`` is true, in order.

    Args:
        parent: the dataset read.
        predicate: called with each item; the item is kept when the result is truthy.

    >>> ds = Dataset.range(6).filter(lambda x: x % 3 == 0)
    >>> type(ds).__name__, ds.to_list()
    ('FilterDataset', [0, 3])
    """

    def __init__(self, parent: Dataset, predicate: Callable[[Any], bool]) -> None:
        super().__init__()
        self._parents = (parent,)
        self._predicate = predicate

    @property
    def name(self) -> str:
        return f"filter({getattr(self._predicate, '__name__', 'predicate')})"

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        predicate = self._predicate
        return TransformIterator(self._parents[0]._build(ctx),
                                 lambda source: filter(predicate, source))
