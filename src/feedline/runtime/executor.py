"""One executor protocol for worker stages, three implementations.

``map(fn, num_workers=N, backend=...)`` has one engine
(:mod:`feedline.dataset.parallel_map`) that does everything a worker stage does on the
consumer's side — pulling from the input, chunking, dispatch, ordering, exactly-once
bookkeeping, ``get_state``/``set_state``, errors in their place, timeouts and
statistics — over an *executor* that only runs chunks. An executor is a set of
``size`` *slots*; each slot takes up to ``depth`` chunks at a time and answers them in
the order it got them:

==========================  ==========================================================
``submit(w, gen, base, positions, items)``  queue a chunk on slot ``w``: ``fn(items[j])``, or
                            ``fn(source._getitem(base + positions[j]))`` when ``items``
                            is ``None`` (random-access inputs read their own records)
``outstanding(w)``          the position lists of slot ``w``'s unanswered chunks
``ready(slots, timeout)``   the slots among ``slots`` whose oldest chunk is answered
``collect(w)``              ``(positions, entries, busy seconds, bytes)`` of that chunk;
                            each entry ``(OK, value)``, ``(ERROR, payload)``,
                            ``(CANCELLED, None)`` or ``(END, None)``
``error(payload, stage=, position=)``  the exception an ``ERROR`` payload stands for
``progress(w)``             ``(position, since)`` of the item slot ``w`` is on, for
                            ``timeout``; ``None`` when idle or unknown
``reseed(w, (seed, epoch, exact))``  the base seed and epoch for slot ``w``'s next chunks
``new_generation()``        start a generation (queued items of older ones are
                            cancelled); ``cancel`` is the same call
``drain(timeout)``, ``alive()``, ``shutdown()``, ``add_workers(n)``, ``pids``,
``broken`` (a reason, or ``None``), ``keep_when_idle``
==========================  ==========================================================

Implementations: :class:`ThreadExecutor` (below; threads of this process),
:class:`~feedline.runtime.workers.WorkerPool` (worker processes with shared-memory
results) and :class:`~feedline.runtime.ray_executor.RayExecutor` (Ray tasks on a
cluster). All three map a chunk with :func:`run_chunk`, so the item loop — per-item
seeding from ``(seed, epoch, position)`` (:mod:`feedline.runtime.seeding`), reading
random-access records, catching the function's exception as that item's entry — is
written once too.

>>> ex = ThreadExecutor(abs, None, workers=2, stage="demo")
>>> gen = ex.new_generation()
>>> ex.submit(0, gen, 0, [0, 1], [-3, 4]); ex.submit(1, gen, 0, [2], [-5])
>>> ex.ready([0], timeout=10)
[0]
>>> positions, entries, _, _ = ex.collect(0)
>>> positions, [value for _, value in entries]
([0, 1], [3, 4])
>>> ex.drain(timeout=10)
True
>>> ex.shutdown()
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from feedline._internal.notes import add_note
from feedline.exceptions import PipelineError
from feedline.runtime.seeding import begin_item, begin_item_key, derive_seed, item_seed, seed_all

__all__ = ["OK", "ERROR", "CANCELLED", "END", "EndOfInput", "Executor", "run_chunk",
           "Slot", "SlotExecutor", "ThreadExecutor"]

#: Entry status code of a chunk's reply: the item was produced.
OK = 0
#: Entry status code: the function raised (the reply carries the packed exception).
ERROR = 1
#: Entry status code: the chunk was cancelled before the item ran.
CANCELLED = 2
#: Entry status code: the source's data ended before the position (see :class:`EndOfInput`).
END = 3


class EndOfInput(Exception):
    """Raised by a source's ``_getitem`` for a position after the end of its data: the
    reply entry is ``(END, None)`` instead of an error."""


class Executor(Protocol):
    """What the worker-stage engine needs from a backend (see the module docstring)."""

    depth: int
    broken: str | None
    keep_when_idle: bool

    @property
    def size(self) -> int: ...
    def outstanding(self, worker: int) -> deque[list[int]]:
        """The position lists of the chunks sent to a slot and not yet collected, oldest first.

        Args:
            worker: the slot's index, ``0 <= worker < size``.
        """
        ...

    def submit(self, worker: int, generation: int, base: int, positions: list[int],
               items: list | None) -> None:
        """Queue a chunk on a slot; ``PipelineError`` when it already has ``depth`` chunks.

        Args:
            worker: the slot's index.
            generation: the generation (:meth:`new_generation`) the chunk belongs to; once a
                newer one starts, its items not yet run are answered ``(CANCELLED, None)``.
            base: added to each position to get the record index for a random-access
                input (``source._getitem(base + position)``).
            positions: the items' positions in the stage's output, one per item.
            items: the input items, one per position; ``None`` makes the slot read them
                from the random-access input.
        """
        ...

    def ready(self, workers: Sequence[int], timeout: float | None) -> list[int]:
        """The slots among ``workers`` whose oldest chunk is answered, after waiting for at
        least one of them up to ``timeout``.

        Args:
            workers: the slot indices to wait on.
            timeout: most seconds to wait; ``None`` waits as long as it takes. An empty
                list comes back when it passed.
        """
        ...

    def collect(self, worker: int) -> tuple[list[int], list, float, int]:
        """Take a slot's oldest answered chunk: ``(positions, entries, busy seconds, bytes)``.

        Args:
            worker: a slot that :meth:`ready` returned.
        """
        ...

    def error(self, payload: Any, *, stage: str, position: int) -> BaseException:
        """The exception an ``ERROR`` entry's payload stands for.

        Args:
            payload: the entry's payload.
            stage: the stage's name, for the note on the exception.
            position: the item's position, for the note on the exception.
        """
        ...

    def progress(self, worker: int) -> tuple[int, float] | None:
        """``(position, since)`` of the item a slot is on (for ``timeout``), or ``None``.

        Args:
            worker: the slot's index.
        """
        ...

    def reseed(self, worker: int, seed: Any) -> None:
        """Set the seed key of a slot's next chunks.

        Args:
            worker: the slot's index.
            seed: ``(seed, epoch, exact)`` (see :func:`run_chunk`), or ``None`` for no
                per-item seeding.
        """
        ...

    def new_generation(self) -> int: ...
    def cancel(self) -> int: ...

    def drain(self, timeout: float) -> bool:
        """Finish or drop every outstanding chunk; ``False`` (and the executor broken)
        when that could not be done in time.

        Args:
            timeout: most seconds to spend.
        """
        ...

    def alive(self) -> bool: ...
    def shutdown(self) -> None: ...

    def add_workers(self, count: int) -> None:
        """Add slots, numbered after the existing ones.

        Args:
            count: how many slots to add.
        """
        ...

    @property
    def pids(self) -> list[int]: ...


def run_chunk(
    fn: Callable[[Any], Any],
    source: Any,
    seed_key: tuple[int, int, bool] | None,
    base: int,
    positions: Sequence[int],
    items: Sequence[Any] | None,
    *,
    pack_error: Callable[[BaseException, str], Any],
    cancelled: Callable[[], bool] | None = None,
    mark: Callable[[int, float], None] | None = None,
    global_generators: bool = True,
) -> list:
    """Map one chunk: the reply entries, one per position (see the module docstring).

    Args:
        fn: the function applied to each item.
        source: the random-access input, read as ``source._getitem(base + position)``
            when ``items`` is ``None``; its :class:`EndOfInput` gives an ``(END, None)``
            entry.
        seed_key: ``(seed, epoch, exact)`` gives each item the seed of ``(seed, epoch,
            position)`` (:func:`~feedline.runtime.seeding.current_item_seed`,
            ``item_rng``); ``None`` seeds nothing.
        base: added to each position to get the record index in ``source``.
        positions: the items' positions, one entry each.
        items: the input items, one per position, or ``None`` to read them from ``source``.
        pack_error: ``pack_error(exc, phase)`` turns the function's (``phase``
            ``"mapping"``) or the read's (``"reading"``) exception into the entry's payload.
        cancelled: asked before each item; when it returns true the item is answered
            ``(CANCELLED, None)`` without running.
        mark: ``mark(position, since)`` notes the item being mapped (``since`` is
            ``time.monotonic()``, 0.0 once the item is done).
        global_generators: with a ``seed_key``, also seed ``random``/numpy/torch: before
            every item when ``exact`` (the stage has a ``seed``: placement-independent
            draws, about 10-20 us per item), else once per chunk from its first position
            (``seed=None``: nothing to reproduce, so no per-item cost).

    >>> run_chunk(abs, None, (1, 0, True), 0, [0, 1], [-2, 3], pack_error=lambda e, phase: repr(e))
    [(0, 2), (0, 3)]
    >>> run_chunk(lambda x: 1 // x, None, None, 0, [0], [0], pack_error=lambda e, phase: phase)
    [(1, 'mapping')]
    """
    out: list = []
    x = None
    exact = False
    base_seed = epoch = 0
    if seed_key is not None:
        base_seed, epoch, exact = seed_key
        exact = exact and global_generators
        if global_generators and not exact and positions:
            seed_all(derive_seed(base_seed, epoch, positions[0], 1))
    try:
        for j, pos in enumerate(positions):
            if cancelled is not None and cancelled():
                out.append((CANCELLED, None))
                continue
            if mark is not None:
                mark(pos, time.monotonic())
            if exact:
                begin_item(item_seed(base_seed, epoch, pos), global_generators=True)
            elif seed_key is not None:
                begin_item_key(base_seed, epoch, pos)
            phase = "reading"
            try:
                if items is None:
                    x = source._getitem(base + pos)
                else:
                    x = items[j]
                phase = "mapping"
                out.append((OK, fn(x)))
            except EndOfInput:
                out.append((END, None))
            except Exception as exc:  # noqa: BLE001 - the item's entry
                out.append((ERROR, pack_error(exc, phase)))
            if mark is not None:
                mark(pos, 0.0)
    finally:
        if seed_key is not None:
            begin_item(None)
    return out


class Slot:
    """What every executor keeps per slot: its unanswered chunks and its seed key.

    Args:
        index: the slot's number in its executor.
    """

    def __init__(self, index: int) -> None:
        self.index = index
        self.outstanding: deque[list[int]] = deque()
        self.seed_key: tuple[int, int, bool] | None = None


class SlotExecutor:
    """The bookkeeping of slots shared by the executors that keep it in this process
    (:class:`ThreadExecutor`, :class:`~feedline.runtime.ray_executor.RayExecutor`);
    subclasses make their slots in :meth:`_new_slot`."""

    depth = 2
    _slots: list

    @property
    def size(self) -> int:
        return len(self._slots)

    @property
    def pids(self) -> list[int]:
        return []

    def add_workers(self, count: int) -> None:
        """Add slots made by :meth:`_new_slot`, numbered after the existing ones.

        Args:
            count: how many slots to add.
        """
        for _ in range(count):
            self._slots.append(self._new_slot(len(self._slots)))

    def _new_slot(self, index: int) -> Slot:
        return Slot(index)

    def outstanding(self, worker: int) -> deque[list[int]]:
        """The position lists of the slot's unanswered chunks, oldest first.

        Args:
            worker: the slot's index.
        """
        return self._slots[worker].outstanding

    def reseed(self, worker: int, seed: Any) -> None:
        """Set the seed key the slot's next submitted chunks carry.

        Args:
            worker: the slot's index.
            seed: ``(seed, epoch, exact)`` (see :func:`run_chunk`), or ``None``.
        """
        self._slots[worker].seed_key = seed

    def _check_room(self, worker: int) -> Any:
        slot = self._slots[worker]
        if len(slot.outstanding) >= self.depth:
            raise PipelineError(f"worker {worker} already has {self.depth} chunks outstanding")
        return slot


class _ThreadSlot(Slot):
    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.tasks: deque[tuple] = deque()
        self.results: deque[tuple[list, float]] = deque()
        self.progress: tuple[int, float] | None = None
        self.thread: threading.Thread | None = None


class ThreadExecutor(SlotExecutor):
    """Slots that are threads of this process (``backend="thread"``): no pickling, no
    copies; for functions that release the GIL. Exceptions come back as themselves,
    with their own traceback. Threads share ``random``/numpy/torch's global generators,
    so items are seeded through :func:`~feedline.runtime.seeding.item_rng` only. A
    thread stuck in the function cannot be stopped: :meth:`shutdown` does not wait for
    it (it ends when the call returns). Not kept between iterations: the threads stop
    when the iteration hands the executor back.

    Args:
        fn: the function each thread applies to items.
        source: the random-access input (threads read ``source._getitem(base + position)``)
            or ``None`` (chunks carry the items).
        workers: how many threads (slots) to start.
        stage: the stage's name, in thread names and error messages.
        depth: most chunks queued per thread; :meth:`submit` raises ``PipelineError``
            beyond it.
    """

    keep_when_idle = False

    def __init__(self, fn: Callable[[Any], Any], source: Any, *, workers: int, stage: str,
                 depth: int = 2) -> None:
        self.fn = fn
        self.source = source
        self.stage = stage
        self.depth = depth
        self.broken: str | None = None
        self._generation = 0
        self._stopping = False
        self._cond = threading.Condition()
        self._slots: list[_ThreadSlot] = []
        self.add_workers(workers)

    def _new_slot(self, index: int) -> _ThreadSlot:
        slot = _ThreadSlot(index)
        slot.thread = threading.Thread(target=self._run, args=(slot,), daemon=True,
                                       name=f"feedline-{self.stage}-{index}")
        slot.thread.start()
        return slot

    def _run(self, slot: _ThreadSlot) -> None:
        cond = self._cond
        while True:
            with cond:
                while not slot.tasks and not self._stopping:
                    cond.wait()
                if self._stopping:
                    return
                gen, base, positions, items, seed_key = slot.tasks.popleft()

            def mark(pos: int, since: float, slot: _ThreadSlot = slot) -> None:
                slot.progress = None if since == 0.0 else (pos, since)

            def cancelled(gen: int = gen) -> bool:
                return self._generation != gen or self._stopping

            t0 = time.perf_counter()
            entries = run_chunk(
                self.fn, self.source, seed_key, base, positions, items,
                pack_error=lambda exc, phase: exc, mark=mark, global_generators=False,
                cancelled=cancelled)
            busy = time.perf_counter() - t0
            with cond:
                slot.results.append((entries, busy))
                cond.notify_all()

    def new_generation(self) -> int:
        with self._cond:
            self._generation += 1
            return self._generation

    cancel = new_generation

    def progress(self, worker: int) -> tuple[int, float] | None:
        """``(position, since)`` of the item the thread is mapping (``since`` in
        ``time.monotonic()`` seconds), or ``None`` between items.

        Args:
            worker: the slot's index.
        """
        return self._slots[worker].progress

    def submit(self, worker: int, generation: int, base: int, positions: list[int],
               items: list | None) -> None:
        """Queue a chunk on a thread; ``PipelineError`` when it already has ``depth``.

        Args:
            worker: the slot's index.
            generation: the chunk's generation; items not yet run when a newer one starts
                are answered ``(CANCELLED, None)``.
            base: added to each position to read ``source._getitem(base + position)``.
            positions: the items' positions.
            items: the items, one per position, or ``None`` to read them from ``source``.
        """
        slot = self._check_room(worker)
        with self._cond:
            slot.tasks.append((generation, base, positions, items, slot.seed_key))
            slot.outstanding.append(positions)
            self._cond.notify_all()

    def ready(self, workers: Sequence[int], timeout: float | None) -> list[int]:
        """The threads among ``workers`` with an answered chunk, waiting for one up to
        ``timeout``; ``PipelineError`` once the executor is broken.

        Args:
            workers: the slot indices to wait on.
            timeout: most seconds to wait (``None``: no limit); ``[]`` when it passed.
        """
        if self.broken:
            raise PipelineError(f"the workers of stage {self.stage!r} are unusable: {self.broken}")
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                got = [w for w in workers if self._slots[w].results]
                if got:
                    return got
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return []
                self._cond.wait(left)

    def collect(self, worker: int) -> tuple[list[int], list, float, int]:
        """The thread's oldest answered chunk: ``(positions, entries, busy seconds, 0)``
        (nothing is copied, so 0 bytes).

        Args:
            worker: a slot :meth:`ready` returned.
        """
        slot = self._slots[worker]
        with self._cond:
            entries, busy = slot.results.popleft()
            return slot.outstanding.popleft(), entries, busy, 0

    def error(self, payload: Any, *, stage: str, position: int) -> BaseException:
        """The function's own exception object, with a note naming the stage and item.

        Args:
            payload: the exception the function raised (threads pass it as it is).
            stage: the stage's name, for the note.
            position: the item's position, for the note.
        """
        add_note(payload, f"raised in a thread of stage {stage!r} (item {position})")
        return payload

    def drain(self, timeout: float) -> bool:
        """Collect and discard every outstanding chunk; ``False`` (and the executor broken)
        when they did not finish in time.

        Args:
            timeout: most seconds to wait.
        """
        deadline = time.monotonic() + timeout
        while True:
            busy = [s.index for s in self._slots if s.outstanding]
            if not busy:
                return True
            left = deadline - time.monotonic()
            if left <= 0 or self.broken:
                self.broken = self.broken or f"outstanding work did not finish within {timeout} s"
                return False
            for w in self.ready(busy, left):
                self.collect(w)

    def alive(self) -> bool:
        return self.broken is None and not self._stopping

    def shutdown(self) -> None:
        """Stop the threads; wait for them unless one is stuck in the function."""
        hung = self.broken is not None and self.broken != "shut down"
        self.broken = self.broken or "shut down"
        with self._cond:
            self._stopping = True
            self._generation += 1
            self._cond.notify_all()
        if hung:
            return
        me = threading.current_thread()
        for slot in self._slots:
            if slot.thread is not None and slot.thread is not me:
                slot.thread.join()
