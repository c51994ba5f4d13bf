"""``Dataset.flat_map``: one item becomes 0..n items (TF's ``enqueue_many`` case).

State: the parent's state from *before* the item being expanded, plus how many of its
outputs were already produced; resuming re-reads that item and skips those outputs, so
``fn`` must be deterministic.

>>> Dataset.range(4).flat_map(lambda x: [x] * x).to_list()
[1, 2, 2, 3, 3, 3]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from feedline._internal.validate import non_negative_int
from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.exceptions import InvalidStateError, StateError

__all__ = ["FlatMapDataset"]


class FlatMapDataset(Dataset):
    """Concatenation of ``fn(item)`` over the parent's items.

    Args:
        parent: the dataset read.
        fn: called with each item; returns an iterable (else ``TypeError`` naming the
            item). It must be deterministic: resuming calls it again.

    >>> ds = Dataset.range(3).flat_map(lambda n: Dataset.from_iterable([n] * n))
    >>> type(ds).__name__, ds.to_list()
    ('FlatMapDataset', [1, 2, 2])
    """

    def __init__(self, parent: Dataset, fn: Callable[[Any], Iterable]) -> None:
        super().__init__()
        self._parents = (parent,)
        self._fn = fn

    @property
    def name(self) -> str:
        return f"flat_map({getattr(self._fn, '__name__', 'fn')})"

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return _FlatMapIterator(self._parents[0]._build(ctx), self._fn)


class _FlatMapIterator(DatasetIterator):
    def __init__(self, parent: DatasetIterator, fn: Callable[[Any], Iterable]) -> None:
        self._parent = parent
        self._fn = fn
        self._inner: Iterator | None = None
        self._inner_state: dict | None = None  # parent state before the current item
        self._produced = 0
        self._tracking = True

    def _expand(self, item: Any) -> Iterator:
        out = self._fn(item)
        try:
            return iter(out)
        except TypeError:
            raise TypeError(
                f"flat_map: fn must return an iterable, got {type(out).__name__} for item {item!r}"
            ) from None

    def __next__(self) -> Any:
        while True:
            if self._inner is not None:
                try:
                    value = next(self._inner)
                except StopIteration:
                    self._inner = None
                else:
                    self._produced += 1
                    return value
            if self._tracking:
                try:
                    self._inner_state = self._parent.get_state()
                except StateError:
                    self._tracking = False  # get_state will raise for the parent too
            item = next(self._parent)
            self._inner = self._expand(item)
            self._produced = 0

    def get_state(self) -> dict[str, Any]:
        if self._inner is None:
            return {"type": "flat_map", "parent": self._parent.get_state(), "produced": None}
        if not self._tracking:
            self._parent.get_state()  # raises the parent's own explanation
        return {"type": "flat_map", "parent": self._inner_state, "produced": self._produced}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "flat_map", ("parent", "produced"))
        self._parent.set_state(state["parent"])
        self._inner = None
        produced = state["produced"]
        if produced is None:
            return
        produced = non_negative_int("state['produced']", produced)
        self._inner_state = state["parent"]
        try:
            self._inner = self._expand(next(self._parent))
            for _ in range(produced):
                next(self._inner)
        except StopIteration:
            raise InvalidStateError(
                f"state of stage 'flat_map': `produced` {produced} is past the end of the "
                "element it continues") from None
        self._produced = produced

    def close(self) -> None:
        self._inner = None
        self._parent.close()
