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
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from feedline._internal.state import restore, state_int
from feedline._internal.validate import (
    UNSET,
    callable_arg,
    non_negative_int,
    optional_positive_int,
    positive_int,
)
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.exceptions import StateError

if TYPE_CHECKING:  # the PyTorch face sits above this layer; only its types are named here
    from feedline.dataset.options import ErrorOptions, ExecutionOptions, RayOptions
    from feedline.pytorch.dataset import TorchIterableDataset, TorchMapDataset

__all__ = ["Dataset", "RandomAccessDataset", "BuildContext", "PipelineIterator"]

T = TypeVar("T")
U = TypeVar("U")

STATE_VERSION = 1



@dataclass(frozen=True)
class BuildContext:
    """What a stage needs to know when its iterator is built.

    Args:
        epoch: the iteration number; seeded stages derive their per-iteration
            randomness from it.
        stats: a statistics collector that wraps every stage iterator to time it, or
            ``None`` (no timing).

    >>> ctx = BuildContext(epoch=0)
    >>> ctx, ctx.with_epoch(3)
    (BuildContext(epoch=0, stats=None), BuildContext(epoch=3, stats=None))
    """

    epoch: int = 0
    stats: Any = None

    def with_epoch(self, epoch: int) -> BuildContext:
        """A copy of this context with another epoch (the same ``stats``).

        Args:
            epoch: the iteration number of the copy.

        >>> BuildContext(epoch=1).with_epoch(2).epoch
        2
        """
        return replace(self, epoch=epoch)


class Dataset(Generic[T]):
    """A lazy pipeline: a source, then stages. See the module docstring.

    Subclasses implement :meth:`_make_iterator`; ``_parents`` lists the datasets a stage
    reads from (for statistics and pretty-printing).

    >>> ds = Dataset.range(10).filter(lambda x: x % 2 == 0).map(lambda x: x * 10).batch(2)
    >>> ds.to_list()
    [[0, 20], [40, 60], [80]]
    >>> it = ds.iterator(); first = next(it)
    >>> list(ds.iterator(it.get_state()))          # resume exactly after the first batch
    [[40, 60], [80]]
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
        """Short human-readable name of the stage, as statistics and ``repr`` show it.

        >>> Dataset.range(3).map(abs).name
        'map(abs)'
        """
        return type(self).__name__

    #: Whether the state of this stage's iterator may be resumed on a different world size
    #: (``shard``), so that a stage reading it must capture that state before every item
    #: instead of every few (a state that counts items to skip after a capture cannot be
    #: carried to another world size). ``True`` for ``shard``; other stages inherit it
    #: from their inputs (:attr:`exact_states`).
    reshardable_state: bool = False

    @property
    def exact_states(self) -> bool:
        """Whether this stage or one of its inputs has :attr:`reshardable_state`: a worker
        stage reading it then captures its state before every item.

        >>> Dataset.range(4).exact_states, Dataset.range(4).shard(0, 2).map(abs).exact_states
        (False, True)
        """
        if self.reshardable_state:
            return True
        return any(p.exact_states for p in getattr(self, "_parents", ()) or ())

    def close(self) -> None:
        """Release what this pipeline keeps between iterations — the worker processes of
        every ``map(..., num_workers=N)`` stage in it — now rather than at garbage collection.
        A later iteration starts them again. Iterators are closed separately.

        >>> ds = Dataset.range(4).map(abs, num_workers=1)
        >>> ds.to_list()
        [0, 1, 2, 3]
        >>> ds.close(); ds.to_list()          # the workers start again when needed
        [0, 1, 2, 3]
        >>> ds.close()
        """
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

        Args:
            state: a state from ``it.get_state()``: continue exactly where it was taken.
            epoch: run this iteration number (seeding ``shuffle``/``global_shuffle``)
                instead of the next one; later iterations continue from ``epoch + 1``. A
                training loop restarted in a new process passes its pass number here.
            stats: a :class:`feedline.runtime.stats.PipelineStats` (or ``True`` for a new
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
        epoch = state_int(state, "epoch", "pipeline")
        self._iterations = max(self._iterations, epoch + 1)
        it = self._build(BuildContext(epoch=epoch, stats=stats))
        try:
            restore(it, state["stages"])  # malformed values: InvalidStateError
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
        """Iterate once (a new epoch) and return every item as a list; the iterator is
        closed even if an item raises.

        >>> Dataset.range(3).map(lambda x: x * 10).to_list()
        [0, 10, 20]
        """
        with self.iterator() as it:
            return list(it)

    # ------------------------------------------------------------------ sources
    @staticmethod
    def from_iterable(iterable: Iterable[T], *, deterministic: bool | None = None) -> Dataset[T]:
        """A dataset over ``iterable``; see :func:`feedline.dataset.sources.from_iterable`.

        Args:
            iterable: the items. A list, tuple or range is random access; another
                iterable is iterated afresh each epoch if it can be (a one-shot iterator
                can be read once, and its position cannot be restored).
            deterministic: for an iterable that is neither a sequence nor a one-shot
                iterator: ``True`` declares that it yields the same items in the same
                order every time, so a state resumes by re-reading and skipping;
                ``None``/``False``: ``get_state()`` raises
                :class:`~feedline.exceptions.StateNotSupportedError`.

        >>> Dataset.from_iterable(["a", "b"]).batch(2).to_list()
        [['a', 'b']]
        """
        from feedline.dataset.sources import from_iterable

        return from_iterable(iterable, deterministic=deterministic)

    @staticmethod
    def from_reader(reader: Callable[[], Iterable[T]], *, deterministic: bool = False) -> Dataset[T]:
        """A dataset over a PaddlePaddle reader (a zero-argument callable returning an
        iterable), called once per epoch; see :func:`feedline.dataset.sources.from_reader`.

        Args:
            reader: the zero-argument callable, called at the start of every iteration.
            deterministic: ``True`` declares that every call yields the same items in the
                same order, so a state can be resumed by calling ``reader`` again and
                skipping; ``False`` (default) makes ``get_state()`` raise
                :class:`~feedline.exceptions.StateNotSupportedError`.

        >>> def reader():
        ...     return iter([1, 2, 3])
        >>> Dataset.from_reader(reader).to_list()
        [1, 2, 3]
        """
        from feedline.dataset.sources import from_reader

        return from_reader(reader, deterministic=deterministic)

    @staticmethod
    def from_arrays(*arrays: Sequence) -> RandomAccessDataset:
        """Preloaded data (TensorFlow's "preloaded data"): item ``i`` is the tuple of every
        array's row ``i`` (the row itself for one array); random access. All arrays must
        have the same length. See :func:`feedline.dataset.sources.from_arrays`.

        >>> import numpy as np
        >>> Dataset.from_arrays(np.arange(3), ["a", "b", "c"]).to_list()[1]
        (np.int64(1), 'b')
        """
        from feedline.dataset.sources import from_arrays

        return from_arrays(*arrays)

    @staticmethod
    def range(*args: int) -> RandomAccessDataset[int]:
        """``Dataset.range(stop)`` / ``range(start, stop[, step])``: Python ints as
        :func:`range` gives them; random access.

        >>> Dataset.range(2, 10, 3).to_list()
        [2, 5, 8]
        """
        from feedline.dataset.sources import range_dataset

        return range_dataset(*args)

    @staticmethod
    def from_random_access(source: Any) -> RandomAccessDataset:
        """Any object with ``__len__`` and ``__getitem__(int)``, as a random-access dataset
        (``global_shuffle``, index sharding and worker reads by index work on it).

        Args:
            source: the object; item ``i`` is ``source[i]`` and the length ``len(source)``.

        >>> Dataset.from_random_access("abc").global_shuffle(seed=0).to_list() != []
        True
        """
        from feedline.dataset.sources import from_random_access

        return from_random_access(source)

    @staticmethod
    def from_source(factory: Callable[[], DatasetIterator[T]], *, name: str = "source") -> Dataset[T]:
        """A dataset whose iterators come from ``factory()``: a stateful record reader (a
        :class:`~feedline.dataset.iterator.DatasetIterator` with ``get_state``/``set_state``),
        so the pipeline resumes exactly through it.

        Args:
            factory: a zero-argument callable returning a new iterator, called once per
                iteration.
            name: the stage's name in ``repr``, statistics and errors.

        >>> from feedline.dataset.iterator import DatasetIterator
        >>> class Count(DatasetIterator):
        ...     def __init__(self): self.i = 0
        ...     def __next__(self):
        ...         if self.i == 3: raise StopIteration
        ...         self.i += 1; return self.i
        ...     def get_state(self): return {"i": self.i}
        ...     def set_state(self, state): self.i = state["i"]
        >>> Dataset.from_source(Count, name="count").to_list()
        [1, 2, 3]
        """
        from feedline.dataset.sources import from_source

        return from_source(factory, name=name)

    # ------------------------------------------------------------------ stages
    def map(
        self,
        fn: Callable[[T], U],
        *,
        num_workers: int | str = 0,
        backend: str = "process",
        ordered: bool = True,
        seed: int | None = None,
        name: str | None = None,
        on_error: str = "raise",
        errors: ErrorOptions | None = None,
        execution: ExecutionOptions | None = None,
        buffer_size: int | None = UNSET,
        max_skips: int | None = UNSET,
        replacement: Any = UNSET,
        timeout: float | None = UNSET,
        ray_options: dict[str, Any] | None = UNSET,
        workers: Any = UNSET,
    ) -> Dataset[U]:
        """Apply ``fn`` to every item: in this thread (``num_workers=0``), in
        ``num_workers`` worker processes, or in ``num_workers`` threads
        (``backend="thread"``, for functions that release the GIL), or as Ray tasks
        on a cluster (``backend="ray"``); see :mod:`feedline.dataset.map`.

        An exception raised by ``fn`` is re-raised here with the worker's traceback; the
        state resumes exactly. With ``on_error`` other than ``"raise"`` the result is a
        stream (see :mod:`feedline.dataset.skip_errors`).

        Args:
            fn: the function applied to each item (a module-level function or a picklable
                callable for worker processes and Ray).
            num_workers: ``0`` runs ``fn`` in the consumer's thread; ``N`` in ``N``
                workers of ``backend``; ``"auto"`` picks the count by measuring.
            backend: ``"process"`` (worker processes, shared-memory results),
                ``"thread"`` or ``"ray"`` (tasks on the cluster ``ray.init()`` or
                ``RAY_ADDRESS`` names).
            ordered: ``True`` keeps the input order; ``False`` yields results as they
                finish.
            seed: seeds each worker's ``random``/numpy/torch generators per item, so a
                run is reproducible wherever items run.
            name: the stage's name in ``it.stats()`` and errors.
            on_error: ``"raise"``; ``"skip"`` drops an element whose ``fn`` raises;
                ``"replace"`` yields ``errors.replacement`` in its place (rank balance
                under sharding). Skips are counted in ``it.stats()`` and the first few
                logged.
            errors: :class:`~feedline.ErrorOptions` (``max_skips``, ``replacement``)
                for ``on_error="skip"``/``"replace"``; ``None``: no skip limit, no
                replacement.
            execution: :class:`~feedline.ExecutionOptions` (``buffer_size``,
                ``timeout``, ``ray``) for ``num_workers > 0``; ``None``: the defaults.

        Deprecated:
            ``buffer_size=``, ``timeout=``, ``ray_options=`` (a dict) are
            ``execution=ExecutionOptions(buffer_size=, timeout=, ray=RayOptions(...))``;
            ``max_skips=``, ``replacement=`` are ``errors=ErrorOptions(...)``;
            ``workers=`` is ``num_workers=``. Each still works for one release with a
            ``DeprecationWarning``; the same option given both ways with different values
            is a ``TypeError``.

        >>> Dataset.range(4).map(lambda x: x * x).to_list()
        [0, 1, 4, 9]
        >>> Dataset.range(4).map(abs, num_workers=2, backend="thread").to_list()
        [0, 1, 2, 3]
        >>> Dataset.range(4).map(lambda x: 10 // (2 - x), on_error="skip").to_list()
        [5, 10, -10]
        >>> from feedline import ErrorOptions
        >>> Dataset.range(4).map(lambda x: 10 // (2 - x), on_error="replace",
        ...                      errors=ErrorOptions(replacement=0)).to_list()
        [5, 10, 0, -10]
        """
        from feedline._internal.option_groups import regroup
        from feedline._internal.validate import one_of, renamed_option
        from feedline.dataset.options import ErrorOptions, ExecutionOptions, RayOptions

        num_workers = renamed_option("workers", "num_workers", workers, num_workers, 0)
        errors = regroup("errors", ErrorOptions, errors,
                         {"max_skips": max_skips, "replacement": replacement})
        ray: Any = UNSET
        if ray_options is not UNSET:
            if ray_options and backend != "ray":
                raise ValueError("`ray_options` needs backend='ray'")
            if ray_options:
                from feedline.runtime.ray_executor import check_ray_options

                check_ray_options(ray_options)
            ray = RayOptions(**ray_options) if ray_options else None
        execution = regroup("execution", ExecutionOptions, execution,
                            {"buffer_size": buffer_size, "timeout": timeout, "ray_options": ray},
                            fields={"ray_options": "ray"})
        buffer_size, timeout = execution.buffer_size, execution.timeout
        one_of("backend", backend, ("process", "thread", "ray"))
        parallel = num_workers == "auto" or (
            isinstance(num_workers, int) and not isinstance(num_workers, bool)
            and num_workers > 0)
        if not parallel:
            if num_workers != 0:
                raise ValueError("`num_workers` must be a non-negative int or 'auto', got "
                                 f"{num_workers!r}")
            if timeout is not None:
                raise ValueError("`timeout` needs `num_workers` > 0: a mapper running in the "
                                 "consuming thread cannot be interrupted")
        if execution.ray is not None and backend != "ray":
            raise ValueError("`execution.ray` needs backend='ray'")
        ray_kwargs = None if execution.ray is None else execution.ray.as_dict()

        def build(f: Callable) -> Dataset:
            """The map stage for ``num_workers`` and ``backend`` (see feedline.dataset.map)."""
            callable_arg("fn", f)
            label = name or f"map({getattr(f, '__name__', type(f).__name__)})"
            if parallel and backend == "thread":
                from feedline.dataset.thread_map import ThreadMapDataset

                return ThreadMapDataset(self, f, workers=num_workers, ordered=ordered, seed=seed,
                                        buffer_size=buffer_size, name=label, timeout=timeout)
            if parallel:
                from feedline.dataset.parallel_map import ParallelMapDataset

                return ParallelMapDataset(
                    self, f, workers=num_workers, ordered=ordered, seed=seed, name=label,
                    buffer_size=buffer_size, timeout=timeout, backend=backend,
                    ray_options=ray_kwargs)
            from feedline.dataset.map import MapDataset, RandomAccessMapDataset

            if isinstance(self, RandomAccessDataset):
                return RandomAccessMapDataset(self, f, label)
            return MapDataset(self, f, label)

        if on_error == "raise" and errors.max_skips is None and errors.replacement is UNSET:
            return build(fn)
        from feedline.dataset.skip_errors import tolerant_map

        callable_arg("fn", fn)
        label = name or f"map({getattr(fn, '__name__', type(fn).__name__)})"
        return tolerant_map(self, fn, build, on_error=on_error, max_skips=errors.max_skips,
                            replacement=errors.replacement, name=label)

    def filter(self, predicate: Callable[[T], bool]) -> Dataset[T]:
        """Keep the items for which ``predicate(item)`` is true, in order.

        Args:
            predicate: called with each item; the item is kept when the result is truthy.
                A non-callable raises ``TypeError``.

        >>> Dataset.range(6).filter(lambda x: x % 2 == 0).to_list()
        [0, 2, 4]
        """
        from feedline.dataset.filter import FilterDataset

        return FilterDataset(self, callable_arg("predicate", predicate))

    def flat_map(self, fn: Callable[[T], Iterable[Any]]) -> Dataset:
        """Replace every item by the 0..n items of the iterable ``fn(item)``, in order.

        Args:
            fn: called with each item; returns an iterable (a list, a generator, a
                :class:`Dataset`). It must be deterministic: resuming calls it again on
                the item being expanded. A non-callable raises ``TypeError``; a result
                that is not iterable raises ``TypeError`` naming the item.

        >>> Dataset.range(3).flat_map(lambda x: [x] * x).to_list()
        [1, 2, 2]
        """
        from feedline.dataset.flat_map import FlatMapDataset

        return FlatMapDataset(self, callable_arg("fn", fn))

    def shuffle(self, buffer_size: int, *, seed: int | None = None) -> Dataset[T]:
        """Shuffle through a buffer of ``buffer_size`` items (TensorFlow's
        ``min_after_dequeue``): fill the buffer, then yield a random buffered item and
        replace it by the next input. A buffer at least as large as the data gives a
        uniform permutation; a new order each epoch, the same sequence of orders for the
        same ``seed``. Shuffle *after* sharding; for a global order over random-access
        data use :meth:`global_shuffle`. See :mod:`feedline.dataset.shuffle`.

        Args:
            buffer_size: items held in the buffer (a positive int).
            seed: the seed of the sequence of orders (``None``: a fresh one per run).

        >>> sorted(Dataset.range(10).shuffle(4, seed=0).to_list()) == list(range(10))
        True
        """
        from feedline.dataset.shuffle import ShuffleDataset

        return ShuffleDataset(self, positive_int("buffer_size", buffer_size), seed=seed)

    def global_shuffle(self, *, seed: int | None = None) -> RandomAccessDataset[T]:
        """Read a random-access dataset in a seeded permutation of its indices, a new one
        each epoch (the same on every rank, so shard *after* it); O(1) memory for large
        datasets. Raises ``TypeError`` on a stream (use :meth:`shuffle`).

        Args:
            seed: the seed of the sequence of permutations: epoch ``e`` uses the
                permutation seeded with ``(seed, e)``. ``None`` draws a fresh seed when the
                stage is built; a non-int raises ``TypeError``.

        >>> ds = Dataset.range(5).global_shuffle(seed=3)
        >>> first, second = ds.to_list(), ds.to_list()
        >>> sorted(first) == sorted(second) == [0, 1, 2, 3, 4]
        True
        """
        from feedline.dataset.global_shuffle import GlobalShuffleDataset

        if not isinstance(self, RandomAccessDataset):
            raise TypeError(
                f"global_shuffle needs a random-access dataset (len + getitem), got {self.name}; "
                "use shuffle(buffer_size) for streams"
            )
        return GlobalShuffleDataset(self, seed=seed)

    def batch(
        self, batch_size: int, *, drop_remainder: bool = False,
        collate: Callable | str | None = None
    ) -> Dataset:
        """Group ``batch_size`` consecutive items into a list (or ``collate(list)``). The
        last batch is shorter unless ``drop_remainder=True`` drops it. See
        :mod:`feedline.dataset.batch`.

        Args:
            batch_size: items per batch (a positive int).
            drop_remainder: drop a short final batch (tf.data's name).
            collate: ``None`` (a list), ``"numpy"`` (stack arrays, and tuples or dicts of
                arrays, column by column) or a function of the list.

        >>> Dataset.range(5).batch(2).to_list()
        [[0, 1], [2, 3], [4]]
        >>> Dataset.range(5).batch(2, drop_remainder=True).to_list()
        [[0, 1], [2, 3]]
        """
        from feedline.dataset.batch import BatchDataset

        return BatchDataset(self, positive_int("batch_size", batch_size),
                            drop_remainder=drop_remainder, collate=collate)

    def padded_batch(self, batch_size: int, *, padded_shapes: Any = None,
                     padding_values: Any = None, drop_remainder: bool = False) -> Dataset:
        """Batches of ``batch_size`` items whose components are padded to a common shape
        and stacked (tf.data ``padded_batch``); see :mod:`feedline.dataset.padded_batch`.

        Args:
            batch_size: items per batch (a positive int, else ``ValueError``/``TypeError``).
            padded_shapes: ``None`` pads every dimension to the largest in the batch; else
                one shape per component in the item's structure (a tuple of ints and
                ``None``/``-1``), an int padding to exactly that size.
            padding_values: one value for every component, or one per component in the
                item's structure; ``None`` pads with 0 (``""`` for strings).
            drop_remainder: drop a final batch smaller than ``batch_size``.

        >>> Dataset.from_iterable([[1], [2, 3]]).padded_batch(2).to_list()[0].tolist()
        [[1, 0], [2, 3]]
        """
        from feedline.dataset.padded_batch import PaddedBatchDataset

        options: dict[str, Any] = {} if padding_values is None else {
            "padding_values": padding_values}
        return PaddedBatchDataset(self, positive_int("batch_size", batch_size),
                                  padded_shapes=padded_shapes,
                                  drop_remainder=bool(drop_remainder), **options)

    def cache(self, path: str | os.PathLike | None = None, *, shard_size: int = 1024) -> Dataset:
        """Without ``path``: read the parent once, keep its items in memory and replay
        them. With ``path`` (a directory): write the items to record files there on the
        first pass and read them on later passes, in any process, rebuilding a cache that
        is half-written or made by a different pipeline; see :mod:`feedline.dataset.cache`.

        Args:
            path: ``None`` caches in memory; a directory path caches on disk (the caches
                of other pipelines in it are removed once this one is complete).
            shard_size: with ``path``: elements per part file (a positive int, else
                ``ValueError``/``TypeError``).

        >>> ds = Dataset.range(3).map(lambda x: -x).cache()
        >>> ds.to_list(), ds.to_list()
        ([0, -1, -2], [0, -1, -2])
        """
        if path is None:
            from feedline.reader import CacheDataset

            return CacheDataset(self)
        from feedline.dataset.cache import FileCacheDataset

        return FileCacheDataset(self, path, shard_size=shard_size)

    def snapshot(self, path: str | os.PathLike, *, shard_size: int = 1024) -> Dataset:
        """Like :meth:`cache` with a path (tf.data ``snapshot``), but the snapshots of other
        pipelines in ``path`` are kept, one directory per pipeline fingerprint.

        Args:
            path: the directory holding one snapshot directory per pipeline fingerprint.
            shard_size: elements per part file (a positive int, else
                ``ValueError``/``TypeError``).

        >>> import tempfile
        >>> d = tempfile.mkdtemp()
        >>> a, b = Dataset.range(3).snapshot(d), Dataset.range(4).snapshot(d)
        >>> a.to_list(), b.to_list(), a.is_cached() and b.is_cached()
        ([0, 1, 2], [0, 1, 2, 3], True)
        """
        from feedline.dataset.cache import FileCacheDataset

        return FileCacheDataset(self, path, shard_size=shard_size, keep_others=True)

    def take(self, n: int) -> Dataset[T]:
        """The first ``n`` items (fewer if the dataset is shorter); PaddlePaddle's ``firstn``.

        Args:
            n: how many items (an int >= 0, else ``ValueError``/``TypeError``).

        >>> Dataset.range(10).take(3).to_list()
        [0, 1, 2]
        """
        from feedline.dataset.take import TakeDataset

        return TakeDataset(self, non_negative_int("n", n))

    def skip(self, n: int) -> Dataset[T]:
        """Every item after the first ``n`` (none if the dataset is shorter).

        Args:
            n: how many items to skip (an int >= 0, else ``ValueError``/``TypeError``).

        >>> Dataset.range(5).skip(3).to_list()
        [3, 4]
        """
        from feedline.dataset.take import SkipDataset

        return SkipDataset(self, non_negative_int("n", n))

    def repeat(self, epochs: int | None = None) -> Dataset[T]:
        """Iterate the dataset ``epochs`` times (forever when ``None``), each pass with the
        next epoch number, so seeded shuffles change order between passes.

        Args:
            epochs: the number of passes (a positive int, else
                ``ValueError``/``TypeError``), or ``None`` for forever.

        >>> Dataset.range(2).repeat(3).to_list()
        [0, 1, 0, 1, 0, 1]
        """
        from feedline.dataset.repeat import RepeatDataset

        return RepeatDataset(self, optional_positive_int("epochs", epochs))

    def prefetch(self, buffer_size: int | str = 2, *, process: bool = False,
                 start_method: str | None = None, transport: str | None = None,
                 nice: int = 0, timeout: float | None = None, backend: str | None = None,
                 ray: RayOptions | None = None) -> Dataset[T]:
        """Produce up to ``buffer_size`` items ahead in a background thread (``"auto"``
        sizes the buffer by measuring). Order, errors and state are those of the
        pipeline without it; the thread stops with its iterator.

        ``process=True`` runs the whole pipeline before this stage in a background
        process instead, so the consumer shares neither its interpreter lock nor its
        CPU time with it (see :mod:`feedline.dataset.process_prefetch`);
        ``backend="ray"`` runs it in one Ray actor on the cluster ``ray.init()`` or
        ``RAY_ADDRESS`` names, with the same order, errors, state and ``timeout``.

        Args:
            buffer_size: items produced ahead (a positive int), or ``"auto"`` (sized by
                measuring).
            process: run the pipeline before this stage in a background process.
            start_method: with ``process=True``: ``"fork"``, ``"spawn"`` or
                ``"forkserver"``, as for ``map(..., num_workers=N)``.
            transport: with ``process=True``: ``"auto"``, ``"shm"`` or ``"pipe"``.
            nice: with ``process=True``: lower the process's CPU priority (and its
                workers') by 0 to 19.
            timeout: with ``process=True`` or ``backend="ray"``: seconds it may spend
                on one item before :class:`~feedline.exceptions.StageTimeoutError` (on
                Ray, :class:`~feedline.exceptions.ClusterUnavailableError` when the
                cluster is gone).
            backend: where the items are produced: ``"thread"`` (the default),
                ``"process"`` (the same as ``process=True``) or ``"ray"``, as ``map``'s
                ``backend``.
            ray: with ``backend="ray"``: :class:`~feedline.RayOptions` whose
                ``num_cpus`` and ``resources`` place the actor, as they place
                ``map(..., backend="ray")``'s tasks (``None``: one CPU, anywhere).

        >>> Dataset.range(5).map(lambda x: x + 1).prefetch(2).to_list()
        [1, 2, 3, 4, 5]
        >>> ds = Dataset.range(4).batch(2).prefetch(2, process=True)
        >>> ds.to_list()
        [[0, 1], [2, 3]]
        >>> ds.close()
        """
        from feedline._internal.validate import check_bool, one_of

        if check_bool("process", process):
            if backend not in (None, "process"):
                raise ValueError(f"`process=True` is backend='process', got backend={backend!r} too")
            backend = "process"
        backend = one_of("backend", backend or "thread", ("thread", "process", "ray"))
        if backend == "thread":
            if (start_method is not None or transport is not None or nice != 0
                    or timeout is not None or ray is not None):
                raise ValueError("`start_method`, `transport`, `nice` and `timeout` need "
                                 "process=True (`timeout` and `ray`: or backend='ray')")
            from feedline.dataset.prefetch import PrefetchDataset

            return PrefetchDataset(self, buffer_size)
        from feedline.dataset.process_prefetch import ProcessPrefetchDataset

        return ProcessPrefetchDataset(self, buffer_size, start_method=start_method,
                                      transport=transport, nice=nice, timeout=timeout,
                                      backend=backend, ray=ray)

    def concat(self, *others: Dataset) -> Dataset:
        """This dataset's items, then each of ``others``' items, in order.

        >>> Dataset.range(2).concat(Dataset.range(3)).to_list()
        [0, 1, 0, 1, 2]
        """
        from feedline.dataset.concat import ConcatDataset

        return ConcatDataset((self, *others))

    def zip(self, *others: Dataset, strict: bool = False) -> Dataset[tuple]:
        """Tuples of one item from each dataset; ends with the shortest (``strict=True``:
        raises :class:`~feedline.exceptions.ComposeNotAligned` unless all end together).

        Args:
            strict: ``True`` raises :class:`~feedline.exceptions.ComposeNotAligned` (a
                ``ValueError``) when one dataset ends while another still has items;
                ``False`` ends silently with the shortest.

        >>> Dataset.range(3).zip(Dataset.from_iterable(["a", "b"])).to_list()
        [(0, 'a'), (1, 'b')]
        """
        from feedline.dataset.zip import ZipDataset

        return ZipDataset((self, *others), strict=strict)

    def shard(self, rank: int | None = None, world_size: int | None = None, *,
              policy: str = "pad") -> Dataset[T]:
        """This rank's part, every item on exactly one rank; see :mod:`feedline.dataset.shard`.

        A random-access dataset deals its positions round robin (rank ``r`` reads
        ``r, r + W, r + 2W, ...``); ``policy="pad"`` gives every rank ``ceil(N / W)`` items
        (the last round wraps to the start), ``"drop_remainder"`` ``floor(N / W)``,
        ``"none"`` exactly the positions below ``N``. A stream takes every ``W``-th item
        (``policy="none"``). ``rank``/``world_size`` default to
        torch.distributed's, else ``RANK``/``WORLD_SIZE``. Shard *after* a global shuffle
        and *before* a buffer shuffle.

        Args:
            rank: this rank, in ``0 .. world_size - 1`` (else ``ValueError``); ``None``:
                torch.distributed's rank, else the ``RANK`` environment variable.
            world_size: the number of ranks (a positive int); ``None``: as for ``rank``,
                from ``WORLD_SIZE``.
            policy: ``"pad"``, ``"drop_remainder"`` or ``"none"`` as above (another value
                raises ``ValueError``); a stream accepts only ``"none"`` (``ValueError``
                otherwise).

        >>> [Dataset.range(10).shard(r, 3).to_list() for r in range(3)]
        [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]
        """
        from feedline.dataset.shard import shard_dataset
        from feedline.io.split import resolve_rank_world

        rank, world_size = resolve_rank_world(rank, world_size)
        return shard_dataset(self, rank, world_size, policy=policy)

    def interleave(self, fn: Callable[[T], Dataset], *, cycle_length: int,
                   block_length: int = 1, num_parallel_reads: int | None = None) -> Dataset:
        """Read ``cycle_length`` datasets made by ``fn(item)`` at once, taking
        ``block_length`` items from each in turn, in tf.data's exact order (a finished one's
        slot takes the next input's when the cycle comes back to it).
        See :mod:`feedline.dataset.interleave`.

        Args:
            fn: called with each input item (typically a path); returns a
                :class:`Dataset` (else ``TypeError``).
            cycle_length: how many datasets are read at once (a positive int).
            block_length: items taken from one dataset before moving to the next (a
                positive int).
            num_parallel_reads: ``None`` reads in the consumer's thread; ``N`` reads each
                open dataset ahead in a background thread with a buffer of ``N`` items (the
                order is unchanged).

        >>> Dataset.range(2).interleave(lambda i: Dataset.range(i * 10, i * 10 + 3),
        ...                             cycle_length=2).to_list()
        [0, 10, 1, 11, 2, 12]
        """
        from feedline.dataset.interleave import InterleaveDataset

        return InterleaveDataset(self, callable_arg("fn", fn), cycle_length=cycle_length,
                                 block_length=block_length,
                                 num_parallel_reads=num_parallel_reads)

    def bucket_by_length(self, *, length_fn: Callable[[T], int], bucket_boundaries: Sequence[int],
                         bucket_batch_sizes: Sequence[int] | None = None,
                         max_tokens: int | None = None, drop_remainder: bool = False,
                         pad: bool = False, padded_shapes: Any = None,
                         padding_values: Any = None) -> Dataset:
        """Batches of items of similar length (tf.data's ``bucket_by_sequence_length``):
        an item goes to the bucket whose ``bucket_boundaries`` interval holds
        ``length_fn(item)``; a bucket yields a batch when it holds its
        ``bucket_batch_sizes`` entry (or, with ``max_tokens``, when one more item would
        exceed that many padded tokens). ``pad=True`` pads and stacks each batch as
        :meth:`padded_batch` does. See :mod:`feedline.dataset.bucket`.

        Args:
            length_fn: an item's length, a non-negative int (else ``ValueError`` naming
                the item).
            bucket_boundaries: strictly increasing positive ints ``[b0, .., bk-1]``: bucket
                0 holds lengths ``< b0``, bucket ``i`` lengths in ``[b(i-1), b(i))``, the
                last lengths ``>= b(k-1)``.
            bucket_batch_sizes: an int for every bucket or one positive int per bucket
                (``len(bucket_boundaries) + 1`` entries): a bucket's batch is complete at
                that many items.
            max_tokens: a budget per batch of ``items * max(longest length, 1)`` padded
                tokens. At least one of ``bucket_batch_sizes`` and ``max_tokens`` is
                needed (``ValueError``).
            drop_remainder: drop the incomplete batches left when the input ends instead
                of yielding them in bucket order.
            pad: pad and stack each batch as :meth:`padded_batch` does instead of yielding
                a list.
            padded_shapes: with ``pad=True``: as for :meth:`padded_batch` (without it:
                ``ValueError``).
            padding_values: with ``pad=True``: as for :meth:`padded_batch`.

        >>> ds = Dataset.from_iterable(["a", "bbbb", "cc", "dddd"])
        >>> ds.bucket_by_length(length_fn=len, bucket_boundaries=[3],
        ...                     bucket_batch_sizes=[2, 2]).to_list()
        [['a', 'cc'], ['bbbb', 'dddd']]
        """
        from feedline.dataset.bucket import bucket_by_length

        return bucket_by_length(self, length_fn=length_fn, bucket_boundaries=bucket_boundaries,
                                bucket_batch_sizes=bucket_batch_sizes, max_tokens=max_tokens,
                                drop_remainder=drop_remainder, pad=pad,
                                padded_shapes=padded_shapes, padding_values=padding_values)

    @staticmethod
    def mix(datasets: Sequence[Dataset], weights: Sequence[float], *, seed: int | None = None,
            stop_on_empty: bool = True, cycle: bool = False) -> Dataset:
        """Items drawn from ``datasets`` with probabilities ``weights`` (normalised),
        deterministic for ``seed``; see :mod:`feedline.dataset.mix`.

        Args:
            datasets: a non-empty list of datasets.
            weights: one finite number >= 0 per dataset, with a positive sum (else
                ``ValueError``).
            seed: the seed of the sequence of choices, a new one per iteration; ``None``
                draws a fresh seed when the stage is built.
            stop_on_empty: ``True`` ends the mix at the first chosen dataset that is
                exhausted; ``False`` drops that dataset from the mix and goes on until all
                are exhausted.
            cycle: ``True`` restarts an exhausted dataset (with a new epoch) so the mix
                never ends; a dataset empty from the start then raises ``ValueError``.

        >>> ds = Dataset.mix([Dataset.range(3), Dataset.range(10, 13)], [1, 1], seed=0,
        ...                  stop_on_empty=False)
        >>> sorted(ds.to_list())
        [0, 1, 2, 10, 11, 12]
        """
        from feedline.dataset.mix import MixDataset

        return MixDataset(datasets, weights, seed=seed, stop_on_empty=stop_on_empty, cycle=cycle)

    @staticmethod
    def choose(datasets: Sequence[Dataset], index_dataset: Dataset, *,
               stop_on_empty: bool = True) -> Dataset:
        """Item ``k`` from ``datasets[i_k]``, ``i_k`` being item ``k`` of ``index_dataset``
        (tf.data ``choose_from_datasets``); see :mod:`feedline.dataset.mix`.

        Args:
            datasets: a non-empty list of datasets.
            index_dataset: a dataset of ints, each the position in ``datasets`` of the
                dataset the next item comes from; the result ends with it.
            stop_on_empty: ``True`` ends at the first chosen dataset that is exhausted;
                ``False`` passes over such an index.

        >>> Dataset.choose([Dataset.range(3), Dataset.range(10, 13)],
        ...                Dataset.from_iterable([1, 0, 1])).to_list()
        [10, 0, 11]
        """
        from feedline.dataset.mix import ChooseDataset

        return ChooseDataset(datasets, index_dataset, stop_on_empty=stop_on_empty)

    def as_torch(self, *, convert: bool = True, pin_memory: bool = False,
                 rank: int | None = None, world_size: int | None = None
                 ) -> TorchMapDataset | TorchIterableDataset:
        """This pipeline as a ``torch.utils.data`` dataset (map-style when random access,
        else iterable, split by DataLoader worker and rank, with ``state_dict()``); see
        :mod:`feedline.pytorch.dataset`. Needs ``feedline[torch]``.

        Args:
            convert: turn numpy arrays (also inside dicts, lists and tuples) into tensors;
                ``False`` hands items over as they are.
            pin_memory: pin the tensors when iterated in the main process (with worker
                processes, pass ``pin_memory=True`` to the DataLoader instead).
            rank: this rank (iterable form only; default: ``torch.distributed``'s, else
                ``RANK``). Given for a random-access pipeline not yet split by rank:
                ``ValueError`` (split it with the DataLoader's sampler).
            world_size: the number of ranks (iterable form only; default as for
                ``rank``).

        >>> import torch
        >>> loader = torch.utils.data.DataLoader(Dataset.range(5).filter(bool).as_torch(),
        ...                                      batch_size=2)
        >>> [b.tolist() for b in loader]
        [[1, 2], [3, 4]]
        """
        from feedline.pytorch.dataset import as_torch

        return as_torch(self, convert=convert, pin_memory=pin_memory, rank=rank,
                        world_size=world_size)

    def apply(self, transformation: Callable[[Dataset[T]], Dataset]) -> Dataset:
        """``transformation(self)``: chain a custom dataset-to-dataset function.

        Args:
            transformation: called with this dataset; its result is returned as it is.
                A non-callable raises ``TypeError``.

        >>> Dataset.range(4).apply(lambda ds: ds.batch(2)).to_list()
        [[0, 1], [2, 3]]
        """
        return callable_arg("transformation", transformation)(self)

    # ------------------------------------------------------------------ tf.data's other operations
    # (one module each: window, group_by_window, rejection_resample, unbatch, scan, enumerate,
    # take_while, unique, ragged_batch, cardinality)
    def window(self, size: int, shift: int | None = None, stride: int = 1, *,
               drop_remainder: bool = False) -> Dataset[Dataset[T]]:
        """Windows of ``size`` items ``stride`` apart, a new one every ``shift`` items
        (default ``size``), each a dataset, in tf.data's order; shorter windows at the end
        unless ``drop_remainder``. See :mod:`feedline.dataset.window`.

        Args:
            size: items per window (a positive int).
            shift: positions between the starts of two windows (a positive int);
                ``None``: ``size``.
            stride: positions between two items of a window (a positive int).
            drop_remainder: drop every window that is not full.

        >>> [w.to_list() for w in Dataset.range(5).window(2, shift=1, drop_remainder=True)]
        [[0, 1], [1, 2], [2, 3], [3, 4]]
        """
        from feedline._internal.validate import check_bool
        from feedline.dataset.window import WindowDataset

        size = positive_int("size", size)
        shift = size if shift is None else positive_int("shift", shift)
        return WindowDataset(self, size, shift, positive_int("stride", stride),
                             check_bool("drop_remainder", drop_remainder))

    def group_by_window(self, key_func: Callable[[T], Any],
                        reduce_func: Callable[[Any, Dataset[T]], Iterable[Any]], *,
                        window_size: int | None = None,
                        window_size_func: Callable[[Any], int] | None = None) -> Dataset:
        """Gather items by ``key_func(item)``; when a key's group holds ``window_size``
        (or ``window_size_func(key)``) items, yield the items of ``reduce_func(key,
        group_dataset)``; at the end, the groups left in ascending key order (tf.data's
        ``group_by_window``). See :mod:`feedline.dataset.group_by_window`.

        Args:
            key_func: an item's key (any hashable value).
            reduce_func: called as ``reduce_func(key, window)`` with a full group as a
                random-access dataset; every item of the dataset or iterable it returns is
                yielded.
            window_size: the group size for every key (a positive int).
            window_size_func: the group size of a key, asked once per key. Exactly one of
                ``window_size`` and ``window_size_func`` is needed (else ``ValueError``).

        >>> Dataset.range(6).group_by_window(lambda x: x % 3, lambda k, w: [w.to_list()],
        ...                                  window_size=2).to_list()
        [[0, 3], [1, 4], [2, 5]]
        """
        from feedline.dataset.group_by_window import GroupByWindowDataset

        if (window_size is None) == (window_size_func is None):
            raise ValueError("pass exactly one of `window_size` and `window_size_func`")
        if window_size is not None:
            size = positive_int("window_size", window_size)
            window_size_func = lambda key: size  # noqa: E731
        return GroupByWindowDataset(self, callable_arg("key_func", key_func),
                                    callable_arg("reduce_func", reduce_func),
                                    callable_arg("window_size_func", window_size_func))

    def rejection_resample(self, class_func: Callable[[T], int], target_dist: Sequence[float],
                           *, initial_dist: Sequence[float] | None = None,
                           seed: int | None = None) -> Dataset[tuple[int, T]]:
        """``(class_func(item), item)`` pairs, items dropped at random so that the classes
        follow ``target_dist`` (tf.data's ``rejection_resample``; reads the input once).
        See :mod:`feedline.dataset.rejection_resample`.

        Args:
            class_func: an item's class, an int in ``0 .. len(target_dist) - 1``.
            target_dist: the wanted class distribution: non-negative numbers with a
                positive sum (normalised), else ``ValueError``.
            initial_dist: the input's class distribution, as ``target_dist`` and of the
                same length; ``None`` estimates it from the classes seen so far.
            seed: the seed of the keep/drop draws (the same seed and epoch keep the same
                items); ``None`` draws a fresh one when the stage is built.

        >>> ds = Dataset.range(8).rejection_resample(lambda x: x % 2, [1.0, 0.0], seed=0)
        >>> ds.to_list()
        [(0, 0), (0, 2), (0, 4), (0, 6)]
        """
        from feedline.dataset.rejection_resample import RejectionResampleDataset

        return RejectionResampleDataset(self, callable_arg("class_func", class_func),
                                        target_dist, initial_dist, seed)

    def unbatch(self) -> Dataset:
        """Split every item (a list, an array, a tuple or dict of them) into its rows
        (tf.data's ``unbatch``). See :mod:`feedline.dataset.unbatch`.

        >>> Dataset.range(5).batch(2, collate="numpy").unbatch().to_list()
        [np.int64(0), np.int64(1), np.int64(2), np.int64(3), np.int64(4)]
        """
        from feedline.dataset.unbatch import UnbatchDataset

        return UnbatchDataset(self)

    def scan(self, initial_state: Any, scan_func: Callable[[Any, T], tuple[Any, Any]]) -> Dataset:
        """``output`` for each item, where ``(state, output) = scan_func(state, item)``
        starting from ``initial_state`` (tf.data's ``scan``). See :mod:`feedline.dataset.scan`.

        Args:
            initial_state: the state passed with the first item.
            scan_func: called as ``scan_func(state, item)``; returns ``(new_state,
                output)``.

        >>> Dataset.range(4).scan(1, lambda p, x: (p * (x + 1), p * (x + 1))).to_list()
        [1, 2, 6, 24]
        """
        from feedline.dataset.scan import ScanDataset

        return ScanDataset(self, initial_state, callable_arg("scan_func", scan_func))

    def enumerate(self, start: int = 0) -> Dataset[tuple[int, T]]:
        """``(index, item)`` pairs counting from ``start`` (tf.data's ``enumerate``).

        Args:
            start: the index of the first item (an int, else ``TypeError``).

        >>> Dataset.from_iterable(["x", "y"]).enumerate().to_list()
        [(0, 'x'), (1, 'y')]
        """
        from feedline.dataset.enumerate import EnumerateDataset

        return EnumerateDataset(self, start)

    def take_while(self, predicate: Callable[[T], bool]) -> Dataset[T]:
        """The items before the first one for which ``predicate`` is false (tf.data's
        ``take_while``).

        Args:
            predicate: called with each item until it returns a falsy value.

        >>> Dataset.from_iterable([2, 4, 5, 6]).take_while(lambda x: x % 2 == 0).to_list()
        [2, 4]
        """
        from feedline.dataset.take_while import TakeWhileDataset

        return TakeWhileDataset(self, callable_arg("predicate", predicate))

    def unique(self) -> Dataset[T]:
        """Each distinct (hashable) item once, where it first occurs (tf.data's ``unique``).

        >>> Dataset.from_iterable([3, 1, 3, 2, 1]).unique().to_list()
        [3, 1, 2]
        """
        from feedline.dataset.unique import UniqueDataset

        return UniqueDataset(self)

    def ragged_batch(self, batch_size: int, *, drop_remainder: bool = False) -> Dataset:
        """Batches of items of different lengths, unpadded: scalar components as arrays,
        the others as :class:`~feedline.dataset.ragged_batch.RaggedArray` (values plus
        row splits, as tf.data's ``ragged_batch`` gives ``tf.RaggedTensor``).

        Args:
            batch_size: items per batch (a positive int).
            drop_remainder: drop a final batch smaller than ``batch_size``.

        >>> Dataset.from_iterable([[1], [2, 3]]).ragged_batch(2).to_list()
        [RaggedArray([[1], [2, 3]])]
        """
        from feedline.dataset.ragged_batch import ragged_collate

        return self.batch(batch_size, drop_remainder=drop_remainder, collate=ragged_collate)

    def cardinality(self) -> int:
        """The number of items when known without reading, else
        :data:`~feedline.dataset.cardinality.INFINITE` (-1) or
        :data:`~feedline.dataset.cardinality.UNKNOWN` (-2), as tf.data's
        ``cardinality()``. See :mod:`feedline.dataset.cardinality`.

        >>> Dataset.range(10).batch(4).cardinality(), Dataset.range(3).repeat().cardinality()
        (3, -1)
        """
        from feedline.dataset.cardinality import cardinality

        return cardinality(self)

    def __len__(self) -> int:
        """The :meth:`cardinality` when known; ``TypeError`` when it is infinite or
        unknown (as ``len()`` of a tf.data dataset).

        >>> len(Dataset.range(10).batch(4, drop_remainder=True))
        2
        """
        n = self.cardinality()
        if n < 0:
            raise TypeError(f"the length of {self!r} is {'infinite' if n == -1 else 'unknown'}"
                            " (see Dataset.cardinality())")
        return n

    def __bool__(self) -> bool:
        """A dataset is true (``len`` is not asked), as a tf.data dataset is."""
        return True


class PipelineIterator(DatasetIterator[T]):
    """The iterator a :class:`Dataset` returns: the last stage plus the epoch number.

    ``get_state()`` returns ``{"type": "pipeline", "version", "epoch", "stages"}``.

    Args:
        it: the last stage's iterator.
        epoch: the iteration number it runs.
        stats: the statistics collector timing the stages, or ``None``.

    >>> ds = Dataset.range(5).shuffle(3, seed=1)
    >>> it = ds.iterator()
    >>> type(it).__name__, next(it)
    ('PipelineIterator', 1)
    >>> state = it.get_state()
    >>> state["type"], state["epoch"], state["stages"]["type"]
    ('pipeline', 0, 'shuffle')
    >>> rest = list(it)
    >>> list(ds.iterator(state)) == rest
    True
    >>> it.close()
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
        """Continue from ``state`` in this iterator.

        Args:
            state: a ``get_state()`` of an iterator of the same pipeline and epoch; another
                epoch raises :class:`~feedline.exceptions.StateError` (use
                ``dataset.iterator(state)``).

        >>> it = Dataset.range(4).iterator(); _ = next(it); state = it.get_state()
        >>> _ = next(it); it.set_state(state); next(it)
        1
        """
        check_state(state, "pipeline", ("version", "epoch", "stages"))
        if state["epoch"] != self.epoch:
            raise StateError(
                f"state is for epoch {state['epoch']}, this iterator runs epoch {self.epoch}; "
                "use dataset.iterator(state)"
            )
        restore(self._it, state["stages"])

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

    >>> ds = Dataset.range(5)
    >>> isinstance(ds, RandomAccessDataset), len(ds), ds[2], ds[7]        # 7 wraps to 2
    (True, 5, 2, 2)
    >>> shuffled = ds.global_shuffle(seed=0)
    >>> sorted(shuffled[i] for i in range(5)), sorted(shuffled[i] for i in range(5, 10))  # epochs 0 and 1
    ([0, 1, 2, 3, 4], [0, 1, 2, 3, 4])
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

    def __bool__(self) -> bool:
        return len(self) > 0

    def group(self, size: int) -> RandomAccessDataset[list]:
        """Random-access batching: item ``k`` is the list of items ``k*size ..
        (k+1)*size - 1`` (the last group smaller); see :mod:`feedline.dataset.group`.

        Args:
            size: items per group (a positive int, else ``ValueError``/``TypeError``).

        >>> Dataset.range(5).group(2).to_list()
        [[0, 1], [2, 3], [4]]
        """
        from feedline.dataset.group import GroupDataset

        return GroupDataset(self, size)

    def round_up(self, multiple: int) -> RandomAccessDataset[T]:
        """Repeat the first items until the length is a multiple of ``multiple`` (MXNet's
        ``round_batch``); see :mod:`feedline.dataset.round_up`.

        Args:
            multiple: the length is rounded up to a multiple of it (a positive int, else
                ``ValueError``/``TypeError``).

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
        consumed = cast(int, self._indices.__reduce__()[2])  # a range iterator's position
        return {"type": "index", "next": self._start + consumed, "len": self._n}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "index", ("next", "len"))
        if state["len"] != self._n:
            raise StateError(
                f"state is for a dataset of {state['len']} items, this one has {self._n}"
            )
        self._open(state_int(state, "next", "index", high=self._n))


def _json_size(state: dict) -> int:
    """Size in bytes of ``state`` as JSON (used by tests that check states stay small)."""
    return len(json.dumps(state))

