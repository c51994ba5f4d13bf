"""``Dataset.take_while``: the items up to, not including, the first for which the
predicate is false (tf.data's ``take_while``); the rest of the input is not read.

State: the input's state and whether the stage has stopped.

>>> Dataset.range(10).take_while(lambda x: x < 3).to_list()
[0, 1, 2]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from feedline._internal.state import state_bool
from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.iterator import DatasetIterator, check_state

__all__ = ["TakeWhileDataset"]


class TakeWhileDataset(Dataset):
    """The parent's leading items that satisfy ``predicate``; see the module docstring.

    Args:
        parent: the dataset read.
        predicate: called with each item; the stage ends at the first falsy result.

    >>> ds = Dataset.from_iterable([1, 3, 4, 5]).take_while(lambda x: x % 2)
    >>> type(ds).__name__, ds.to_list()
    ('TakeWhileDataset', [1, 3])
    """

    def __init__(self, parent: Dataset, predicate: Callable[[Any], bool]) -> None:
        super().__init__()
        self._parents = (parent,)
        self._predicate = predicate

    @property
    def name(self) -> str:
        return f"take_while({getattr(self._predicate, '__name__', 'predicate')})"

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return _TakeWhileIterator(self._parents[0]._build(ctx), self._predicate)


class _TakeWhileIterator(DatasetIterator):
    def __init__(self, parent: DatasetIterator, predicate: Callable[[Any], bool]) -> None:
        self._parent = parent
        self._predicate = predicate
        self._stopped = False

    def __next__(self) -> Any:
        if self._stopped:
            raise StopIteration
        item = next(self._parent)
        if self._predicate(item):
            return item
        self._stopped = True
        raise StopIteration

    def get_state(self) -> dict[str, Any]:
        return {"type": "take_while", "parent": self._parent.get_state(),
                "stopped": self._stopped}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "take_while", ("parent", "stopped"))
        self._parent.set_state(state["parent"])
        self._stopped = state_bool(state, "stopped", "take_while")

    def close(self) -> None:
        self._parent.close()
