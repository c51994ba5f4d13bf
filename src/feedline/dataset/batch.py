"""``Dataset.batch``: group consecutive items.

Each batch is a ``list`` of ``batch_size`` items (PaddlePaddle's batch reader), or
``collate(list)`` when ``collate`` is given (``"numpy"`` stacks arrays, see
:mod:`feedline.dataset.collate`). The last, smaller batch is kept unless
``drop_remainder=True``. The state is the parent's state between two batches.

>>> Dataset.range(5).batch(2).to_list()
[[0, 1], [2, 3], [4]]
>>> Dataset.range(5).batch(2, drop_remainder=True, collate="numpy").to_list()[1].tolist()
[2, 3]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import islice
from typing import Any

from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.collate import resolve_collate
from feedline.dataset.iterator import DatasetIterator

__all__ = ["BatchDataset"]


class BatchDataset(Dataset):
    """Batches of ``batch_size`` consecutive items of the parent.

    Args:
        parent: the dataset read.
        batch_size: items per batch (a positive int; :meth:`Dataset.batch` checks it).
        drop_remainder: drop a final batch smaller than ``batch_size``.
        collate: ``None`` (each batch is a list), ``"numpy"``
            (:func:`~feedline.dataset.collate.numpy_collate`) or a function of the list;
            another value raises ``ValueError``.

    >>> ds = Dataset.range(5).batch(2)
    >>> type(ds).__name__, ds.to_list()
    ('BatchDataset', [[0, 1], [2, 3], [4]])
    """

    def __init__(
        self, parent: Dataset, batch_size: int, *, drop_remainder: bool, collate: Callable | str | None
    ) -> None:
        super().__init__()
        self._parents = (parent,)
        self._batch_size = batch_size
        self._drop_remainder = bool(drop_remainder)
        self._collate = resolve_collate(collate)

    @property
    def name(self) -> str:
        return f"batch({self._batch_size})"

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return _BatchIterator(
            self._parents[0]._build(ctx), self._batch_size, self._drop_remainder, self._collate
        )


class _BatchIterator(DatasetIterator):
    def __init__(
        self, parent: DatasetIterator, batch_size: int, drop_remainder: bool, collate: Callable | None
    ) -> None:
        self._parent = parent
        self._batch_size = batch_size
        self._drop_remainder = drop_remainder
        self._collate = collate
        self._source: Iterator | None = None

    def __next__(self) -> Any:
        source = self._source
        if source is None:
            source = self._source = self._parent._fast()
        items = list(islice(source, self._batch_size))
        if not items or (self._drop_remainder and len(items) < self._batch_size):
            raise StopIteration
        return items if self._collate is None else self._collate(items)

    def get_state(self) -> dict[str, Any]:
        return self._parent.get_state()

    def set_state(self, state: dict[str, Any]) -> None:
        self._parent.set_state(state)
        self._source = None

    def close(self) -> None:
        self._parent.close()
