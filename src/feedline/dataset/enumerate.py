"""``Dataset.enumerate``: ``(index, item)`` pairs, the index counting from ``start``
(tf.data's ``enumerate``).

State: the input's state and the next index.

>>> Dataset.from_iterable(["a", "b"]).enumerate(start=1).to_list()
[(1, 'a'), (2, 'b')]
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any, cast

from feedline._internal.validate import non_negative_int
from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.cardinality import cardinality
from feedline.dataset.iterator import DatasetIterator, check_state

__all__ = ["EnumerateDataset"]


class EnumerateDataset(Dataset):
    """The parent's items numbered from ``start``; see the module docstring.

    Args:
        parent: the dataset read.
        start: the index of the first item (an int, else ``TypeError``).

    >>> ds = Dataset.range(10, 12).enumerate()
    >>> type(ds).__name__, ds.to_list(), len(ds)
    ('EnumerateDataset', [(0, 10), (1, 11)], 2)
    """

    def __init__(self, parent: Dataset, start: int) -> None:
        super().__init__()
        if isinstance(start, bool) or not isinstance(start, int):
            raise TypeError(f"`start` must be an int, got {start!r}")
        self._parents = (parent,)
        self._start = start

    @property
    def name(self) -> str:
        return "enumerate"

    def _cardinality(self) -> int:
        return cardinality(self._parents[0])

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return _EnumerateIterator(self._parents[0]._build(ctx), self._start)


class _EnumerateIterator(DatasetIterator):
    def __init__(self, parent: DatasetIterator, start: int) -> None:
        self._parent = parent
        self._start = start
        self._open(0)

    def _open(self, count: int) -> None:
        self._base = count
        self._counter = iter(range(self._start + count, sys.maxsize))
        self._it: Iterator | None = None

    def _fast(self) -> Iterator:
        if self._it is None:
            self._it = zip(self._counter, self._parent._fast())
        return self._it

    def __next__(self) -> Any:
        return next(self._it if self._it is not None else self._fast())

    def get_state(self) -> dict[str, Any]:
        consumed = cast(int, self._counter.__reduce__()[2])  # a range iterator's position
        return {"type": "enumerate", "parent": self._parent.get_state(),
                "count": self._base + consumed}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "enumerate", ("parent", "count"))
        self._parent.set_state(state["parent"])
        self._open(non_negative_int("state['count']", state["count"]))

    def close(self) -> None:
        self._parent.close()
