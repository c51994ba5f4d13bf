"""Seeded pseudo-random permutations of ``range(n)``: O(1) memory for any ``n``, or a
table for small ``n`` (:func:`permutation` picks).

``IndexPermutation(n, seed)`` maps each index to a distinct index with a balanced
Feistel network over the smallest even number of bits covering ``n`` (four rounds,
splitmix64-style round function), walking the cycle until the value falls below ``n``.
Nothing is stored per element, so it suits datasets of any size.

>>> p = IndexPermutation(10, seed=3)
>>> sorted(p[i] for i in range(10)) == list(range(10))
True
>>> p.take(range(3)).tolist() == [p[0], p[1], p[2]]
True
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["IndexPermutation", "TablePermutation", "permutation"]

#: Up to this many elements :func:`permutation` stores the whole permutation (at most
#: 512 KiB): a table is about 50 times faster to draw than the Feistel walk on small n.
TABLE_MAX = 1 << 16

_ROUNDS = 4
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = 0x9E3779B97F4A7C15


_U64 = 2**64 - 1


def _mix_int(x: int) -> int:
    """:func:`_mix` on one Python int (64-bit wrap-around arithmetic)."""
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & _U64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & _U64
    return x ^ (x >> 31)


def _mix(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


class IndexPermutation:
    """A bijection of ``range(n)`` chosen by ``seed``; see the module docstring.

    Args:
        n: the number of indices (negative raises ``ValueError``).
        seed: any int (taken modulo 2**64).

    >>> p = IndexPermutation(10, seed=3)
    >>> out = p.take(range(10))
    >>> sorted(out.tolist()) == list(range(10)), IndexPermutation(10, seed=3).take([0, 1]).tolist() == out[:2].tolist()
    (True, True)
    """

    def __init__(self, n: int, seed: int) -> None:
        if n < 0:
            raise ValueError(f"`n` must be a non-negative int, got {n}")
        self.n = n
        bits = max(2, (max(n - 1, 1)).bit_length())
        bits += bits % 2
        self._half = bits // 2
        self._mask = np.uint64((1 << self._half) - 1)
        seed = int(seed) & (2**64 - 1)
        self._keys_int = [(seed * (r + 1) + _GOLDEN * (r + 7)) & _U64 for r in range(_ROUNDS)]
        self._keys = [np.uint64(k) for k in self._keys_int]
        self._mask_int = (1 << self._half) - 1

    def _feistel(self, x: np.ndarray) -> np.ndarray:
        half, mask = np.uint64(self._half), self._mask
        left, right = x >> half, x & mask
        for key in self._keys:
            left, right = right, left ^ (_mix(right ^ key) & mask)
        return (left << half) | right

    def take(self, indices: Iterable[int] | np.ndarray) -> np.ndarray:
        """The images of ``indices`` as an int64 array.

        Args:
            indices: indices in ``range(n)``; one at or above ``n`` raises ``IndexError``.

        >>> IndexPermutation(4, seed=0).take([]).tolist()
        []
        """
        x = np.asarray(indices, dtype=np.uint64).copy()
        if x.size and int(x.max()) >= self.n:
            raise IndexError(f"index {int(x.max())} out of range for a permutation of {self.n}")
        with np.errstate(over="ignore"):
            x = self._feistel(x)
            out = x >= np.uint64(self.n)
            while out.any():
                x[out] = self._feistel(x[out])
                out = x >= np.uint64(self.n)
        return x.astype(np.int64)

    def __getitem__(self, index: int) -> int:
        """The image of one index, in plain integer arithmetic (same result as ``take``)."""
        if not 0 <= index < self.n:
            raise IndexError(f"index {index} out of range for a permutation of {self.n}")
        half, mask, keys = self._half, self._mask_int, self._keys_int
        x = index
        while True:
            left, right = x >> half, x & mask
            for key in keys:
                left, right = right, left ^ (_mix_int(right ^ key) & mask)
            x = (left << half) | right
            if x < self.n:
                return x

    def __len__(self) -> int:
        return self.n


class TablePermutation:
    """A permutation of ``range(n)`` drawn whole by numpy's PCG64 generator seeded with
    ``seed`` and stored as a table (O(n) memory; meant for small ``n``). Same interface
    as :class:`IndexPermutation`.

    Args:
        n: the number of indices (negative raises ``ValueError``).
        seed: any int (taken modulo 2**64).

    >>> p = TablePermutation(5, seed=3)
    >>> sorted(p.take(range(5)).tolist()), p[0] == int(p.take([0])[0])
    ([0, 1, 2, 3, 4], True)
    """

    def __init__(self, n: int, seed: int) -> None:
        if n < 0:
            raise ValueError(f"`n` must be a non-negative int, got {n}")
        self.n = n
        self._table = np.random.default_rng(int(seed) & (2**64 - 1)).permutation(n)

    def take(self, indices: Iterable[int] | np.ndarray) -> np.ndarray:
        """The images of ``indices`` as an int64 array.

        Args:
            indices: indices in ``range(n)``; one outside it raises ``IndexError``.

        >>> sorted(TablePermutation(3, seed=0).take([0, 1, 2]).tolist())
        [0, 1, 2]
        """
        x = np.asarray(indices, dtype=np.int64)
        if x.size and (int(x.max()) >= self.n or int(x.min()) < 0):
            bad = int(x.max()) if int(x.max()) >= self.n else int(x.min())
            raise IndexError(f"index {bad} out of range for a permutation of {self.n}")
        return self._table[x]

    def __getitem__(self, index: int) -> int:
        if not 0 <= index < self.n:
            raise IndexError(f"index {index} out of range for a permutation of {self.n}")
        return int(self._table[index])

    def __len__(self) -> int:
        return self.n


def permutation(n: int, seed: int) -> IndexPermutation | TablePermutation:
    """The permutation of ``range(n)`` for ``seed``: a :class:`TablePermutation` when
    ``n <= TABLE_MAX``, else an :class:`IndexPermutation` (O(1) memory).

    Args:
        n: the number of indices.
        seed: any int (taken modulo 2**64).

    >>> type(permutation(10, 1)).__name__, type(permutation(TABLE_MAX + 1, 1)).__name__
    ('TablePermutation', 'IndexPermutation')
    """
    if n <= TABLE_MAX:
        return TablePermutation(n, seed)
    return IndexPermutation(n, seed)
