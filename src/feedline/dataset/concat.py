"""``Dataset.concat``: the items of several datasets, one after the other.

State: ``{"index": which dataset, "child": its state}``.

>>> Dataset.range(2).concat(Dataset.range(5, 7)).to_list()
[0, 1, 5, 6]
"""

from __future__ import annotations

from typing import Any

from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.exceptions import StateError

__all__ = ["ConcatDataset"]


def check_datasets(datasets: tuple, op: str) -> tuple:
    for i, d in enumerate(datasets):
        if not isinstance(d, Dataset):
            raise TypeError(f"{op}: argument {i} must be a Dataset, got {type(d).__name__}")
    return datasets


class ConcatDataset(Dataset):
    """All items of ``datasets[0]``, then of ``datasets[1]``, and so on.

    Args:
        datasets: the datasets, in order; an element that is not a :class:`Dataset`
            raises ``TypeError``.

    >>> ds = Dataset.range(2).concat(Dataset.from_iterable(["a"]))
    >>> type(ds).__name__, ds.to_list()
    ('ConcatDataset', [0, 1, 'a'])
    """

    def __init__(self, datasets: tuple[Dataset, ...]) -> None:
        super().__init__()
        self._parents = check_datasets(datasets, "concat")

    @property
    def name(self) -> str:
        return f"concat({len(self._parents)})"

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return _ConcatIterator(self._parents, ctx)


class _ConcatIterator(DatasetIterator):
    def __init__(self, datasets: tuple[Dataset, ...], ctx: BuildContext) -> None:
        self._datasets = datasets
        self._ctx = ctx
        self._index = 0
        self._child: DatasetIterator | None = None

    def __next__(self) -> Any:
        while self._index < len(self._datasets):
            if self._child is None:
                self._child = self._datasets[self._index]._build(self._ctx)
            try:
                return next(self._child)
            except StopIteration:
                self._child.close()
                self._child = None
                self._index += 1
        raise StopIteration

    def get_state(self) -> dict[str, Any]:
        child = None if self._child is None else self._child.get_state()
        return {"type": "concat", "index": self._index, "child": child}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "concat", ("index", "child"))
        index = state["index"]
        if not isinstance(index, int) or not 0 <= index <= len(self._datasets):
            raise StateError(f"concat state index {index!r} out of range")
        self.close()
        self._index = index
        if state["child"] is not None:
            self._child = self._datasets[index]._build(self._ctx)
            self._child.set_state(state["child"])

    def close(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            child.close()
