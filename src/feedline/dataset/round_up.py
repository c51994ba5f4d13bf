"""``RandomAccessDataset.round_up``: complete the last batch with the first items.

``ds.round_up(n)`` has ``ceil(len(ds) / n) * n`` items: the parent's ``len(ds)`` items,
then its first ``pad`` items again, ``pad = round_up_length - len(ds)`` (``0`` when
``len(ds)`` is already a multiple of ``n``). This is MXNet's ``round_batch``: batching
the result by ``n`` gives only full batches, and the last one ends with ``pad`` repeats
(``pad_of_last`` tells how many). Item ``e * len + k`` reads the parent's item ``e *
len(ds) + k % len(ds)`` — epoch ``e`` repeats the first items *of epoch e* — so
seeded parents keep their per-epoch order and every epoch has the same length, which is
what equal per-rank batch counts need. An empty parent stays empty.

>>> from feedline.dataset import Dataset
>>> r = Dataset.range(5).round_up(4)
>>> r.to_list(), r.pad_of_last
([0, 1, 2, 3, 4, 0, 1, 2], 3)
>>> r.group(4).to_list()
[[0, 1, 2, 3], [4, 0, 1, 2]]
"""

from __future__ import annotations

from typing import Any

from feedline._internal.validate import positive_int
from feedline.dataset.base import RandomAccessDataset

__all__ = ["RoundUpDataset"]


class RoundUpDataset(RandomAccessDataset):
    """The parent's items, then its first ones again up to a multiple of ``multiple``;
    see the module docstring.

    Args:
        parent: the random-access dataset read (another dataset raises ``TypeError``).
        multiple: the length is rounded up to a multiple of it (a positive int, else
            ``ValueError``/``TypeError``).

    >>> from feedline.dataset import Dataset
    >>> RoundUpDataset(Dataset.range(3), 2).to_list()
    [0, 1, 2, 0]
    """

    def __init__(self, parent: RandomAccessDataset, multiple: int) -> None:
        super().__init__()
        if not isinstance(parent, RandomAccessDataset):
            raise TypeError(
                f"round_up needs a random-access dataset (len + getitem), got {parent!r}"
            )
        self._parents = (parent,)
        self._parent = parent
        self._multiple = positive_int("multiple", multiple)
        self._n = len(parent)
        self._length = -(-self._n // self._multiple) * self._multiple

    @property
    def name(self) -> str:
        return f"round_up({self._multiple})"

    @property
    def pad_of_last(self) -> int:
        """How many of the items are repeats (``len(self) - len(parent)``)."""
        return self._length - self._n

    def __len__(self) -> int:
        return self._length

    def _getitem(self, index: int) -> Any:
        if not self._length:
            raise IndexError("round_up of an empty dataset has no items")
        epoch, k = divmod(index, self._length)
        return self._parent._getitem(epoch * self._n + k % self._n)
