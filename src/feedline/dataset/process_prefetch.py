"""``Dataset.prefetch(n, process=True)``: run the pipeline ahead in a process of its own.

Everything before the stage — reading, shuffling, decoding, batching, worker stages
included — runs in one background process; the consuming process only receives the
finished items. A training loop then shares neither its interpreter lock nor its
Python work with the input pipeline, which is what a small, fast training step needs
(the data work of a ``prefetch`` thread takes the lock away from the step).

* **Start-up.** The process starts on the first iteration (``fork`` by default; see
  :class:`~feedline.runtime.workers.WorkerPool` for ``spawn``/``forkserver``) with the
  pipeline as it was at that moment, and is kept for later iterations and epochs.
  ``ds.close()`` stops it; so do garbage collection of the dataset and interpreter exit.
  Worker stages inside the pipeline start their processes from it; they end with it.
* **Items** come back through a ring of shared-memory blocks: numpy arrays (alone or
  inside tuples, lists and dicts) are copied, not pickled; put the stage after
  ``batch`` so that one message carries a whole batch (a batch of samples of small
  arrays travels as one stacked array per column). Up to ``buffer_size`` items are
  produced ahead (asked for and not yet handed out), in messages of
  ``buffer_size // 8`` items or more (over pipes, one message in flight of
  ``buffer_size // 2`` items).
  ``buffer_size="auto"`` keeps 8 messages in flight and sizes them by measuring: each
  carries about 2 ms of the process's work (1 to 64 items, at most 16 MiB), so that
  cheap items do not cost a message each.
* **Order, errors and state** are those of the pipeline without the stage. An exception
  raised while producing item ``i`` is raised by the consumer's ``next`` at item ``i``,
  as the original exception type when it can be pickled (else
  :class:`~feedline.exceptions.WorkerError`), with the process's traceback as
  ``__cause__`` and a note naming the stage and item; the iteration then ends. A
  process killed by a signal or the OOM killer raises
  :class:`~feedline.exceptions.WorkerDiedError`. The state after each item is taken in
  the background process, so ``get_state()`` costs the consumer nothing; restoring it
  resumes the pipeline there, exactly after the last item received.
* **Priority.** ``nice=n`` (0 to 19) lowers the background process's CPU priority, and
  that of the worker processes it starts: when the data work and the training step want
  the same cores, the step goes first, and the pipeline uses the time it leaves.
* **Timeout.** With ``timeout=seconds``, an item the process has been producing for
  longer raises :class:`~feedline.exceptions.StageTimeoutError` naming the stage and the
  item (0-based in this iteration); the process is then terminated and the iteration
  ends (the next one starts a new process). Time the process spends waiting for the
  consumer does not count.
* **Statistics** of the stages inside stay in the background process: a report made
  in the consumer has one row for this stage.

**On a Ray cluster** (``prefetch(n, backend="ray")``): the pipeline before the stage
runs in one Ray actor instead of a local process
(:class:`~feedline.runtime.ray_executor.RayActorExecutor`, the Ray executor of
``map(..., backend="ray")`` with one slot), on the cluster that ``ray.init()`` or
``RAY_ADDRESS`` names; everything above holds — order, errors at their item with the
actor's traceback, ``get_state()`` taken in the actor so that a state resumes exactly
(on either backend: the states are the same), ``timeout`` — except what is about local
processes: finished items come back through Ray's object store (not shared memory), and
``start_method``, ``transport`` and ``nice`` do not apply. ``ray=RayOptions(...)``
places the actor as it places map's Ray tasks: ``num_cpus`` (held by the actor while
it lives, default 1) and ``resources`` (custom resources, such as ``{"prep": 1}`` for
the nodes started with ``ray start --resources='{"prep": 8}'``); its other fields are
about tasks and must keep their defaults. The pipeline must pickle
with cloudpickle (its files reopen in the actor, so they must be on a file system that
node sees). With ``timeout=seconds``, the cluster gone raises
:class:`~feedline.exceptions.ClusterUnavailableError` naming the stage within about
``timeout`` (else :class:`~feedline.exceptions.StageTimeoutError`); the actor lost with
its node raises :class:`~feedline.exceptions.WorkerDiedError` (it is not restarted: its
pipeline's position went with it; resume from the last ``get_state()``). Worth it when
the pipeline's work should leave the trainer's machine whole (one actor, so at most one
core's worth of Python, plus the worker stages it starts on its node); to spread one
stage's work over many nodes, use ``map(..., backend="ray")``.

>>> from feedline import Dataset
>>> ds = Dataset.range(6).map(lambda x: x * 10).batch(2).prefetch(2, process=True)
>>> ds.to_list()
[[0, 10], [20, 30], [40, 50]]
>>> it = ds.iterator(); first = next(it)
>>> state = it.get_state(); it.close()
>>> list(ds.iterator(state))
[[20, 30], [40, 50]]
>>> ds.close()
"""

from __future__ import annotations

import time
import weakref
from typing import Any

from feedline._internal.validate import one_of, optional_positive_number, positive_int
from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.dataset.options import RayOptions
from feedline.exceptions import PipelineError, StageTimeoutError, StateError
from feedline.runtime import autotune
from feedline.runtime.ray_executor import RayActorExecutor
from feedline.runtime.workers import (
    CANCELLED,
    END,
    OK,
    START_METHODS,
    TRANSPORTS,
    EndOfInput,
    PoolKeeper,
    WorkerPool,
    default_start_method,
    pack_entries,
    unpack_entries,
    unpack_exception,
)

__all__ = ["ProcessPrefetchDataset"]

_MAX_MESSAGES = 8  # messages in flight (shared-memory result blocks)
_AUTO_MAX_ITEMS = 64  # items per message under buffer_size="auto"
_AUTO_MAX_BYTES = 16 << 20
_WAIT_SLICE = 1.0  # seconds per wait, between checks that the process is still usable
_DRAIN_TIMEOUT = 3.0  # seconds to wait for cancelled work before replacing the process


def _same(item: Any) -> Any:
    return item


class _Rows:
    """A list sent as stacked columns (:func:`~feedline.runtime.workers.pack_entries`:
    a batch of samples of small arrays travels as a few arrays, not one per sample)."""

    __slots__ = ("packed",)

    def __init__(self, packed: Any) -> None:
        self.packed = packed

    @staticmethod
    def pack(item: Any) -> Any:
        if type(item) is not list or len(item) < 2:
            return item
        entries = [(OK, x) for x in item]
        packed = pack_entries(entries)
        return item if packed is entries else _Rows(packed)

    def unpack(self) -> list:
        return [value for _, value in unpack_entries(self.packed)]


class _Cursor:
    """The background process's side: the pipeline's iterations, read in order.

    ``_configure(("begin", epoch, state, pos))`` builds iteration ``epoch`` (resumed
    from ``state`` unless ``None``) whose next item is position ``pos``;
    ``_configure(("end",))`` closes it. ``_getitem(pos)`` returns ``(item, state after
    it)``; at the data's end it raises :class:`EndOfInput` for that position, and the
    positions after it are those of the next epoch, from its start (so the next
    epoch's first items are read while the consumer finishes this one)."""

    def __init__(self, parent: Dataset, name: str) -> None:
        self._parent = parent
        self._name = name
        self._it: DatasetIterator | None = None
        self._pull: Any = None
        self._epoch = 0
        self._next = 0
        self._ended = False
        self._error: BaseException | None = None  # raised by the next read
        self._state_error: StateError | None = None

    def _configure(self, payload: tuple) -> None:
        self._close()
        if payload[0] == "begin":
            _, epoch, state, pos = payload
            self._begin(epoch, state, pos)

    def _begin(self, epoch: int, state: Any, pos: int) -> None:
        self._epoch, self._next = epoch, pos
        self._ended, self._error, self._state_error = False, None, None
        try:
            it = self._parent._build(BuildContext(epoch=epoch))
            self._it = it
            if state is not None:
                it.set_state(state)
            self._pull = it._fast()
        except Exception as exc:  # noqa: BLE001 - raised in the consumer at the next item
            self._error = exc

    def _close(self) -> None:
        it, self._it, self._pull = self._it, None, None
        if it is not None:
            it.close()

    def _getitem(self, pos: int) -> tuple[Any, Any]:
        if self._ended:
            self._close()
            self._begin(self._epoch + 1, None, pos)
        if self._error is not None:
            raise self._error
        if pos != self._next or self._pull is None:
            raise PipelineError(  # pragma: no cover - an engine bug, never a wrong item
                f"stage {self._name!r}: asked for item {pos}, the pipeline is at {self._next}"
            )
        try:
            item = next(self._pull)
        except StopIteration:
            self._ended = True
            raise EndOfInput from None
        self._next = pos + 1
        item = _Rows.pack(item)
        if self._state_error is not None:
            return item, self._state_error
        try:
            state = self._it.get_state()  # type: ignore[union-attr]  # set by _configure
        except StateError as exc:
            self._state_error = exc  # never taken again in this iteration: it costs
            state = exc
        return item, state


class ProcessPrefetchDataset(Dataset):
    """The parent, produced ahead in a background process; see the module docstring.

    Args:
        parent: the pipeline run in the process (not a :class:`Dataset`: ``TypeError``).
        buffer_size: items produced ahead (a positive int), or ``"auto"``.
        start_method: ``"fork"`` (``None``: the default where available), ``"spawn"`` or
            ``"forkserver"`` (the pipeline must then pickle); another value raises
            ``ValueError``.
        transport: ``"auto"`` (``None``), ``"shm"`` or ``"pipe"`` (one message in
            flight).
        nice: 0 to 19, added to the process's niceness (else
            ``ValueError``/``TypeError``; see the module docstring).
        timeout: seconds the process may spend on one item before
            :class:`~feedline.exceptions.StageTimeoutError` (a positive number or
            ``None``).
        backend: ``"process"`` (a local background process) or ``"ray"`` (one Ray
            actor; see the module docstring).
        ray: with ``backend="ray"``: :class:`~feedline.RayOptions` whose ``num_cpus``
            and ``resources`` place the actor (``None``: one CPU, anywhere).

    >>> ds = Dataset.range(4).prefetch(2, process=True)   # a background process
    >>> type(ds).__name__, ds.to_list()
    ('ProcessPrefetchDataset', [0, 1, 2, 3])
    >>> ds.close()
    """

    def __init__(self, parent: Dataset, buffer_size: int | str, *,
                 start_method: str | None = None, transport: str | None = None,
                 nice: int = 0, timeout: float | None = None, backend: str = "process",
                 ray: RayOptions | None = None) -> None:
        super().__init__()
        if not isinstance(parent, Dataset):
            raise TypeError(f"`parent` must be a Dataset, got {type(parent).__name__}")
        self.backend = one_of("backend", backend, ("process", "ray"))
        self.ray = _check_ray(backend, ray, start_method, transport, nice)
        self._parents = (parent,)
        self.buffer_size: int | str = (
            "auto" if buffer_size == "auto" else positive_int("buffer_size", buffer_size))
        self.start_method = one_of("start_method", start_method or default_start_method(),
                                   START_METHODS)
        self.transport = one_of("transport", transport or "auto", TRANSPORTS)
        if isinstance(nice, bool) or not isinstance(nice, int):
            raise TypeError(f"`nice` must be an int from 0 to 19, got {nice!r}")
        if not 0 <= nice <= 19:
            raise ValueError(f"`nice` must be an int from 0 to 19, got {nice!r}")
        self.nice = nice
        self.timeout = optional_positive_number("timeout", timeout)
        self._holder = _ProcessHolder(self)
        self._finalizer = weakref.finalize(self, self._holder.orphan)

    @property
    def name(self) -> str:
        size = "'auto'" if self.buffer_size == "auto" else self.buffer_size
        where = "backend='ray'" if self.backend == "ray" else "process=True"
        return f"prefetch({size}, {where})"

    def with_parent(self, parent: Dataset) -> ProcessPrefetchDataset:
        """The same stage (same options, a process of its own) over ``parent``.

        Args:
            parent: the pipeline the new stage runs in its process.

        >>> ds = Dataset.range(3).prefetch(2, process=True)
        >>> ds.with_parent(Dataset.range(2)).name
        'prefetch(2, process=True)'
        """
        return ProcessPrefetchDataset(parent, self.buffer_size, start_method=self.start_method,
                                      transport=self.transport, nice=self.nice,
                                      timeout=self.timeout, backend=self.backend,
                                      ray=self.ray)

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return _ProcessPrefetchIterator(self._holder, ctx.epoch, self.buffer_size, self.name)

    @property
    def worker_pids(self) -> list[int]:
        """The background process's id (empty before the first iteration)."""
        return self._holder.pids()

    def _release(self) -> None:
        self._holder.close()


class _Carry:
    """What an iteration that reached its end leaves for the next epoch's: the process
    is already reading epoch ``epoch`` from position ``base``."""

    __slots__ = ("epoch", "base", "next_send", "ready", "generation")

    def __init__(self, epoch: int, base: int, next_send: int, ready: dict,
                 generation: int) -> None:
        self.epoch = epoch
        self.base = base
        self.next_send = next_send
        self.ready = ready
        self.generation = generation


def _check_ray(backend: str, ray: RayOptions | None, start_method: str | None,
               transport: str | None, nice: int) -> RayOptions | None:
    """``ray`` checked against ``backend`` (and the process-only options); with
    ``backend="ray"`` never ``None``."""
    if backend != "ray":
        if ray is not None:
            raise ValueError("`ray` needs backend='ray'")
        return None
    if start_method is not None or transport is not None or nice != 0:
        raise ValueError("`start_method`, `transport` and `nice` are for a local process, "
                         "not backend='ray'")
    if ray is None:
        return RayOptions()
    if not isinstance(ray, RayOptions):
        raise TypeError(f"`ray` must be a RayOptions or None, got {ray!r}")
    default = RayOptions()
    tasks_only = [f for f in ("max_retries", "depth", "chunk_seconds")
                  if getattr(ray, f) != getattr(default, f)]
    if tasks_only:
        raise ValueError(f"prefetch(backend='ray') runs one actor, placed by `ray`'s num_cpus "
                         f"and resources; {', '.join(tasks_only)} are for map's tasks")
    return ray


_Pool = WorkerPool | RayActorExecutor  # the background process, or the Ray actor


class _ProcessHolder(PoolKeeper[_Pool]):
    """Keeps the stage's idle process (and what it read into the next epoch) and hands it
    to one iterator at a time (a second, concurrent iterator gets one of its own,
    stopped when it is handed back)."""

    def __init__(self, ds: ProcessPrefetchDataset) -> None:
        super().__init__()
        self._parent = ds._parents[0]
        self._name = ds.name
        self._start_method = ds.start_method
        self._transport = ds.transport
        self._nice = ds.nice
        self._ray = ds.ray
        self.timeout = ds.timeout
        size = ds.buffer_size
        self.auto = size == "auto"
        # messages in flight: up to 8 of ceil(size / 8) items, never more than size items
        self._depth = _MAX_MESSAGES if self.auto else int(size) // -(-int(size) // _MAX_MESSAGES)
        # per-item seconds and bytes measured by earlier iterations ("auto")
        self.item_s: float | None = None
        self.item_bytes: float | None = None

    def acquire(self, epoch: int, fresh: bool) -> tuple[_Pool, _Carry | None]:
        """A process for iteration ``epoch`` and, when it already reads that epoch from
        its start (and ``fresh``: the iteration starts there), what it read so far."""
        pool, carry = self.take_idle()
        if pool is not None and carry is not None:
            if fresh and carry.epoch == epoch and pool.alive():
                return self.lend_as_is(pool), carry
            pool.cancel()
        pool = self.lend(pool, self._make, drain_timeout=_DRAIN_TIMEOUT)
        return pool, None

    def _make(self) -> _Pool:
        if self._ray is not None:
            return RayActorExecutor(_same, _Cursor(self._parent, self._name), stage=self._name,
                                    timeout=self.timeout, depth=self._depth,
                                    num_cpus=self._ray.num_cpus,
                                    resources=dict(self._ray.resources or {}))
        return WorkerPool(_same, _Cursor(self._parent, self._name), workers=1,
                          stage=self._name, start_method=self._start_method,
                          transport=self._transport, depth=self._depth, nested=True,
                          nice=self._nice)


class _ProcessPrefetchIterator(DatasetIterator):
    """Item ``i`` of this iteration is the process's position ``base + i``."""

    def __init__(self, holder: _ProcessHolder, epoch: int, size: int | str, name: str) -> None:
        self._holder = holder
        self._epoch = epoch
        self._name = name
        self._pool: _Pool | None = None
        self._gen = 0
        self._chunk = 1
        self._size = size
        self._base = 0
        self._next_yield = 0  # a position
        self._next_send = 0
        self._ready: dict[int, tuple] = {}
        self._end: int | None = None  # the position the process reported the data's end at
        self._state: Any = None  # the pipeline's state after the last item (None: start)
        self._done = False
        self._closed = False
        self.wait_seconds = 0.0

    # ------------------------------------------------------------------ start / stop
    def _start(self) -> None:
        fresh = self._state is None and self._next_yield == self._base
        pool, carry = self._holder.acquire(self._epoch, fresh)
        self._pool = pool
        self._retune()
        self._end = None
        if carry is not None:
            self._gen = carry.generation
            self._base = self._next_yield = carry.base
            self._next_send = carry.next_send
            self._ready = carry.ready
            self._note_ends(carry.ready)
            return
        # a fresh start or a restored state: positions count from this epoch's start
        assert self._base == 0  # set by __init__ and set_state; carries set it above
        self._gen = pool.new_generation()
        pool.configure(0, ("begin", self._epoch, self._state, self._next_yield))
        self._next_send = self._next_yield
        self._ready = {}

    def _release(self, carry: _Carry | None = None) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if pool.broken is None and carry is None:
            try:
                if pool.outstanding(0):
                    pool.cancel()
                pool.configure(0, ("end",))  # close the pipeline there now
            except Exception:  # noqa: BLE001 - a process that is gone is replaced anyway
                pool.broken = pool.broken or "the background process could not be reached"
        self._holder.release(pool, carry)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = self._done = True
        self._ready = {}
        self._release()

    def _retune(self) -> None:
        holder, pool = self._holder, self._pool
        assert pool is not None  # tuned on an open process
        if not holder.auto:  # over pipes (one message in flight) halves of the buffer
            self._chunk = max(1, int(self._size) // max(2, pool.depth))
            return
        self._chunk = autotune.choose_chunk(
            item_seconds=holder.item_s, item_bytes=holder.item_bytes,
            bytes_cap=_AUTO_MAX_BYTES, max_items=_AUTO_MAX_ITEMS)

    # ------------------------------------------------------------------ iteration
    def _fill(self, pool: _Pool) -> None:
        # items asked for and not yet handed out (in flight or ready) stay within the buffer
        room = None if self._holder.auto else int(self._size) + self._next_yield - self._chunk
        while self._end is None and len(pool.outstanding(0)) < pool.depth and (
                room is None or self._next_send <= room):
            start = self._next_send
            self._next_send = start + self._chunk
            pool.submit(0, self._gen, 0, list(range(start, self._next_send)), None)

    def _check_pool(self) -> _Pool:
        pool = self._pool
        if pool is None or pool.broken is not None:
            reason = "the dataset was closed" if pool is None else pool.broken
            raise PipelineError(f"the background process of stage {self._name!r} is gone: "
                                f"{reason}")
        return pool

    def _note_ends(self, entries: dict) -> None:
        ends = [p for p, entry in entries.items() if entry[0] == END]
        if ends and (self._end is None or min(ends) < self._end):
            self._end = min(ends)

    def _wait(self, pool: _Pool) -> None:
        t0 = time.perf_counter()
        try:
            timeout = self._holder.timeout
            slice_ = _WAIT_SLICE if timeout is None else min(_WAIT_SLICE, timeout)
            while not pool.ready([0], slice_):
                self._check_pool()
                if timeout is not None:
                    self._check_timeout(pool, timeout)
            positions, entries, busy, nbytes = pool.collect(0)
            got = {p: entry for p, entry in zip(positions, entries) if entry[0] != CANCELLED}
            holder = self._holder
            if holder.auto and got:
                n = len(positions)
                holder.item_s = autotune.running_mean(holder.item_s, busy / n)
                holder.item_bytes = autotune.running_mean(holder.item_bytes, nbytes / n)
                self._retune()
            self._note_ends(got)
            self._ready.update(got)
        finally:
            self.wait_seconds += time.perf_counter() - t0

    def _check_timeout(self, pool: _Pool, timeout: float) -> None:
        progress = pool.progress(0)  # the position the process is on, and since when
        if progress is not None and time.monotonic() - progress[1] > timeout:
            item = progress[0] - self._base
            # stuck inside the pipeline: the process is terminated when handed back
            error = (pool.timeout_error(self._name, item, timeout)  # the cluster gone?
                     if isinstance(pool, RayActorExecutor)
                     else StageTimeoutError(self._name, item, timeout))
            pool.broken = pool.broken or (
                f"the background process was stuck on item {item} for more than {timeout:g} s")
            raise error

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        if self._pool is None:
            self._start()
        p = self._next_yield
        try:
            pool = self._check_pool()
            entry = self._ready.pop(p, None)
            while entry is None:
                self._fill(pool)
                self._wait(pool)
                pool = self._check_pool()
                entry = self._ready.pop(p, None)
            self._fill(pool)
        except BaseException:
            self._done = True
            self._release()
            raise
        status, value = entry
        if status == OK:
            item, self._state = value
            self._next_yield = p + 1
            return item.unpack() if type(item) is _Rows else item
        self._done = True
        if status == END:
            # the process goes on into the next epoch: leave it what it has read
            ready = {q: e for q, e in self._ready.items() if q > p}
            self._ready = {}
            self._release(_Carry(self._epoch + 1, p + 1, self._next_send, ready, self._gen))
            raise StopIteration
        self._release()
        raise unpack_exception(value, stage=self._name, position=p - self._base)

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        state = self._state
        if isinstance(state, StateError):
            raise state
        return {"type": "process_prefetch", "pos": self._next_yield - self._base,
                "parent": state}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "process_prefetch", ("pos", "parent"))
        pos = state["pos"]
        if isinstance(pos, bool) or not isinstance(pos, int) or pos < 0:
            raise StateError(f"state['pos'] must be a non-negative int, got {pos!r}")
        self._release()
        self._ready = {}
        self._state = state["parent"]
        self._base, self._next_yield = 0, pos
        self._done = self._closed
