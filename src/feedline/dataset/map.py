"""``Dataset.map``: apply a function to every item.

* ``num_workers=0`` (default) runs ``fn`` in the consuming thread. Over a random-access
  dataset the result stays random access (``ds.map(f)[i] == f(ds[i])``).
* ``num_workers=N`` runs ``fn`` on ``N`` workers of one engine
  (:mod:`feedline.dataset.parallel_map`) over one of three executors
  (:mod:`feedline.runtime.executor`): ``backend="process"`` (default) worker processes,
  ``backend="thread"`` threads of this process (:mod:`feedline.dataset.thread_map`; for
  functions that release the GIL: image decoding, numpy, zlib, I/O), ``backend="ray"``
  Ray tasks on the cluster ``ray.init()``/``RAY_ADDRESS`` names
  (:mod:`feedline.runtime.ray_executor`; ``execution=ExecutionOptions(ray=RayOptions(...))``
  sets ``num_cpus``, custom ``resources``, ``max_retries``). ``ordered=True`` keeps the source order,
  ``ordered=False`` yields results as they are ready. ``num_workers="auto"`` picks the
  count (processes: by measuring; threads: cores + 1; Ray: the cluster's CPUs).
* ``seed``: each item's random draws come from (seed, epoch, item position)
  (:mod:`feedline.runtime.seeding`), so seeded output is the same on every backend, for
  any worker count, after a retry and after a resume.
* ``execution=ExecutionOptions(timeout=seconds)`` (with ``num_workers > 0``, like
  ``DataLoader``'s ``timeout``): an element whose
  ``fn`` has run longer than that raises
  :class:`~feedline.exceptions.StageTimeoutError` naming the stage and the element's
  position, instead of blocking forever; the iteration ends. A process worker stuck in
  ``fn`` is terminated; a stuck thread cannot be stopped and is abandoned (it ends when
  ``fn`` returns). On Ray a chunk of ``k`` items may take ``k * timeout`` from when it
  is its slot's oldest, and an unanswered chunk whose cluster cannot be reached raises
  :class:`~feedline.exceptions.ClusterUnavailableError` instead. A mapper in the
  consuming thread (``num_workers=0``) cannot be interrupted, so ``timeout`` needs
  ``num_workers > 0``.

The state of an in-thread map is its parent's state: ``fn`` is applied to whatever the
parent yields next.

>>> Dataset.range(4).map(lambda x: x + 10).to_list()
[10, 11, 12, 13]
>>> Dataset.range(4).map(lambda x: x + 10)[2]
12
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, cast

from feedline.dataset.base import BuildContext, Dataset, RandomAccessDataset
from feedline.dataset.iterator import DatasetIterator, TransformIterator

__all__ = ["MapDataset", "RandomAccessMapDataset"]


class _InThreadMap:
    """The parent, ``fn`` and stage name shared by the two in-thread map stages."""

    _parents: tuple[Dataset, ...]

    def __init__(self, parent: Dataset, fn: Callable, name: str) -> None:
        super().__init__()
        self._parents = (parent,)
        self._fn = fn
        self._name = name

    @property
    def name(self) -> str:
        return self._name


class MapDataset(_InThreadMap, Dataset):
    """In-thread map over a stream.

    >>> ds = Dataset.from_reader(lambda: iter([1, 2, 3])).map(lambda x: x * x)
    >>> type(ds).__name__, ds.to_list()
    ('MapDataset', [1, 4, 9])
    """

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        fn = self._fn
        return TransformIterator(self._parents[0]._build(ctx), lambda source: map(fn, source))


class RandomAccessMapDataset(_InThreadMap, RandomAccessDataset):
    """In-thread map over a random-access dataset; stays random access.

    >>> ds = Dataset.range(4).map(lambda x: x * x)
    >>> type(ds).__name__, len(ds), ds[3], ds.to_list()
    ('RandomAccessMapDataset', 4, 9, [0, 1, 4, 9])
    """

    @property
    def _source(self) -> RandomAccessDataset:
        return cast(RandomAccessDataset, self._parents[0])  # Dataset.map checked it

    def __len__(self) -> int:
        return len(self._source)

    def _getitem(self, index: int) -> Any:
        return self._fn(self._source._getitem(index))

    def _items_for(self, indices: Iterator[int], epoch: int, start: int | None = 0) -> Iterator[Any]:
        return map(self._fn, self._source._items_for(indices, epoch, start))
