"""``RandomAccessDataset.group``: random-access batching.

``ds.group(n)`` is a random-access dataset whose item ``k`` is the list of the parent's
items ``k*n .. min((k+1)*n, len(ds)) - 1``: ``ceil(len(ds) / n)`` groups, the last one
smaller when ``len(ds)`` is not a multiple of ``n`` (combine with
:meth:`~feedline.dataset.base.RandomAccessDataset.round_up` for equal groups). Item
``e * len + k`` is group ``k`` of epoch ``e``: it reads the parent's items ``e *
len(ds) + j``, so seeded parents (``global_shuffle``) keep their per-epoch order.

Unlike :meth:`~feedline.dataset.base.Dataset.batch` (a stream stage), the result is still
random access: a ``map(fn, num_workers=N)`` after it hands only group numbers to its
workers, and each worker reads the group's items itself — one message per batch.

>>> from feedline.dataset import Dataset
>>> g = Dataset.range(5).group(2)
>>> len(g), g[2], g.to_list()
(3, [4], [[0, 1], [2, 3], [4]])
"""

from __future__ import annotations

from feedline._internal.validate import positive_int
from feedline.dataset.base import RandomAccessDataset

__all__ = ["GroupDataset"]


class GroupDataset(RandomAccessDataset):
    """Groups of ``size`` consecutive items of a random-access parent; see the module
    docstring.

    Args:
        parent: the random-access dataset read (another dataset raises ``TypeError``).
        size: items per group (a positive int, else ``ValueError``/``TypeError``).

    >>> from feedline.dataset import Dataset
    >>> GroupDataset(Dataset.range(4), 3).to_list()
    [[0, 1, 2], [3]]
    """

    def __init__(self, parent: RandomAccessDataset, size: int) -> None:
        super().__init__()
        if not isinstance(parent, RandomAccessDataset):
            raise TypeError(f"group needs a random-access dataset (len + getitem), got {parent!r}")
        self._parents = (parent,)
        self._parent = parent
        self._size = positive_int("size", size)
        self._n = len(parent)
        self._groups = -(-self._n // self._size)

    @property
    def name(self) -> str:
        return f"group({self._size})"

    def __len__(self) -> int:
        return self._groups

    def _getitem(self, index: int) -> list:
        if not self._groups:
            raise IndexError("group of an empty dataset has no items")
        epoch, k = divmod(index, self._groups)
        parent = self._parent
        base = epoch * self._n
        stop = min((k + 1) * self._size, self._n)
        return [parent._getitem(base + j) for j in range(k * self._size, stop)]
