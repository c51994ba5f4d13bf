"""``Dataset.map``: apply a function to every item.

* ``num_workers=0`` (default) runs ``fn`` in the consuming thread. Over a random-access
  dataset the result stays random access (``ds.map(f)[i] == f(ds[i])``).
* ``num_workers=N`` runs ``fn`` on ``N`` workers of one engine
  (:mod:`feedline.dataset.parallel_map`) over one of three executors
  (:mod:`feedline.runtime.executor`): ``backend="process"`` (default) worker processes,
  ``backend="thread"`` threads of this process (:mod:`feedline.dataset.thread_map`; for
  functions that release the GIL: image decoding, numpy, zlib, I/O), ``backend="ray"``
  Ray tasks on the cluster ``ray.init()``/``RAY_ADDRESS`` names
  (:mod:`feedline.runtime.ray_executor`; ``ray_options`` sets ``num_cpus``, custom
  ``resources``, ``max_retries``). ``ordered=True`` keeps the source order,
  ``ordered=False`` yields results as they are ready. ``num_workers="auto"`` picks the
  count (processes: by measuring; threads: cores + 1; Ray: the cluster's CPUs).
* ``seed``: each item's random draws come from (seed, epoch, item position)
  (:mod:`feedline.runtime.seeding`), so seeded output is the same on every backend, for
  any worker count, after a retry and after a resume.
* ``timeout=seconds`` (with ``num_workers > 0``, like ``DataLoader``'s): an element whose
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

from feedline._internal.validate import (
    callable_arg,
    one_of,
    optional_positive_int,
    optional_positive_number,
)
from feedline.dataset.base import BuildContext, Dataset, RandomAccessDataset
from feedline.dataset.iterator import DatasetIterator, TransformIterator

__all__ = ["map_dataset", "MapDataset", "RandomAccessMapDataset"]


def _fn_name(fn: Callable) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


def map_dataset(
    parent: Dataset,
    fn: Callable,
    *,
    num_workers: int | str = 0,
    ordered: bool = True,
    seed: int | None = None,
    name: str | None = None,
    buffer_size: int | None = None,
    backend: str = "process",
    timeout: float | None = None,
    ray_options: dict[str, Any] | None = None,
) -> Dataset:
    """Build the right map stage for ``num_workers`` and ``backend``; see the module docstring.

    >>> type(map_dataset(Dataset.range(3), abs)).__name__           # random access stays so
    'RandomAccessMapDataset'
    >>> stream = Dataset.from_reader(lambda: iter([1, -2]))
    >>> ds = map_dataset(stream, abs)
    >>> type(ds).__name__, ds.name, ds.to_list()
    ('MapDataset', 'map(abs)', [1, 2])
    >>> type(map_dataset(stream, abs, num_workers=2, backend="thread")).__name__
    'ThreadMapDataset'
    """
    callable_arg("fn", fn)
    timeout = optional_positive_number("timeout", timeout)
    label = name or f"map({_fn_name(fn)})"
    optional_positive_int("buffer_size", buffer_size)
    one_of("backend", backend, ("process", "thread", "ray"))
    parallel = num_workers == "auto" or (
        isinstance(num_workers, int) and not isinstance(num_workers, bool) and num_workers > 0)
    if parallel and backend == "thread":
        from feedline.dataset.thread_map import ThreadMapDataset

        if ray_options:
            raise ValueError("`ray_options` needs backend='ray'")
        return ThreadMapDataset(parent, fn, workers=num_workers, ordered=ordered, seed=seed,
                                buffer_size=buffer_size, name=label, timeout=timeout)
    if parallel:
        from feedline.dataset.parallel_map import ParallelMapDataset

        return ParallelMapDataset(
            parent, fn, workers=num_workers, ordered=ordered, seed=seed, name=label,
            buffer_size=buffer_size, timeout=timeout, backend=backend,
            ray_options=ray_options,
        )
    if num_workers != 0:
        raise ValueError(f"`num_workers` must be a non-negative int or 'auto', got {num_workers!r}")
    if timeout is not None:
        raise ValueError(
            "`timeout` needs `num_workers` > 0: a mapper running in the consuming thread cannot "
            "be interrupted"
        )
    if isinstance(parent, RandomAccessDataset):
        return RandomAccessMapDataset(parent, fn, label)
    return MapDataset(parent, fn, label)


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
        return cast(RandomAccessDataset, self._parents[0])  # map_dataset checked it

    def __len__(self) -> int:
        return len(self._source)

    def _getitem(self, index: int) -> Any:
        return self._fn(self._source._getitem(index))

    def _items_for(self, indices: Iterator[int], epoch: int, start: int | None = 0) -> Iterator[Any]:
        return map(self._fn, self._source._items_for(indices, epoch, start))
