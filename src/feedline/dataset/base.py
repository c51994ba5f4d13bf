"""The :class:`Dataset`: a lazy pipeline of stages.

A ``Dataset`` is a description — a source followed by stages — and building an
iterator from it does the work. Every stage lives in its own module of
:mod:`feedline.dataset`; the methods here only construct them.

Semantics shared by every stage:

* ``iter(ds)``, ``ds()`` and ``ds.iterator()`` each return a fresh iterator, so a
  ``Dataset`` *is* a PaddlePaddle reader and can be iterated any number of times.
* Each top-level iteration has an *epoch* number (0, 1, 2, ... in the order iterations
  are started). Seeded stages (``shuffle``, ``global_shuffle``) derive their order from
  ``(seed, epoch)``, so every iteration gets a new order and the sequence of orders is
  the same in every run with the same seed (tf.data's ``reshuffle_each_iteration``).
* ``it.get_state()`` returns a small JSON-serialisable dict; ``ds.iterator(state)``
  continues with exactly the items the uninterrupted iterator would have produced next.

>>> ds = Dataset.range(10).map(lambda x: x * x).filter(lambda x: x % 2 == 0).batch(2)
>>> it = ds.iterator()
>>> next(it)
[0, 4]
>>> state = it.get_state()
>>> list(ds.iterator(state))
[[16, 36], [64]]
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from feedline._validate import callable_arg, non_negative_int, optional_positive_int, positive_int
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.exceptions import StateError

__all__ = ["Dataset", "RandomAccessDataset", "BuildContext", "PipelineIterator"]

T = TypeVar("T")

STATE_VERSION = 1


@dataclass(frozen=True)
class BuildContext:
    """What a stage needs to know when its iterator is built.

    ``epoch`` seeds per-iteration randomness; ``stats`` is a statistics collector (or
    ``None``) that wraps every stage iterator to time it.
    """

    epoch: int = 0
    stats: Any = None

    def with_epoch(self, epoch: int) -> BuildContext:
        return replace(self, epoch=epoch)


class Dataset(Generic[T]):
    """A lazy pipeline: a source, then stages. See the module docstring.

    Subclasses implement :meth:`_make_iterator`; ``_parents`` lists the datasets a stage
    reads from (for statistics and pretty-printing).
    """

    _parents: tuple[Dataset, ...] = ()

    def __init__(self) -> None:
        self._iterations = 0

    # ------------------------------------------------------------------ building
    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator[T]:  # pragma: no cover
        raise NotImplementedError

    def _build(self, ctx: BuildContext) -> DatasetIterator[T]:
        """Build this stage's iterator (wrapped for statistics when collecting)."""
        it = self._make_iterator(ctx)
        if ctx.stats is not None:
            it = ctx.stats.wrap(self, it)
        return it

    @property
    def name(self) -> str:
        """Short human-readable name of the stage, e.g. ``map(decode)``."""
        return type(self).__name__

    def close(self) -> None:
        """Release what this pipeline keeps between iterations — the worker processes of
        every ``map(..., workers=N)`` stage in it — now rather than at garbage collection.
        A later iteration starts them again. Iterators are closed separately."""
        seen: set[int] = set()
        stack: list[Dataset] = [self]
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            node._release()
            stack.extend(node._parents)

    def _release(self) -> None:
        """Free resources held across iterations (worker pools); the default holds none."""

    def __repr__(self) -> str:
        chain = []
        node: Dataset | None = self
        while node is not None:
            chain.append(node.name)
            node = node._parents[0] if node._parents else None
        return "Dataset(" + " <- ".join(chain) + ")"

    # ------------------------------------------------------------------ iterating
    def iterator(self, state: dict | None = None, *, epoch: int | None = None,
                 stats: Any = None) -> PipelineIterator[T]:
        """Return a fresh iterator; with ``state`` (from ``get_state()``), resume there.

        ``epoch``: run this iteration number (seeding ``shuffle``/``global_shuffle``)
        instead of the next one; later iterations continue from ``epoch + 1``. A training
        loop restarted in a new process passes its pass number here.
        ``stats``: a :class:`feedline.runtime.stats.PipelineStats` (or ``True`` for a new
        one) that records per-stage timing; read it with ``it.stats()``.

        >>> ds = Dataset.range(5).global_shuffle(seed=1)
        >>> _ = ds.to_list(); second = ds.to_list()
        >>> list(Dataset.range(5).global_shuffle(seed=1).iterator(epoch=1)) == second
        True
        """
        if epoch is not None:
            if state is not None:
                raise ValueError("pass either `state` or `epoch`: a state carries its epoch")
            self._iterations = non_negative_int("epoch", epoch)
        if stats is True:
            from feedline.runtime.stats import PipelineStats

            stats = PipelineStats()
        if stats is not None and hasattr(stats, "mark_root"):
            stats.mark_root(self)
        if state is None:
            epoch = self._iterations
            self._iterations += 1
            it = self._build(BuildContext(epoch=epoch, stats=stats))
            return PipelineIterator(it, epoch, stats)
        check_state(state, "pipeline", ("version", "epoch", "stages"))
        if state["version"] != STATE_VERSION:
            raise StateError(
                f"state version {state['version']} is not supported (expected {STATE_VERSION})"
            )
        epoch = non_negative_int("state['epoch']", state["epoch"])
        self._iterations = max(self._iterations, epoch + 1)
        it = self._build(BuildContext(epoch=epoch, stats=stats))
        try:
            it.set_state(state["stages"])
        except BaseException:
            it.close()
            raise
        return PipelineIterator(it, epoch, stats)

    def __iter__(self) -> Iterator[T]:
        return self.iterator()

    def __call__(self) -> Iterator[T]:
        """A Dataset is a PaddlePaddle reader: calling it returns a fresh iterator."""
        return self.iterator()

    def to_list(self) -> list[T]:
        """Iterate once and return every item (closes the iterator)."""
        with self.iterator() as it:
            return list(it)

    # ------------------------------------------------------------------ sources
    @staticmethod
    def from_iterable(iterable: Iterable[T], *, deterministic: bool | None = None) -> Dataset[T]:
        """A dataset over ``iterable``; see :func:`feedline.dataset.sources.from_iterable`."""
        from feedline.dataset.sources import from_iterable

        return from_iterable(iterable, deterministic=deterministic)

    @staticmethod
    def from_reader(reader: Callable[[], Iterable[T]], *, deterministic: bool = False) -> Dataset[T]:
        """A dataset over a PaddlePaddle reader; see :func:`feedline.dataset.sources.from_reader`."""
        from feedline.dataset.sources import from_reader

        return from_reader(reader, deterministic=deterministic)

    @staticmethod
    def from_arrays(*arrays: Sequence) -> RandomAccessDataset:
        """Preloaded data; see :func:`feedline.dataset.sources.from_arrays`."""
        from feedline.dataset.sources import from_arrays

        return from_arrays(*arrays)

    @staticmethod
    def range(*args: int) -> RandomAccessDataset[int]:
        """``Dataset.range(stop)`` / ``range(start, stop[, step])`` of ints, random access."""
        from feedline.dataset.sources import range_dataset

        return range_dataset(*args)

    @staticmethod
    def from_random_access(source: Any) -> RandomAccessDataset:
        """Any object with ``__len__`` and ``__getitem__(int)``, as a random-access dataset."""
        from feedline.dataset.sources import from_random_access

        return from_random_access(source)

    @staticmethod
    def from_source(factory: Callable[[], DatasetIterator[T]], *, name: str = "source") -> Dataset[T]:
        """A dataset whose iterators come from ``factory()`` (a stateful record reader)."""
        from feedline.dataset.sources import from_source

        return from_source(factory, name=name)

    # ------------------------------------------------------------------ stages
    def map(
        self,
        fn: Callable[[T], Any],
        *,
        workers: int | str = 0,
        ordered: bool = True,
        seed: int | None = None,
        name: str | None = None,
        buffer_size: int | None = None,
        backend: str = "process",
    ) -> Dataset:
        """Apply ``fn`` to every item, in this thread, ``workers`` processes, or ``workers``
        threads (``backend="thread"``); see :mod:`feedline.dataset.map`."""
        from feedline.dataset.map import map_dataset

        return map_dataset(
            self, fn, workers=workers, ordered=ordered, seed=seed, name=name,
            buffer_size=buffer_size, backend=backend,
        )

    def filter(self, predicate: Callable[[T], bool]) -> Dataset[T]:
        """Keep the items for which ``predicate(item)`` is true."""
        from feedline.dataset.filter import FilterDataset

        return FilterDataset(self, callable_arg("predicate", predicate))

    def flat_map(self, fn: Callable[[T], Iterable[Any]]) -> Dataset:
        """Replace every item by the 0..n items of ``fn(item)``, in order."""
        from feedline.dataset.flat_map import FlatMapDataset

        return FlatMapDataset(self, callable_arg("fn", fn))

    def shuffle(self, buffer_size: int, *, seed: int | None = None) -> Dataset[T]:
        """Buffer shuffle with TF's ``min_after_dequeue`` meaning; see :mod:`feedline.dataset.shuffle`."""
        from feedline.dataset.shuffle import ShuffleDataset

        return ShuffleDataset(self, positive_int("buffer_size", buffer_size), seed=seed)

    def global_shuffle(self, *, seed: int | None = None) -> RandomAccessDataset[T]:
        """Shuffle a random-access dataset by a seeded permutation, new each epoch."""
        from feedline.dataset.global_shuffle import GlobalShuffleDataset

        if not isinstance(self, RandomAccessDataset):
            raise TypeError(
                f"global_shuffle needs a random-access dataset (len + getitem), got {self.name}; "
                "use shuffle(buffer_size) for streams"
            )
        return GlobalShuffleDataset(self, seed=seed)

    def batch(
        self, batch_size: int, *, drop_last: bool = False, collate: Callable | str | None = None
    ) -> Dataset:
        """Group consecutive items into lists (or ``collate(list)``); see :mod:`feedline.dataset.batch`."""
        from feedline.dataset.batch import BatchDataset

        return BatchDataset(self, positive_int("batch_size", batch_size), drop_last=drop_last,
                            collate=collate)

    def take(self, n: int) -> Dataset[T]:
        """The first ``n`` items (fewer if the dataset is shorter)."""
        from feedline.dataset.take import TakeDataset

        return TakeDataset(self, non_negative_int("n", n))

    def skip(self, n: int) -> Dataset[T]:
        """Every item after the first ``n``."""
        from feedline.dataset.take import SkipDataset

        return SkipDataset(self, non_negative_int("n", n))

    def repeat(self, epochs: int | None = None) -> Dataset[T]:
        """Iterate ``epochs`` times (forever when ``None``), a new epoch number each time."""
        from feedline.dataset.repeat import RepeatDataset

        return RepeatDataset(self, optional_positive_int("epochs", epochs))

    def prefetch(self, buffer_size: int | str = 2) -> Dataset[T]:
        """Produce up to ``buffer_size`` items ahead in a background thread."""
        from feedline.dataset.prefetch import PrefetchDataset

        return PrefetchDataset(self, buffer_size)

    def concat(self, *others: Dataset) -> Dataset:
        """This dataset's items, then each of ``others``' items."""
        from feedline.dataset.concat import ConcatDataset

        return ConcatDataset((self, *others))

    def zip(self, *others: Dataset, strict: bool = False) -> Dataset[tuple]:
        """Tuples of one item from each dataset; ends with the shortest (``strict``: all
        must end together)."""
        from feedline.dataset.zip import ZipDataset

        return ZipDataset((self, *others), strict=strict)

    def shard(self, rank: int | None = None, world_size: int | None = None, *,
              policy: str = "pad") -> Dataset[T]:
        """This rank's part, exactly once across ranks; see :mod:`feedline.dataset.shard`.
        ``rank``/``world_size`` default to torch.distributed's, else ``RANK``/``WORLD_SIZE``."""
        from feedline.dataset.shard import shard_dataset
        from feedline.io.split import resolve_rank_world

        rank, world_size = resolve_rank_world(rank, world_size)
        return shard_dataset(self, rank, world_size, policy=policy)

    def interleave(self, fn: Callable[[T], Dataset], *, cycle_length: int,
                   block_length: int = 1, num_parallel_reads: int | None = None) -> Dataset:
        """Read several datasets made by ``fn(item)`` at once, round robin; see
        :mod:`feedline.dataset.interleave`."""
        from feedline.dataset.interleave import InterleaveDataset

        return InterleaveDataset(self, callable_arg("fn", fn), cycle_length=cycle_length,
                                 block_length=block_length,
                                 num_parallel_reads=num_parallel_reads)

    def bucket_by_length(self, *, length_fn: Callable[[T], int], bucket_boundaries: Sequence[int],
                         bucket_batch_sizes: Sequence[int] | None = None,
                         max_tokens: int | None = None, drop_remainder: bool = False) -> Dataset:
        """Batches of items of similar length; see :mod:`feedline.dataset.bucket`."""
        from feedline.dataset.bucket import bucket_by_length

        return bucket_by_length(self, length_fn=length_fn, bucket_boundaries=bucket_boundaries,
                                bucket_batch_sizes=bucket_batch_sizes, max_tokens=max_tokens,
                                drop_remainder=drop_remainder)

    def apply(self, transformation: Callable[[Dataset[T]], Dataset]) -> Dataset:
        """``transformation(self)``: chain a custom dataset-to-dataset function."""
        return callable_arg("transformation", transformation)(self)


class PipelineIterator(DatasetIterator[T]):
    """The iterator a :class:`Dataset` returns: the last stage plus the epoch number.

    ``get_state()`` returns ``{"type": "pipeline", "version", "epoch", "stages"}``.
    """

    def __init__(self, it: DatasetIterator[T], epoch: int, stats: Any = None) -> None:
        self._it = it
        self.epoch = epoch
        self._stats = stats
        self._closed = False

    def __next__(self) -> T:
        return next(self._it)

    def get_state(self) -> dict[str, Any]:
        return {
            "type": "pipeline",
            "version": STATE_VERSION,
            "epoch": self.epoch,
            "stages": self._it.get_state(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "pipeline", ("version", "epoch", "stages"))
        if state["epoch"] != self.epoch:
            raise StateError(
                f"state is for epoch {state['epoch']}, this iterator runs epoch {self.epoch}; "
                "use dataset.iterator(state)"
            )
        self._it.set_state(state["stages"])

    def stats(self) -> Any:
        """The statistics collected so far (needs ``dataset.iterator(stats=True)``)."""
        if self._stats is None:
            raise StateError("statistics were not collected: use dataset.iterator(stats=True)")
        return self._stats.report()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._it.close()


class RandomAccessDataset(Dataset[T]):
    """A dataset with ``len`` and ``__getitem__``; iterating reads indices in order.

    Indices at or beyond ``len`` wrap around: ``ds[i] == ds[i % len(ds)]`` for plain
    sources, while seeded stages such as :meth:`global_shuffle` use ``i // len(ds)`` as
    the epoch. Iteration number ``e`` reads indices ``e*len .. (e+1)*len - 1``, which is
    how every epoch of a global shuffle gets a new order.

    Subclasses implement ``__len__`` and ``_getitem(i)`` for any ``i >= 0``.
    """

    def __len__(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def _getitem(self, index: int) -> T:  # pragma: no cover - abstract
        raise NotImplementedError

    def _items_for(self, indices: Iterator[int], epoch: int,
                   start: int | None = 0) -> Iterator[T]:
        """Items ``epoch*len + k`` for each ``k`` (in ``range(len)``) pulled from
        ``indices``, lazily, exactly one index per item. ``start`` is the first index when
        ``indices`` yields consecutive ``start, start + 1, ...``, or ``None`` when it yields
        arbitrary indices. Subclasses override it with cheaper, C-level compositions."""
        base = epoch * len(self)
        if base == 0:
            return map(self._getitem, indices)
        return map(self._getitem, map(base.__add__, indices))

    def __getitem__(self, index: int) -> T:
        if isinstance(index, bool) or not isinstance(index, int):
            try:
                index = index.__index__()
            except AttributeError:
                raise TypeError(f"dataset indices must be ints, got {index!r}") from None
        n = len(self)
        if index < 0:
            index += n
            if index < 0:
                raise IndexError(f"index {index - n} out of range for a dataset of {n} items")
        return self._getitem(index)

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator[T]:
        return IndexIterator(self, ctx.epoch)

    def group(self, size: int) -> RandomAccessDataset[list]:
        """Random-access batching: item ``k`` is the list of items ``k*size ..
        (k+1)*size - 1`` (the last group smaller); see :mod:`feedline.dataset.group`.

        >>> Dataset.range(5).group(2).to_list()
        [[0, 1], [2, 3], [4]]
        """
        from feedline.dataset.group import GroupDataset

        return GroupDataset(self, size)

    def round_up(self, multiple: int) -> RandomAccessDataset[T]:
        """Repeat the first items until the length is a multiple of ``multiple`` (MXNet's
        ``round_batch``); see :mod:`feedline.dataset.round_up`.

        >>> Dataset.range(5).round_up(4).to_list()
        [0, 1, 2, 3, 4, 0, 1, 2]
        """
        from feedline.dataset.round_up import RoundUpDataset

        return RoundUpDataset(self, multiple)


class IndexIterator(DatasetIterator[T]):
    """Reads ``ds[epoch*len + k]`` for ``k = 0 .. len-1``; state ``{"next": k}``.

    The indices come from a ``range`` iterator whose position is read back for the
    state, so the per-item path (``ds._items_for``) can be C-level ``map`` calls.
    """

    def __init__(self, ds: RandomAccessDataset[T], epoch: int) -> None:
        self._ds = ds
        self._n = len(ds)
        self._epoch = epoch
        self._open(0)

    def _open(self, start: int) -> None:
        self._start = start
        self._indices = iter(range(start, self._n))
        self._items = self._ds._items_for(self._indices, self._epoch, start)

    def __next__(self) -> T:
        return next(self._items)

    def _fast(self) -> Iterator[T]:
        return self._items

    def get_state(self) -> dict[str, Any]:
        consumed = self._indices.__reduce__()[2]
        return {"type": "index", "next": self._start + consumed, "len": self._n}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "index", ("next", "len"))
        if state["len"] != self._n:
            raise StateError(
                f"state is for a dataset of {state['len']} items, this one has {self._n}"
            )
        self._open(min(non_negative_int("state['next']", state["next"]), self._n))


def _json_size(state: dict) -> int:
    """Size in bytes of ``state`` as JSON (used by tests that check states stay small)."""
    return len(json.dumps(state))

