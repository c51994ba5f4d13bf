"""``Dataset.unique``: each distinct item once, at its first occurrence (tf.data's
``unique``). Items must be hashable (tf.data allows ints and strings); numpy scalars
compare equal to the Python numbers they hold.

State: the input's state and the items seen so far (JSON values, bytes and numpy
scalars can be saved; others raise
:class:`~feedline.exceptions.StateNotSupportedError` from ``get_state``).

>>> Dataset.from_iterable([1, 2, 1, 3, 2]).unique().to_list()
[1, 2, 3]
"""

from __future__ import annotations

from typing import Any

from feedline.dataset._replay import decode_value, encode_value
from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.exceptions import StateNotSupportedError

__all__ = ["UniqueDataset"]


class UniqueDataset(Dataset):
    """The parent's distinct items in first-seen order; see the module docstring.

    Args:
        parent: the dataset read; its items must be hashable.

    >>> ds = Dataset.from_iterable(list("abba")).unique()
    >>> type(ds).__name__, ds.to_list()
    ('UniqueDataset', ['a', 'b'])
    """

    def __init__(self, parent: Dataset) -> None:
        super().__init__()
        self._parents = (parent,)

    @property
    def name(self) -> str:
        return "unique"

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return _UniqueIterator(self._parents[0]._build(ctx))


class _UniqueIterator(DatasetIterator):
    def __init__(self, parent: DatasetIterator) -> None:
        self._parent = parent
        self._seen: dict[Any, None] = {}

    def __next__(self) -> Any:
        seen = self._seen
        while True:
            item = next(self._parent)
            try:
                if item in seen:
                    continue
            except TypeError:
                raise TypeError(f"unique needs hashable items (ints, strings, ...), got "
                                f"{type(item).__name__}") from None
            seen[item] = None
            return item

    def get_state(self) -> dict[str, Any]:
        try:
            seen = [encode_value(x) for x in self._seen]
        except TypeError as exc:
            raise StateNotSupportedError(f"unique cannot save the items it has seen: {exc}") \
                from exc
        return {"type": "unique", "parent": self._parent.get_state(), "seen": seen}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "unique", ("parent", "seen"))
        self._parent.set_state(state["parent"])
        self._seen = dict.fromkeys(decode_value(x) for x in state["seen"])

    def close(self) -> None:
        self._seen = {}
        self._parent.close()
