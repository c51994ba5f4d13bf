"""``Dataset.map(fn, num_workers=N)``: the one engine of every worker stage.

This module is the consumer's side of ``map(fn, num_workers=N, backend=...)`` for all
three backends — pulling, chunking, dispatch, ordering, exactly-once bookkeeping,
state, errors, timeouts and statistics — over an executor of
:mod:`feedline.runtime.executor`: ``"process"`` (a
:class:`~feedline.runtime.workers.WorkerPool`, below), ``"thread"``
(:mod:`feedline.dataset.thread_map`) or ``"ray"``
(:mod:`feedline.runtime.ray_executor`). What follows describes processes; the other
modules say where their executors differ.

CPU-bound Python mappers run truly in parallel, in ``N`` processes of a
:class:`~feedline.runtime.workers.WorkerPool` that belongs to the dataset:

* **Start-up.** The workers start on the first iteration (with ``fork`` by default:
  milliseconds, and ``fn`` may be a lambda; the workers see ``fn`` and the input as they
  were at that moment) and are kept for later iterations and epochs. ``ds.close()`` stops them; so do garbage collection of the dataset (once no
  iterator uses them) and interpreter exit. Closing an iterator cancels its queued work
  and hands the workers back to the dataset.
* **Inputs.** Over a random-access dataset the workers read ``parent[i]`` themselves and
  only indices cross process boundaries (like a map-style ``DataLoader``); over a stream
  the consumer pulls items from the parent and sends them (pickled; arrays through
  shared memory).
* **Results** come back through rings of shared-memory blocks: numpy arrays — alone or
  inside tuples, lists, dicts — are copied once into a block by the worker and once out
  of it by the consumer, never pickled; other values are pickled. Return numpy arrays
  rather than torch tensors or bytes for large payloads. Small items travel many per
  message (a chunk holds about 2 ms of work).
* **Order.** ``ordered=True`` (default) yields in input order; item ``i`` is mapped by
  worker ``i % N`` (a static round robin; ``(i - p) % N`` in an iteration resumed at
  position ``p``). With ``seed`` set the output is identical run after run even for a
  mapper drawing random numbers, for any worker count and on every backend: before
  each item the worker seeds ``random``, numpy's global generator and torch (if
  imported) from ``(seed, epoch, position)`` (:mod:`feedline.runtime.seeding`).
  ``ordered=False``
  yields results as they are ready and gives work to whichever worker is least loaded.
* **Buffer.** At most ``buffer_size`` items are in flight (pulled and not yet yielded);
  by default three chunks per worker.
* **Errors.** An exception in ``fn`` is raised in the consumer, at the item's place in
  the output, as the original exception type when it can be pickled (else
  :class:`~feedline.exceptions.WorkerError`), with ``__cause__`` a
  :class:`~feedline.exceptions.RemoteTraceback` carrying the worker's traceback and a
  note naming the stage, worker, pid and item. A worker killed by a signal or the OOM
  killer raises :class:`~feedline.exceptions.WorkerDiedError` as soon as the consumer
  waits for it. Either ends the iteration (later ``next`` calls raise
  ``StopIteration``); the next iteration starts fresh workers if needed.
* **Shared memory.** ``/dev/shm`` missing or smaller than the initial ring is detected
  when the workers start: with ``transport="auto"`` (default) a ``RuntimeWarning`` says
  so and results are pickled through pipes instead; ``transport="shm"`` raises
  :class:`~feedline.exceptions.SharedMemoryError`. ``FEEDLINE_TRANSPORT`` and
  ``FEEDLINE_START_METHOD`` set the defaults.
* **Timeout.** With ``timeout=seconds``, an item a worker has been mapping (or reading)
  for longer raises :class:`~feedline.exceptions.StageTimeoutError` naming the stage and
  the item's position; the workers are then terminated and the iteration ends (the next
  iteration starts fresh ones). Each worker notes in shared memory which item it is on
  and since when, so chunking is unchanged and time spent queued is not counted.

**State.** ``get_state()`` is ``{"type": "parallel_map", "pos", "done", ...}``: ``pos`` is
the first position not yet yielded and ``done`` the positions after it that were already
yielded (always empty when ordered; at most ``buffer_size`` long when not). A
random-access input adds ``"len"``; a stream input adds ``"parent"``, the parent's state
captured before some earlier position, and ``"skip"``, how many of its items to pass
over to reach ``pos`` (states are captured every few pulls so that capturing stays
cheap). Restoring yields exactly the items the uninterrupted iterator would have
yielded next — in order when ordered; as the same multiset when not — and, since
every item is seeded from its position, a seeded mapper's random draws after a resume
are those of the uninterrupted run.

**Inputs behind a shard.** When the input's
:attr:`~feedline.dataset.base.Dataset.exact_states` is true (it contains a ``shard()``
stage, whose :attr:`~feedline.dataset.base.Dataset.reshardable_state` says it may be
resumed on another world size), its state is captured before every item (never every
few), so that a state never counts items to skip, which would not carry over to another
world size (see :mod:`feedline.dataset.shard`).

>>> from feedline import Dataset
>>> ds = Dataset.range(10).map(lambda x: x * x, num_workers=2)
>>> ds.to_list()
[0, 1, 4, 9, 16, 25, 36, 49, 64, 81]
>>> it = ds.iterator(); _ = next(it), next(it), next(it)
>>> state = it.get_state(); it.close()
>>> state["stages"]["pos"], list(ds.iterator(state))
(3, [9, 16, 25, 36, 49, 64, 81])
>>> sorted(Dataset.range(5).map(abs, num_workers=2, ordered=False).to_list())
[0, 1, 2, 3, 4]
>>> ds.close()
"""

from __future__ import annotations

import os
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

from feedline._internal.notes import add_note
from feedline._internal.validate import (
    callable_arg,
    non_negative_int,
    one_of,
    optional_positive_int,
    optional_positive_number,
)
from feedline.dataset.base import BuildContext, Dataset, RandomAccessDataset
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.exceptions import (
    PipelineError,
    StageTimeoutError,
    StateError,
    StateNotSupportedError,
)
from feedline.runtime import autotune
from feedline.runtime.executor import CANCELLED, OK, Executor
from feedline.runtime.seeding import fresh_seed
from feedline.runtime.workers import (
    START_METHODS,
    TRANSPORTS,
    PoolKeeper,
    WorkerPool,
    default_start_method,
)

__all__ = ["ParallelMapDataset", "BACKENDS"]

#: The executors of a worker stage (:mod:`feedline.runtime.executor`).
BACKENDS = ("process", "thread", "ray")

_LOCAL_ERROR = -1  # an exception raised in the consumer (pulling from the parent)
_WAIT_SLICE = 1.0  # seconds per wait, between checks that the pool is still usable
_DRAIN_TIMEOUT = 3.0  # seconds to wait for cancelled work before replacing the workers
_CAPTURE_SLOW = 20e-6  # a parent get_state slower than this is captured less often
_MAX_CAPTURE_EVERY = 256
_DEFAULT_SHM_BUDGET = 1 << 30
_CHUNK_BYTES = 1 << 20  # big items gain nothing from sharing a message; keep blocks small
_RAMP_START = 4  # items in an iteration's first chunk per worker; doubles per chunk sent


class ParallelMapDataset(Dataset):
    """``fn`` over every item of ``parent`` in worker processes; see the module docstring.

    Args:
        parent: the dataset read (not a :class:`Dataset`: ``TypeError``); a random-access
            one is read by index in the workers.
        fn: the mapped function (not callable: ``TypeError``).
        workers: a positive int or ``"auto"`` (:mod:`feedline.runtime.autotune`); else
            ``ValueError``.
        ordered: ``True`` yields in input order; ``False`` as results are ready.
        seed: seeds ``random``, numpy and torch before each item from ``(seed, epoch,
            position)`` (an int or ``None``, else ``TypeError``).
        name: the stage's name (``None``: ``map(<fn's name>)``).
        buffer_size: the most items in flight (a positive int; ``None``: three chunks per
            worker).
        start_method: ``"fork"`` (``None``: the default where available), ``"spawn"`` or
            ``"forkserver"`` (``fn`` and a random-access parent must then be picklable).
        transport: ``"auto"``, ``"shm"`` or ``"pipe"`` (``None``: ``FEEDLINE_TRANSPORT``,
            else ``"auto"``).
        cpu_budget: the most workers ``"auto"`` may start (``None``: the CPUs this
            process may use).
        shm_budget: the most bytes of shared memory the result rings may use (``None``:
            1 GiB or a quarter of the free ``/dev/shm``, whichever is smaller); it caps
            how many items share a block.
        timeout: seconds per item before :class:`~feedline.exceptions.StageTimeoutError`
            (a positive number or ``None``).
        backend: ``"process"``, ``"thread"`` or ``"ray"``.
        ray_options: options of the Ray tasks, with ``backend="ray"`` only (else
            ``ValueError``).

    >>> ds = Dataset.range(4).map(abs, num_workers=2)       # two worker processes
    >>> type(ds).__name__, ds.to_list()
    ('ParallelMapDataset', [0, 1, 2, 3])
    """

    def __init__(
        self,
        parent: Dataset,
        fn: Callable[[Any], Any],
        *,
        workers: int | str,
        ordered: bool = True,
        seed: int | None = None,
        name: str | None = None,
        buffer_size: int | None = None,
        start_method: str | None = None,
        transport: str | None = None,
        cpu_budget: int | None = None,
        shm_budget: int | None = None,
        timeout: float | None = None,
        backend: str = "process",
        ray_options: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(parent, Dataset):
            raise TypeError(f"`parent` must be a Dataset, got {type(parent).__name__}")
        callable_arg("fn", fn)
        if workers != "auto" and (
            isinstance(workers, bool) or not isinstance(workers, int) or workers <= 0
        ):
            raise ValueError(f"`workers` must be a positive int or 'auto', got {workers!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"`seed` must be an int or None, got {seed!r}")
        self._parents = (parent,)
        self._fn = fn
        self._name = name or f"map({getattr(fn, '__name__', type(fn).__name__)})"
        self.workers = workers
        self.ordered = bool(ordered)
        self.seed = seed
        self.buffer_size = optional_positive_int("buffer_size", buffer_size)
        self.start_method = one_of(
            "start_method", start_method or default_start_method(), START_METHODS
        )
        self.transport = one_of(
            "transport", transport or os.environ.get("FEEDLINE_TRANSPORT") or "auto", TRANSPORTS
        )
        self.cpu_budget = optional_positive_int("cpu_budget", cpu_budget) or autotune.cpu_budget()
        self.shm_budget = optional_positive_int("shm_budget", shm_budget)
        self.timeout = optional_positive_number("timeout", timeout)
        self.backend = one_of("backend", backend, BACKENDS)
        self.ray_options = dict(ray_options or {})
        if self.ray_options and backend != "ray":
            raise ValueError("`ray_options` needs backend='ray'")
        if backend == "ray":
            from feedline.runtime.ray_executor import check_ray_options

            check_ray_options(self.ray_options)
        source = parent if isinstance(parent, RandomAccessDataset) else None
        self._holder = _PoolHolder(fn, source, self)
        self._finalizer = weakref.finalize(self, self._holder.orphan)

    @property
    def name(self) -> str:
        return self._name

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        parent = self._parents[0]
        if isinstance(parent, RandomAccessDataset):
            return _ParallelMapIterator(self._holder, None, len(parent), ctx.epoch)
        return _ParallelMapIterator(self._holder, parent._build(ctx), None, ctx.epoch)

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the running workers (empty before the first iteration)."""
        return self._holder.pids()

    def _release(self) -> None:
        """Stop the workers now, including those of iterators still running (their next
        ``next`` raises :class:`PipelineError`). A later iteration starts new ones.
        ``dataset.close()`` calls it for every worker stage of a pipeline."""
        self._holder.close()


class _PoolHolder(PoolKeeper[Executor]):
    """Keeps the dataset's idle pool and hands it to one iterator at a time (a second,
    concurrent iterator gets a pool of its own, shut down when it is handed back)."""

    def __init__(self, fn: Callable, source: Any, ds: ParallelMapDataset) -> None:
        super().__init__()
        self.fn = fn
        self.source = source
        self.stage = ds.name
        self.ordered = ds.ordered
        self.seed = ds.seed
        self.buffer_size = ds.buffer_size
        self.start_method = ds.start_method
        self.transport = ds.transport
        self.cpu_budget = ds.cpu_budget
        self.shm_budget = ds.shm_budget
        self.timeout = ds.timeout
        self.backend = ds.backend
        self.ray_options = ds.ray_options
        # a shard upstream may be resumed on another world size: capture the input's
        # state before every item, so that a state never counts items to skip
        self.exact_states = ds._parents[0].exact_states
        self.auto = ds.workers == "auto"
        self.workers: int | None = None if self.auto else int(ds.workers)
        # measurements of earlier iterations (per-item seconds and bytes, how often the
        # input's state is captured): a new iteration starts tuned instead of from scratch
        self.item_s: float | None = None
        self.item_bytes: float | None = None
        self.capture_every = 1

    def acquire(self) -> Executor:
        pool, _ = self.take_idle()
        if self.auto and self.workers is None and self.backend != "process":
            self.workers = self._auto_workers()
        want = self.workers or 1
        return self.lend(
            pool, lambda: self._make(want),
            fits=pool is not None and pool.size == want, drain_timeout=_DRAIN_TIMEOUT,
        )

    def _auto_workers(self) -> int:
        if self.backend == "thread":  # one more than the cores: one thread holds the GIL
            return (os.cpu_count() or 1) + 1
        from feedline.runtime.ray_executor import cluster_cpus

        return cluster_cpus()

    def _make(self, workers: int) -> Any:
        if self.backend == "thread":
            from feedline.runtime.executor import ThreadExecutor

            return ThreadExecutor(self.fn, self.source, workers=workers, stage=self.stage)
        if self.backend == "ray":
            from feedline.runtime.ray_executor import RayExecutor

            return RayExecutor(self.fn, self.source, workers=workers, stage=self.stage,
                               timeout=self.timeout, **self.ray_options)
        return WorkerPool(self.fn, self.source, workers=workers, stage=self.stage,
                          start_method=self.start_method, transport=self.transport)


class _ParallelMapIterator(DatasetIterator):
    """The ordered/unordered dispatch engine over a :class:`WorkerPool`."""

    def __init__(self, holder: _PoolHolder, source: DatasetIterator | None,
                 length: int | None, epoch: int) -> None:
        self._holder = holder
        self._stage = holder.stage
        self._ordered = holder.ordered
        self._source = source
        self._len = length
        self._epoch = epoch
        self._base = 0 if length is None else epoch * length
        self._pool: Executor | None = None
        self._gen = 0
        self._n = 0
        self._depth = 1
        self._done = False
        self._closed = False
        # positions
        self._next_pull = 0
        self._next_yield = 0
        self._yielded_ahead: set[int] = set()
        self._exhausted = False
        self._inflight = 0
        self._ready: Any = {} if self._ordered else deque()
        self._pending: list[list] = []
        self._load: list[int] = []
        self._rr_start = 0
        # parent states (stream inputs)
        self._captures: deque[tuple[int, Any]] = deque()
        self._capture_every = holder.capture_every
        self._capture_error: StateError | None = None
        # tuning
        self._chunk = 1
        self._ramp = _RAMP_START
        self._ramp_sends = 0
        self._window = 1
        self._item_s: float | None = holder.item_s
        self._item_bytes: float | None = holder.item_bytes
        self._pull_from: Any = None  # the input's fast path (DatasetIterator._fast)
        self._bytes_cap = 1 << 22
        self._shm_budget = _DEFAULT_SHM_BUDGET
        self._calibration: autotune.WorkerCalibration | None = None
        self._last_exit: float | None = None
        # statistics (read by feedline.runtime.stats)
        self.wait_seconds = 0.0
        self.worker_seconds = 0.0

    # ------------------------------------------------------------------ statistics
    @property
    def worker_count(self) -> int:
        return self._n or (self._holder.workers or 1)

    def buffer_fill(self) -> float:
        """Fraction of the in-flight window holding results ready to be yielded."""
        return min(1.0, len(self._ready) / self._window) if self._window else 0.0

    # ------------------------------------------------------------------ start / stop
    def _start(self) -> None:
        holder = self._holder
        pool = holder.acquire()
        self._pool = pool
        self._n = pool.size
        self._depth = pool.depth
        self._gen = pool.new_generation()
        self._pending = [[] for _ in range(self._n)]
        self._load = [0] * self._n
        self._rr_start = self._next_yield
        if holder.auto and holder.workers is None:
            self._calibration = autotune.WorkerCalibration(max_workers=holder.cpu_budget)
            self._rr_start = self._next_yield + self._calibration.items
        self._base_seed = holder.seed if holder.seed is not None else fresh_seed()
        for w in range(self._n):
            pool.reseed(w, (self._base_seed, self._epoch, holder.seed is not None))
        self._shm_budget = holder.shm_budget or _default_shm_budget()
        self._retune()

    def _retune(self) -> None:
        buffer_size = self._holder.buffer_size
        pool = self._pool
        self._bytes_cap = getattr(pool, "chunk_bytes", None) or max(
            1 << 16, min(_CHUNK_BYTES, self._shm_budget // (self._depth * self._n)))
        cap = autotune.MAX_CHUNK
        if buffer_size is not None:
            cap = max(1, buffer_size // (self._depth * self._n))
        self._chunk = autotune.choose_chunk(
            item_seconds=self._item_s, item_bytes=self._item_bytes,
            bytes_cap=self._bytes_cap, max_items=cap,
            target_seconds=getattr(pool, "chunk_seconds", None) or autotune.CHUNK_SECONDS,
        )
        if self._calibration is not None:
            self._window = self._calibration.items
        elif buffer_size is not None:
            self._window = buffer_size
        else:
            self._window = self._depth * self._n * self._chunk

    def _finish_calibration(self) -> None:
        cal, self._calibration = self._calibration, None
        assert cal is not None  # callers check that calibration is running
        n = cal.decide()
        holder = self._holder
        holder.workers = n
        pool = self._pool
        assert pool is not None  # calibration runs on an open pool
        if n > pool.size:
            first = pool.size
            pool.add_workers(n - first)
            for w in range(first, n):
                pool.reseed(w, (self._base_seed, self._epoch, holder.seed is not None))
            self._pending.extend([] for _ in range(n - first))
            self._load.extend(0 for _ in range(n - first))
        self._n = pool.size
        self._retune()

    def _release(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if any(pool.outstanding(w) for w in range(pool.size)):
            pool.cancel()
        self._holder.release(pool)

    def _reset_buffers(self) -> None:
        self._ready = {} if self._ordered else deque()
        self._pending = [[] for _ in range(self._n)]
        self._load = [0] * self._n
        self._inflight = 0

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._done = True
        try:
            self._release()
        finally:
            self._reset_buffers()
            if self._source is not None:
                self._source.close()

    # ------------------------------------------------------------------ iteration
    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        if self._pool is None:
            self._start()
        cal = self._calibration
        start = time.perf_counter()
        if cal is not None and self._last_exit is not None:
            cal.add_consumer(start - self._last_exit)  # the consumer's time between calls
        waited = self.wait_seconds
        try:
            pos, entry = self._step_ordered() if self._ordered else self._step_unordered()
        except Exception:  # StopIteration included: the iteration is over
            self._done = True
            self._release()
            raise
        if entry[0] != _LOCAL_ERROR:  # the input's own error leaves its position unread
            self._advance(pos)
        end = time.perf_counter()
        self._last_exit = end
        if cal is not None:  # plus this call's own work in the consumer's thread
            cal.add_consumer((end - start) - (self.wait_seconds - waited), items=1)
            if cal.ready() and self._next_yield >= self._rr_start:
                self._finish_calibration()
        return self._unwrap(pos, entry)

    def _fast(self) -> Any:
        """Ordered: a generator that hands out results already back from the workers
        without the bookkeeping of a full ``next`` call (which it falls back to for
        everything else: waiting, errors, calibration, the end)."""
        return self._yield_ready() if self._ordered else self

    def _yield_ready(self) -> Any:
        advance = self._advance
        while True:
            if self._calibration is None and not self._done:
                p = self._next_yield
                entry = self._ready.pop(p, None)
                if entry is not None:
                    if entry[0] == OK:
                        advance(p)
                        yield entry[1]
                        continue
                    self._ready[p] = entry  # an error: raised by __next__ with its notes
            try:
                item = self.__next__()
            except StopIteration:
                return
            yield item

    def _check_pool(self) -> Executor:
        pool = self._pool
        if pool is None or pool.broken is not None:
            reason = "the dataset was closed" if pool is None else pool.broken
            raise PipelineError(f"the workers of stage {self._stage!r} are gone: {reason}")
        return pool

    def _step_ordered(self) -> tuple[int, tuple]:
        p = self._next_yield
        ready = self._ready
        while p not in ready:
            self._dispatch(p)
            if p in ready:
                break
            if self._exhausted and p >= self._next_pull:
                raise StopIteration
            w = self._owner(p)
            pend = self._pending[w]
            if pend and pend[0][0] == p:
                self._send(w)
            self._wait(w)
        return p, ready.pop(p)

    def _step_unordered(self) -> tuple[int, tuple]:
        ready = self._ready
        while not ready:
            self._dispatch()
            if ready:
                break
            pool = self._check_pool()
            busy = [w for w in range(self._n) if pool.outstanding(w)]
            if not busy:
                if self._exhausted and not any(self._pending):
                    raise StopIteration
                continue  # _dispatch flushes pending items to the idle workers
            self._wait(None)
        return ready.popleft()

    def _advance(self, p: int) -> None:
        """Record that position ``p`` was yielded (or raised)."""
        self._inflight -= 1
        if p == self._next_yield:
            q = p + 1
            ahead = self._yielded_ahead
            while q in ahead:
                ahead.discard(q)
                q += 1
            self._next_yield = q
            caps = self._captures
            while len(caps) > 1 and caps[1][0] <= q:
                caps.popleft()
        else:
            self._yielded_ahead.add(p)

    def _unwrap(self, pos: int, entry: tuple) -> Any:
        status, value = entry
        if status == OK:
            return value
        self._done = True
        pool = self._pool
        self._release()
        if status == _LOCAL_ERROR:
            self._inflight -= 1
            raise value
        if status == CANCELLED:  # pragma: no cover - a cancelled item is never yielded
            raise PipelineError(f"stage {self._stage!r}: item {pos} was cancelled")
        assert pool is not None  # an entry from a worker came through an open pool
        raise pool.error(value, stage=self._stage, position=pos)

    def _owner(self, p: int) -> int:
        if p < self._rr_start:
            return 0
        return (p - self._rr_start) % self._n

    def _pull_one(self) -> int | None:
        """Pull the next position into a worker's pending list; its worker, -1 for an
        already-yielded position (after a restore) or ``None`` at the end."""
        p = self._next_pull
        if self._source is None:
            assert self._len is not None  # no source: a random-access parent of known length
            if p >= self._len:
                self._exhausted = True
                return None
            item = None
        else:
            if self._capture_error is None and (
                not self._captures or p - self._captures[-1][0] >= self._capture_every
            ):
                self._capture(p)
            pull_from = self._pull_from
            if pull_from is None:
                pull_from = self._pull_from = self._source._fast()
            try:
                item = next(pull_from)
            except StopIteration:
                self._exhausted = True
                return None
            except Exception:  # raised in its place in the output
                self._pull_error()
                return None
        self._next_pull = p + 1
        if p in self._yielded_ahead:
            return -1
        if self._ordered:
            w = self._owner(p)
        else:
            load = self._load
            w = min(range(self._n), key=load.__getitem__)
        self._pending[w].append((p, item))
        self._load[w] += 1
        self._inflight += 1
        return w

    def _capture(self, p: int) -> None:
        t0 = time.perf_counter()
        assert self._source is not None  # captures are taken of stream inputs only
        try:
            state = self._source.get_state()
        except StateError as exc:
            self._capture_error = exc
            return
        self._captures.append((p, state))
        if (
            time.perf_counter() - t0 > _CAPTURE_SLOW
            and self._capture_every < _MAX_CAPTURE_EVERY
            and not self._holder.exact_states
        ):
            self._capture_every *= 2
            self._holder.capture_every = self._capture_every

    def _dispatch(self, want: int | None = None) -> None:
        """Pull while the window allows and send chunks to workers with room. With
        ``want`` (the position the consumer waits for), replies that arrived meanwhile
        are collected after every chunk sent, and pulling stops once ``want`` is back."""
        pool = self._check_pool()
        if self._calibration is not None and self._next_pull >= self._rr_start and not any(
            pool.outstanding(w) for w in range(self._n)
        ):
            self._finish_calibration()  # all calibration items are back: decide now
        depth, chunk = self._depth, min(self._chunk, self._ramp)
        pending = self._pending
        if (self._ordered and self._source is not None and self._calibration is None
                and self._capture_error is None and not self._yielded_ahead):
            self._pull_ordered(pool, want)
            chunk = min(self._chunk, self._ramp)
        while (
            not self._exhausted
            and self._inflight < self._window
            and (self._calibration is None or self._next_pull < self._rr_start)
        ):
            w = self._pull_one()
            if w is None:
                break
            if w >= 0 and len(pending[w]) >= chunk and len(pool.outstanding(w)) < depth:
                self._send(w)
                chunk = min(self._chunk, self._ramp)
                if want is not None and want < self._next_pull:
                    if self._poll_replies(want):
                        break
                    chunk = min(self._chunk, self._ramp)
        full = self._exhausted or self._inflight >= self._window
        for w in range(self._n):
            pend = pending[w]
            out = pool.outstanding(w)
            while pend and len(out) < depth and (full or not out or len(pend) >= chunk):
                self._send(w)

    def _pull_ordered(self, pool: Executor, want: int | None) -> None:
        """The pull loop of :meth:`_dispatch` (the same pulls, captures and sends as
        repeated :meth:`_pull_one`), for the common case: ordered, a stream input whose
        state can be captured, no calibration running, nothing yielded ahead."""
        src = self._pull_from
        if src is None:
            assert self._source is not None  # callers check for a stream input
            src = self._pull_from = self._source._fast()
        pending, load, n, rr = self._pending, self._load, self._n, self._rr_start
        outstanding, depth = pool.outstanding, self._depth
        caps = self._captures
        window, chunk = self._window, min(self._chunk, self._ramp)
        p, inflight = self._next_pull, self._inflight
        next_capture = caps[-1][0] + self._capture_every if caps else p
        sync = True  # write p and inflight back on the way out
        try:
            while not self._exhausted and inflight < window:
                if p >= next_capture:
                    self._capture(p)
                    if self._capture_error is not None:
                        return  # _dispatch's general loop carries on
                    next_capture = p + self._capture_every
                try:
                    item = next(src)
                except StopIteration:
                    self._exhausted = True
                    return
                except Exception:
                    self._next_pull, self._inflight = p, inflight
                    sync = False  # _pull_error moves them on
                    self._pull_error()
                    return
                w = (p - rr) % n if p >= rr else 0
                pend = pending[w]
                pend.append((p, item))
                load[w] += 1
                p += 1
                inflight += 1
                if len(pend) >= chunk and len(outstanding(w)) < depth:
                    self._next_pull, self._inflight = p, inflight
                    self._send(w)
                    if want is not None and want < p and self._poll_replies(want):
                        return
                    window, chunk = self._window, min(self._chunk, self._ramp)
        finally:
            if sync:
                self._next_pull, self._inflight = p, inflight

    def _pull_error(self) -> None:
        """Record the exception being handled, raised by the input while pulling position
        ``self._next_pull``: it is raised in its place in the output."""
        import sys

        exc = sys.exc_info()[1]
        assert isinstance(exc, Exception)  # called from an `except Exception` block
        p = self._next_pull
        self._exhausted = True
        self._inflight += 1
        add_note(exc, f"raised by the input of stage {self._stage!r} at item {p}")
        if self._ordered:
            self._ready[p] = (_LOCAL_ERROR, exc)
        else:
            self._ready.append((p, (_LOCAL_ERROR, exc)))

    def _poll_replies(self, want: int) -> bool:
        """Collect the replies already waiting (without blocking); whether ``want`` is ready."""
        pool = self._pool
        assert pool is not None  # called from _dispatch, on an open pool
        busy = [w for w in range(self._n) if pool.outstanding(w)]
        if busy:
            for w in pool.ready(busy, 0):
                self._collect(w)
        return want in self._ready

    def _send(self, w: int) -> None:
        pend = self._pending[w]
        size = min(self._chunk, self._ramp)
        if size < self._chunk and len(pend) >= size:
            self._ramp_sends += 1
            if self._ramp_sends % self._n == 0:
                self._ramp *= 2  # every worker got a full chunk of this size: double it
        chunk = pend[:size]
        del pend[:size]
        positions = [p for p, _ in chunk]
        items = None if self._source is None else [x for _, x in chunk]
        assert self._pool is not None  # sends happen on an open pool
        try:
            self._pool.submit(w, self._gen, self._base, positions, items)
        except Exception as exc:
            add_note(exc, f"while sending items {positions[0]}..{positions[-1]} to worker {w} "
                          f"of stage {self._stage!r} (items must be picklable)")
            raise

    def _wait(self, target: int | None) -> None:
        """Block until worker ``target`` (any busy worker when ``None``) has replied,
        collecting every reply that arrives meanwhile and refilling those workers."""
        t0 = time.perf_counter()
        try:
            while True:
                pool = self._check_pool()
                busy = [w for w in range(self._n) if pool.outstanding(w)]
                if target is not None and target not in busy:
                    raise PipelineError(  # pragma: no cover - an engine bug, never a hang
                        f"stage {self._stage!r}: waiting for worker {target}, which has no work"
                    )
                timeout = self._holder.timeout
                got = pool.ready(busy, _WAIT_SLICE if timeout is None else min(
                    _WAIT_SLICE, max(0.01, self._next_deadline(busy) - time.monotonic())))
                for w in got:
                    self._collect(w)
                if timeout is not None:
                    self._check_timeouts([w for w in busy if w not in got])
                if got and (target is None or target in got):
                    return
                if got:
                    self._dispatch()
        finally:
            self.wait_seconds += time.perf_counter() - t0

    def _next_deadline(self, busy: list[int]) -> float:
        pool = self._pool
        assert pool is not None  # called only while the stage has workers
        timeout = self._holder.timeout
        assert timeout is not None  # only called when the stage has a timeout
        starts = [p[1] for p in map(pool.progress, busy) if p is not None]
        return min(starts) + timeout if starts else time.monotonic() + _WAIT_SLICE

    def _check_timeouts(self, busy: list[int]) -> None:
        timeout = self._holder.timeout
        assert timeout is not None  # only called when the stage has a timeout
        now = time.monotonic()
        pool = self._pool
        assert pool is not None  # called only while the stage has workers
        for w in busy:
            progress = pool.progress(w)
            if progress is not None and now - progress[1] > timeout:
                position = progress[0]
                # the worker is stuck in fn: mark the pool unusable so that it is
                # terminated when handed back
                pool.broken = pool.broken or (
                    f"worker {w} was stuck on item {position} for more than {timeout:g} s"
                )
                explain = getattr(pool, "timeout_error", None)  # Ray: the cluster gone?
                if explain is not None:
                    raise explain(self._stage, position, timeout)
                raise StageTimeoutError(self._stage, position, timeout)

    def _collect(self, w: int) -> None:
        assert self._pool is not None  # replies are collected from an open pool
        positions, entries, busy, nbytes = self._pool.collect(w)
        n = len(positions)
        self.worker_seconds += busy
        self._load[w] -= n
        if self._ordered:
            self._ready.update(zip(positions, entries))
        else:
            self._ready.extend(zip(positions, entries))
        if self._calibration is not None:
            self._calibration.add_worker(items=n, seconds=busy)
        self._item_s = autotune.running_mean(self._item_s, busy / n)
        self._item_bytes = autotune.running_mean(self._item_bytes, nbytes / n)
        holder = self._holder
        holder.item_s, holder.item_bytes = self._item_s, self._item_bytes
        self._retune()

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        p = self._next_yield
        state: dict[str, Any] = {
            "type": "parallel_map",
            "pos": p,
            "done": sorted(self._yielded_ahead),
        }
        if self._source is None:
            state["len"] = self._len
            world = _shard_world(self._holder.source)
            if world is not None:
                state["world_size"] = world
            return state
        if self._capture_error is None and self._next_pull == p and (
            not self._captures or self._captures[-1][0] != p
        ):
            self._capture(p)  # the input is at p now: an exact state (no items to skip)
            while len(self._captures) > 1 and self._captures[1][0] <= p:
                self._captures.popleft()
        if self._capture_error is not None:
            raise StateNotSupportedError(
                f"stage {self._stage!r} cannot report its position because its input cannot: "
                f"{self._capture_error}"
            ) from self._capture_error
        cap_pos, cap_state = self._captures[0]
        state["parent"] = cap_state
        state["skip"] = p - cap_pos
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "parallel_map", ("pos", "done"))
        pos = non_negative_int("state['pos']", state["pos"])
        done = state["done"]
        if not isinstance(done, list) or any(
            isinstance(d, bool) or not isinstance(d, int) or d <= pos for d in done
        ):
            raise StateError(f"state['done'] must list positions after {pos}, got {done!r}")
        if self._source is None:
            if "len" not in state:
                raise StateError(f"state for stage {self._stage!r} was made over a stream input, "
                                 "this one reads a random-access dataset")
            world = _shard_world(self._holder.source)
            if "world_size" in state and world is not None and state["world_size"] != world:
                raise StateError(
                    f"state of stage {self._stage!r} was saved with world_size="
                    f"{state['world_size']}, this run has world_size={world}: a worker map "
                    "right after shard() reads the shard by index and can only resume with the "
                    "same world size; resume with world_size="
                    f"{state['world_size']}, or let a stage iterate the shard first, e.g. "
                    ".shard(rank, world_size).prefetch(2).map(fn, num_workers=N)"
                )
            if state["len"] != self._len:
                raise StateError(f"state is for an input of {state['len']} items, this one has "
                                 f"{self._len}")
        elif "parent" not in state or "skip" not in state:
            raise StateError(f"state for stage {self._stage!r} was made over a random-access "
                             "input, this one reads a stream")
        self._release()
        self._reset_buffers()
        self._pull_from = None
        self._ramp = _RAMP_START
        self._ramp_sends = 0
        self._done = self._closed
        self._exhausted = False
        self._captures.clear()
        self._capture_error = None
        if self._source is not None:
            skip = non_negative_int("state['skip']", state["skip"])
            from feedline.dataset import shard as shard_mod

            before = shard_mod.reshard_count
            self._source.set_state(state["parent"])
            if shard_mod.reshard_count != before and (skip or done):
                raise StateError(
                    f"the input of stage {self._stage!r} was resumed on a different world "
                    f"size, but the state counts {skip} item(s) to skip and {len(done)} "
                    "already yielded in the old world's items; resume with the saved world "
                    "size, or use ordered=True (see feedline.dataset.shard)"
                )
            for k in range(skip):
                try:
                    next(self._source)
                except StopIteration:
                    raise StateError(
                        f"the input of stage {self._stage!r} ended after {k} of the {skip} items "
                        "to skip while resuming; it does not yield the same items every time"
                    ) from None
            self._captures.append((pos - skip, state["parent"]))
        self._next_pull = self._next_yield = pos
        self._yielded_ahead = set(done)


def _shard_world(source: Any) -> int | None:
    """The world size when ``source`` is an index-mode shard, else ``None``."""
    from feedline.dataset.shard import ShardDataset

    return source.world_size if isinstance(source, ShardDataset) else None


def _default_shm_budget() -> int:
    from feedline.runtime.shm import shm_free_bytes

    free = shm_free_bytes()
    return _DEFAULT_SHM_BUDGET if free is None else max(1 << 22, min(_DEFAULT_SHM_BUDGET, free // 4))
