"""``Dataset.cardinality()`` and ``len(dataset)``: the number of items, when it is known
without reading the data (tf.data's ``cardinality``).

``cardinality(ds)`` returns the count, :data:`INFINITE` (``-1``, as tf.data's
``INFINITE_CARDINALITY``) for ``repeat()`` of a non-empty dataset, or :data:`UNKNOWN`
(``-2``) when only reading would tell (``filter``, ``flat_map``, ``interleave``,
``unbatch``, a stream from an iterable, ...). It follows the stages down to the source:

* random-access datasets (``range``, lists, ``from_arrays``, ``global_shuffle``,
  ``group``, ``shard``, ...) know their length;
* one-to-one stages (``map``, ``shuffle``, ``prefetch``, ``cache``, ``enumerate``,
  ``scan``) keep their input's count;
* ``batch``/``padded_batch``/``ragged_batch`` give ``ceil(n / batch_size)`` (``floor``
  with ``drop_remainder``), ``take``/``skip``/``repeat``/``concat``/``zip``/``window``
  what tf.data gives.

``len(ds)`` is the count when it is known and raises ``TypeError`` otherwise, as
``len()`` of a tf.data dataset does (so ``list(ds)`` still works).

>>> ds = Dataset.range(10).map(lambda x: x + 1).batch(3)
>>> ds.cardinality(), len(ds)
(4, 4)
>>> Dataset.range(3).repeat().cardinality() == INFINITE
True
>>> Dataset.range(10).filter(bool).cardinality() == UNKNOWN
True
"""

from __future__ import annotations

from collections.abc import Callable

from feedline.dataset.base import Dataset, RandomAccessDataset

__all__ = ["INFINITE", "UNKNOWN", "cardinality"]

INFINITE = -1
"""The cardinality of a dataset that never ends (tf.data's ``INFINITE_CARDINALITY``)."""

UNKNOWN = -2
"""The cardinality of a dataset whose count only reading would tell (tf.data's
``UNKNOWN_CARDINALITY``)."""


def cardinality(ds: Dataset) -> int:
    """The number of items of ``ds``, :data:`INFINITE` or :data:`UNKNOWN`; see the module
    docstring.

    Args:
        ds: the dataset; nothing is read from it.

    >>> cardinality(Dataset.range(5).take(2)), cardinality(Dataset.from_iterable(iter([1])))
    (2, -2)
    """
    own = getattr(ds, "_cardinality", None)
    if own is not None:
        return own()
    if isinstance(ds, RandomAccessDataset):
        return len(ds)
    for klass in type(ds).__mro__:
        rule = _rules().get(klass)
        if rule is not None:
            return rule(ds)
    return UNKNOWN


def _parent(ds: Dataset) -> int:
    return cardinality(ds._parents[0])


def _batch(ds: Dataset) -> int:
    n = _parent(ds)
    if n < 0:
        return n
    size = getattr(ds, "_batch_size", None)
    if not isinstance(size, int):
        return UNKNOWN
    return n // size if getattr(ds, "_drop_remainder", False) else -(-n // size)


def _take(ds: Dataset) -> int:
    n, k = _parent(ds), getattr(ds, "_n", None)
    if not isinstance(k, int):
        return UNKNOWN
    if n == INFINITE:
        return k
    return UNKNOWN if n == UNKNOWN else min(n, k)


def _skip(ds: Dataset) -> int:
    n, k = _parent(ds), getattr(ds, "_n", None)
    if n < 0:
        return n
    return max(n - k, 0) if isinstance(k, int) else UNKNOWN


def _repeat(ds: Dataset) -> int:
    n, epochs = _parent(ds), getattr(ds, "_epochs", None)
    if n == 0:
        return 0
    if epochs is None:
        return INFINITE
    return n if n < 0 else n * epochs


def _concat(ds: Dataset) -> int:
    counts = [cardinality(p) for p in ds._parents]
    if INFINITE in counts:
        return INFINITE
    return UNKNOWN if UNKNOWN in counts else sum(counts)


def _zip(ds: Dataset) -> int:
    counts = [cardinality(p) for p in ds._parents]
    if UNKNOWN in counts:
        return UNKNOWN
    finite = [c for c in counts if c >= 0]
    return min(finite) if finite else INFINITE


_RULES: dict[type, Callable[[Dataset], int]] | None = None


def _rules() -> dict[type, Callable[[Dataset], int]]:
    global _RULES
    if _RULES is None:
        from feedline.dataset.batch import BatchDataset
        from feedline.dataset.cache import FileCacheDataset
        from feedline.dataset.concat import ConcatDataset
        from feedline.dataset.map import MapDataset
        from feedline.dataset.parallel_map import ParallelMapDataset
        from feedline.dataset.prefetch import PrefetchDataset
        from feedline.dataset.process_prefetch import ProcessPrefetchDataset
        from feedline.dataset.repeat import RepeatDataset
        from feedline.dataset.shuffle import ShuffleDataset
        from feedline.dataset.take import SkipDataset, TakeDataset
        from feedline.dataset.thread_map import ThreadMapDataset
        from feedline.dataset.zip import ZipDataset

        _RULES = {
            BatchDataset: _batch, TakeDataset: _take, SkipDataset: _skip,
            RepeatDataset: _repeat, ConcatDataset: _concat, ZipDataset: _zip,
            MapDataset: _parent, ParallelMapDataset: _parent, ThreadMapDataset: _parent, ShuffleDataset: _parent,
            PrefetchDataset: _parent, ProcessPrefetchDataset: _parent,
            FileCacheDataset: _parent,
        }
    return _RULES
