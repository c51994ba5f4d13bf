"""``Dataset.unbatch``: split every item into its rows (tf.data's ``unbatch``).

An item is split along its first dimension: a list or other sequence into its
elements, a numpy array (or tensor) into its rows; a tuple into tuples of its
components' rows and a dict into dicts of its values' rows (every component must have
the same number of rows, as tf.data requires). So ``ds.batch(n).unbatch()`` gives
``ds`` back, whether the batches are lists or stacked arrays. A string, bytes or a
scalar has no rows and raises ``TypeError``.

State: the input's position at or before the current item and how many of its rows
were yielded; a restore reads that item again (the input must be resumable).

>>> Dataset.range(5).batch(2).unbatch().to_list()
[0, 1, 2, 3, 4]
>>> import numpy as np
>>> Dataset.from_iterable([(np.arange(2), np.array([5, 6]))]).unbatch().to_list()
[(np.int64(0), np.int64(5)), (np.int64(1), np.int64(6))]
"""

from __future__ import annotations

from typing import Any

from feedline.dataset._replay import Replayer
from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.exceptions import StateError

__all__ = ["UnbatchDataset", "rows"]


def rows(item: Any) -> list:
    """The rows of ``item``; see the module docstring.

    Args:
        item: a list (its elements), an array-like with a length (its rows), or a tuple
            or dict of them (one tuple or dict per row); a ``str``/``bytes``, a scalar or
            components with different numbers of rows raise ``TypeError``/``ValueError``.

    >>> rows({"a": [1, 2], "b": "xy"}) == [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]
    Traceback (most recent call last):
    ...
    TypeError: unbatch: a str has no rows to split
    >>> rows({"a": [1, 2], "b": [3, 4]})
    [{'a': 1, 'b': 3}, {'a': 2, 'b': 4}]
    """
    if isinstance(item, tuple):
        return [tuple(r) for r in zip(*_components(list(item)))]
    if isinstance(item, dict):
        keys = list(item)
        return [dict(zip(keys, r)) for r in zip(*_components(list(item.values())))]
    if isinstance(item, list):
        return item
    if isinstance(item, (str, bytes, bytearray)) or not hasattr(item, "__len__") or (
            getattr(item, "ndim", 1) == 0):
        raise TypeError(f"unbatch: a {type(item).__name__} has no rows to split")
    return list(item)


def _components(parts: list) -> list[list]:
    split = [rows(p) for p in parts]
    lengths = {len(s) for s in split}
    if len(lengths) > 1:
        raise ValueError(f"unbatch: the components have different numbers of rows: "
                         f"{sorted(lengths)}")
    return split


class UnbatchDataset(Dataset):
    """The rows of the parent's items, in order; see the module docstring.

    Args:
        parent: the dataset of batches read; each item is split by :func:`rows`.

    >>> ds = Dataset.from_iterable([[1, 2], [], [3]]).unbatch()
    >>> type(ds).__name__, ds.to_list()
    ('UnbatchDataset', [1, 2, 3])
    """

    def __init__(self, parent: Dataset) -> None:
        super().__init__()
        self._parents = (parent,)

    @property
    def name(self) -> str:
        return "unbatch"

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return _UnbatchIterator(self._parents[0]._build(ctx))


class _UnbatchIterator(DatasetIterator):
    def __init__(self, parent: DatasetIterator) -> None:
        self._rows: list = []
        self._pos = 0
        self._rp = Replayer(parent, every=16, oldest=self._oldest)

    def _oldest(self) -> int:
        return self._rp.read - (self._pos < len(self._rows))

    def __next__(self) -> Any:
        while self._pos >= len(self._rows):
            self._rows = rows(self._rp.next())
            self._pos = 0
        self._pos += 1
        return self._rows[self._pos - 1]

    def get_state(self) -> dict[str, Any]:
        pending = self._pos < len(self._rows)
        return {"type": "unbatch", "input": self._rp.get_state(self._oldest()),
                "pos": self._pos if pending else 0}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "unbatch", ("input", "pos"))
        pos = state["pos"]
        last: Any = None
        for _, item in self._rp.replay(state["input"]):
            last = item
        self._rows, self._pos = ([], 0) if not pos else (rows(last), pos)
        if pos and not (isinstance(pos, int) and 0 < pos <= len(self._rows)):
            raise StateError(f"unbatch state position {pos!r} is outside the current item")

    def close(self) -> None:
        self._rows = []
        self._rp.parent.close()
