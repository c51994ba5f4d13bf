"""``Dataset.ragged_batch``: batches of items whose lengths differ (tf.data's
``ragged_batch``), without padding.

A batch of ``batch_size`` consecutive items is collated component by component (a
tuple or dict item has one component per field): a component whose items are scalars
becomes a numpy array of shape ``[batch]``; any other becomes a :class:`RaggedArray`,
the items concatenated along their first axis (``values``) plus ``row_splits``, the
offsets where each item's rows start and end, as a ``tf.RaggedTensor`` holds them. The
items' other axes must agree. The last batch is shorter unless ``drop_remainder=True``.
State: as :meth:`~feedline.dataset.base.Dataset.batch`.

>>> b = Dataset.from_iterable([[1, 2], [3], [4, 5, 6]]).ragged_batch(3).to_list()[0]
>>> b.row_splits.tolist(), b.values.tolist(), b.to_list()
([0, 2, 3, 6], [1, 2, 3, 4, 5, 6], [[1, 2], [3], [4, 5, 6]])
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["RaggedArray", "ragged_collate"]


class RaggedArray:
    """Rows of different lengths: row ``i`` is ``values[row_splits[i]:row_splits[i + 1]]``.

    Args:
        values: the rows' elements, concatenated along the first axis.
        row_splits: ``len(rows) + 1`` offsets into ``values``, starting at 0 and
            non-decreasing (not checked).

    >>> r = RaggedArray(np.arange(5), np.array([0, 2, 5]))
    >>> len(r), r[1].tolist(), r.row_lengths().tolist()
    (2, [2, 3, 4], [2, 3])
    """

    __slots__ = ("values", "row_splits")

    def __init__(self, values: np.ndarray, row_splits: np.ndarray) -> None:
        self.values = values
        self.row_splits = row_splits

    def __len__(self) -> int:
        return len(self.row_splits) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"row {i} out of range for {n} rows")
        i %= n
        return self.values[self.row_splits[i]:self.row_splits[i + 1]]

    def __iter__(self) -> Any:
        return (self[i] for i in range(len(self)))

    def row_lengths(self) -> np.ndarray:
        """The number of rows of each item."""
        return np.diff(self.row_splits)

    def to_list(self) -> list:
        """The rows as nested Python lists."""
        return [row.tolist() for row in self]

    def __repr__(self) -> str:
        return f"RaggedArray({self.to_list()!r})"


def _collate_component(items: list) -> Any:
    arrays = [np.asarray(x) for x in items]
    if all(a.ndim == 0 for a in arrays):
        return np.stack(arrays)
    if any(a.ndim == 0 for a in arrays):
        raise ValueError("ragged_batch: a component mixes scalars and sequences")
    inner = {a.shape[1:] for a in arrays}
    if len(inner) > 1:
        raise ValueError(f"ragged_batch: items differ beyond their first axis: "
                         f"{sorted(inner)}")
    splits = np.zeros(len(arrays) + 1, dtype=np.int64)
    np.cumsum([len(a) for a in arrays], out=splits[1:])
    return RaggedArray(np.concatenate(arrays), splits)


def ragged_collate(items: list) -> Any:
    """Collate one batch; see the module docstring.

    Args:
        items: the batch's items: each a tuple, a dict or one component; a component
            mixing scalars and sequences, or differing beyond its first axis, raises
            ``ValueError``.

    >>> out = ragged_collate([([1, 2], "a"), ([3], "b")])
    >>> out[0].to_list(), out[1].tolist()
    ([[1, 2], [3]], ['a', 'b'])
    """
    first = items[0]
    if isinstance(first, tuple):
        return tuple(_collate_component(list(c)) for c in zip(*items))
    if isinstance(first, dict):
        return {k: _collate_component([x[k] for x in items]) for k in first}
    return _collate_component(items)
