"""``Dataset.global_shuffle``: a seeded permutation of a random-access dataset.

Item ``i`` of epoch ``e = i // len`` is the parent's item ``perm_e(i % len)`` where
``perm_e`` is :func:`~feedline.dataset.permutation.permutation` seeded with ``(seed,
e)``: a uniform-looking order over the *whole* dataset, a new one every epoch, resuming
in O(1) (the state is the index). Extra memory is bounded whatever the size: a stored
table of at most 64 Ki entries for a small dataset, a Feistel permutation computed on
the fly (O(1) memory) above that. The result is itself random access.

>>> ds = Dataset.range(6).global_shuffle(seed=0)
>>> sorted(ds.to_list()) == list(range(6))
True
>>> ds.to_list() != ds.to_list()  # a new order each epoch (iteration)
True
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterator
from typing import Any

import numpy as np

from feedline.dataset.base import RandomAccessDataset
from feedline.dataset.permutation import IndexPermutation, TablePermutation, permutation
from feedline.dataset.shuffle import resolve_seed

__all__ = ["GlobalShuffleDataset"]

_CHUNK = 1024


class GlobalShuffleDataset(RandomAccessDataset):
    """Random access through a per-epoch permutation; see the module docstring.

    Args:
        parent: the random-access dataset read.
        seed: the seed of the per-epoch permutations (``None``: a fresh one drawn now; a
            non-int raises ``TypeError``).

    >>> ds = Dataset.range(5).global_shuffle(seed=0)
    >>> order = ds.to_list()
    >>> type(ds).__name__, sorted(order), ds[0] == order[0], Dataset.range(5).global_shuffle(seed=0).to_list() == order
    ('GlobalShuffleDataset', [0, 1, 2, 3, 4], True, True)
    """

    def __init__(self, parent: RandomAccessDataset, *, seed: int | None) -> None:
        super().__init__()
        self._parents: tuple[RandomAccessDataset, ...] = (parent,)
        self._seed = resolve_seed(seed)
        self._n = len(parent)
        self._perm_epoch = -1
        self._perm: IndexPermutation | TablePermutation | None = None
        self._chunk_start = -1
        self._chunk: list[int] = []

    @property
    def name(self) -> str:
        return "global_shuffle"

    def __len__(self) -> int:
        return self._n

    def _permutation(self, epoch: int) -> IndexPermutation | TablePermutation:
        if epoch != self._perm_epoch:
            mixed = int(np.random.SeedSequence([self._seed, epoch]).generate_state(2, np.uint64)[0])
            self._perm = permutation(self._n, mixed)
            self._perm_epoch = epoch
            self._chunk_start = -1
        return self._perm  # type: ignore[return-value]

    def _chunks(self, epoch: int, start: int) -> Iterator[list[int]]:
        perm = self._permutation(epoch)
        n = self._n
        first = start - start % _CHUNK
        for lo in range(first, n, _CHUNK):
            chunk = perm.take(np.arange(lo, min(lo + _CHUNK, n))).tolist()
            yield chunk[start - lo:] if lo == first else chunk

    def _items_for(self, indices: Iterator[int], epoch: int,
                   start: int | None = 0) -> Iterator[Any]:
        if start is None:  # arbitrary indices: one lookup each
            return super()._items_for(indices, epoch, None)
        # permuted positions computed a chunk at a time, kept in lockstep with `indices`
        # (whose position is the iterator's state) by zip: C-level per item
        permuted = itertools.chain.from_iterable(self._chunks(epoch, start))
        synced = map(operator.itemgetter(1), zip(indices, permuted))
        return self._parents[0]._items_for(synced, epoch, None)

    def _getitem(self, index: int) -> Any:
        n = self._n
        if n == 0:
            raise IndexError("global_shuffle of an empty dataset has no items")
        epoch, k = divmod(index, n)
        perm = self._permutation(epoch)
        start = k - k % _CHUNK
        if start != self._chunk_start:
            if start != self._chunk_start + _CHUNK:  # random access: just this index
                return self._parents[0]._getitem(epoch * n + perm[k])
            stop = min(start + _CHUNK, n)  # sequential access: the next chunk at once
            self._chunk = perm.take(np.arange(start, stop)).tolist()
            self._chunk_start = start
        return self._parents[0]._getitem(epoch * n + self._chunk[k - start])
