"""``map(fn, workers=N, backend="thread")``: apply ``fn`` in ``N`` threads of this process.

For functions that spend their time outside the GIL — JPEG decoding (libjpeg-turbo),
most numpy work, zlib, file and network reads — threads run in parallel without the
cost of processes: no pickling, no copies of the results, no start-up. Pure-Python
functions hold the GIL and should use the default process backend instead.

* Items are pulled from the input in the consumer's thread (for a random-access input,
  the threads read ``input[i]`` themselves) and up to ``buffer_size`` (default
  ``2 * N``) are in flight at once.
* ``ordered=True`` yields results in input order; ``ordered=False`` yields whichever is
  ready first.
* An exception raised by ``fn`` is re-raised in the consumer as the same exception
  object, with its original traceback and a note naming the stage.
* ``timeout=seconds``: an item whose ``fn`` has run longer raises
  :class:`~feedline.exceptions.StageTimeoutError` naming the stage and the item's
  position. A thread cannot be stopped from outside: the stuck call is abandoned (its
  thread ends when ``fn`` returns) and ``close()`` does not wait for it.
* ``close()``, ``break`` followed by garbage collection, or the end of the data cancels
  the pending calls and joins the threads (named ``feedline-<stage>``).
* State: the position of the oldest result not yet yielded and the positions after it
  already yielded (unordered mode); for a stream input also the input's state before
  that oldest item. Resuming recomputes exactly the missing results, so ``fn`` must be
  deterministic for the same item.

``workers="auto"`` uses one thread more than the machine has cores, so that the cores
stay busy while one thread holds the GIL between two GIL-free calls.

>>> import zlib
>>> ds = Dataset.range(6).map(lambda i: zlib.crc32(bytes(i)), workers=2, backend="thread")
>>> ds.to_list() == [zlib.crc32(bytes(i)) for i in range(6)]
True
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, cast

from feedline._internal.notes import add_note
from feedline._internal.validate import non_negative_int
from feedline.dataset.base import BuildContext, Dataset, RandomAccessDataset
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.exceptions import StageTimeoutError, StateError, StateNotSupportedError

__all__ = ["ThreadMapDataset"]


def _read_and_apply(fn: Callable, ds: RandomAccessDataset, index: int) -> Any:
    return fn(ds._getitem(index))


def _timed(started: dict, p: int, call: Callable, *args: Any) -> Any:
    """Run ``call(*args)`` noting in ``started[p]`` when it began (for ``timeout``)."""
    started[p] = time.monotonic()
    return call(*args)


class ThreadMapDataset(Dataset):
    """``fn`` over the parent's items in a pool of threads; see the module docstring.

    >>> ds = Dataset.range(4).map(abs, workers=2, backend="thread")
    >>> type(ds).__name__, ds.to_list()
    ('ThreadMapDataset', [0, 1, 2, 3])
    """

    def __init__(self, parent: Dataset, fn: Callable, *, workers: int | str, ordered: bool,
                 buffer_size: int | None, name: str, timeout: float | None = None) -> None:
        super().__init__()
        self._parents = (parent,)
        self._fn = fn
        # map() passes "auto" or a positive int
        self.workers = (os.cpu_count() or 1) + 1 if workers == "auto" else cast(int, workers)
        self.ordered = bool(ordered)
        self._depth = buffer_size or 2 * self.workers
        self._name = name
        self.timeout = timeout

    @property
    def name(self) -> str:
        return f"{self._name} [{self.workers} threads]"

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        parent = self._parents[0]
        if isinstance(parent, RandomAccessDataset):
            return _ThreadMapIterator(self, None, parent, ctx.epoch)
        return _ThreadMapIterator(self, parent._build(ctx), None, ctx.epoch)


class _ThreadMapIterator(DatasetIterator):
    def __init__(self, owner: ThreadMapDataset, source: DatasetIterator | None,
                 indexed: RandomAccessDataset | None, epoch: int) -> None:
        self._owner = owner
        self._fn = owner._fn
        self._source = source
        self._indexed = indexed
        self._length = len(indexed) if indexed is not None else None
        self._base = epoch * self._length if self._length is not None else 0
        self._executor: ThreadPoolExecutor | None = None
        self._start = 0  # position of the first item of this run (random access: index)
        self._pos = 0  # next position to pull
        self._inflight: dict[int, Future] = {}
        self._order: deque[int] = deque()
        self._states: dict[int, Any] = {}  # stream: input state before each in-flight item
        self._skip: set[int] = set()  # positions already yielded before a restore
        self._yielded: set[int] = set()  # unordered: yielded positions after the oldest
        self._exhausted = False
        self._state_error: StateError | None = None
        self._closed = False
        self._started: dict[int, float] = {}  # position -> when fn began (with a timeout)
        self._hung = False  # a call timed out: never wait for the threads

    # -------------------------------------------------------------- feeding the pool
    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=self._owner.workers,
                thread_name_prefix=f"feedline-{self._owner._name}")
        return self._executor

    def _submit_more(self) -> None:
        pool = self._pool()
        depth = self._owner._depth
        while len(self._inflight) < depth and not self._exhausted:
            p = self._pos
            if self._indexed is not None:
                assert self._length is not None  # set with _indexed
                if p >= self._length:
                    self._exhausted = True
                    break
                self._pos = p + 1
                if p in self._skip:
                    self._skip.discard(p)
                    continue
                fut = self._submit(pool, p, _read_and_apply, self._fn, self._indexed,
                                   self._base + p)
            else:
                assert self._source is not None  # a stream input when not indexed
                if self._state_error is None:
                    try:
                        self._states[p] = self._source.get_state()
                    except StateError as exc:
                        self._state_error = exc
                try:
                    item = next(self._source)
                except StopIteration:
                    self._states.pop(p, None)
                    self._exhausted = True
                    break
                self._pos = p + 1
                if p in self._skip:
                    self._skip.discard(p)
                    self._states.pop(p, None)
                    continue
                fut = self._submit(pool, p, self._fn, item)
            self._inflight[p] = fut
            self._order.append(p)

    def _submit(self, pool: ThreadPoolExecutor, p: int, call: Callable, *args: Any) -> Future:
        if self._owner.timeout is None:
            return pool.submit(call, *args)
        return pool.submit(_timed, self._started, p, call, *args)

    def _await(self, futures: list[Future], positions: list[int]) -> None:
        """Wait until one of ``futures`` is done; with a timeout, raise
        :class:`StageTimeoutError` for a call running longer than it."""
        timeout = self._owner.timeout
        if timeout is None:
            wait(futures, return_when=FIRST_COMPLETED)
            return
        while True:
            now = time.monotonic()
            running = [(self._started[q], q) for q in positions if q in self._started]
            for began, q in sorted(running):
                if now - began > timeout and not self._inflight[q].done():
                    self._hung = True
                    raise StageTimeoutError(self._owner.name, q, timeout)
            first = min((b for b, _ in running), default=now)
            slice_s = max(0.001, min(1.0, first + timeout - now))
            done, _ = wait(futures, timeout=slice_s, return_when=FIRST_COMPLETED)
            if done:
                return

    # -------------------------------------------------------------- consuming
    def __next__(self) -> Any:
        if self._closed:
            raise StopIteration
        self._submit_more()
        if not self._inflight:
            raise StopIteration
        if self._owner.ordered:
            p = self._order[0]
            if not self._inflight[p].done():
                self._await([self._inflight[p]], [p])
            self._order.popleft()
        else:
            ready = [q for q in self._order if self._inflight[q].done()]
            if not ready:
                self._await(list(self._inflight.values()), list(self._order))
                ready = [q for q in self._order if self._inflight[q].done()]
            p = ready[0]
            self._order.remove(p)
        fut = self._inflight.pop(p)
        self._started.pop(p, None)
        try:
            result = fut.result()
        except BaseException as exc:
            add_note(exc, f"raised in a thread of stage {self._owner.name!r} (item {p})")
            raise
        if not self._owner.ordered and self._order and p != self._oldest():
            self._yielded.add(p)
        self._forget_before_oldest()
        self._submit_more()
        return result

    def _oldest(self) -> int:
        """Position of the oldest item not yet yielded (the next to pull when none)."""
        return min(self._order) if self._order else self._pos

    def _forget_before_oldest(self) -> None:
        oldest = self._oldest()
        if self._yielded:
            self._yielded = {q for q in self._yielded if q > oldest}
        if self._states:
            for q in [q for q in self._states if q < oldest]:
                del self._states[q]

    # -------------------------------------------------------------- state
    def get_state(self) -> dict[str, Any]:
        oldest = self._oldest()
        done = sorted(q - oldest for q in self._yielded if q > oldest)
        done += sorted(q - oldest for q in self._skip if q >= oldest)
        if self._indexed is not None:
            state = {"type": "thread_map", "next": oldest, "done": done, "len": self._length}
            world = getattr(self._indexed, "world_size", None)  # an index-mode shard
            if world is not None:
                state["world_size"] = world
            return state
        if self._state_error is not None:
            raise StateNotSupportedError(
                f"{self._owner.name} cannot report its position because its input cannot: "
                f"{self._state_error}") from self._state_error
        assert self._source is not None  # a stream input when not indexed
        parent = self._states[oldest] if oldest in self._states else self._source.get_state()
        return {"type": "thread_map", "parent": parent, "done": done}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "thread_map", ("done",))
        self._drop_inflight()
        done = [non_negative_int("state['done']", d) for d in state["done"]]
        self._exhausted = False
        self._yielded = set()
        if self._indexed is not None:
            check_state(state, "thread_map", ("next", "len"))
            world = getattr(self._indexed, "world_size", None)
            if "world_size" in state and world is not None and state["world_size"] != world:
                raise StateError(
                    f"state of stage {self._owner.name!r} was saved with world_size="
                    f"{state['world_size']}, this run has world_size={world}: a thread map "
                    "right after shard() reads the shard by index and can only resume with the "
                    f"same world size; resume with world_size={state['world_size']}, or let a "
                    "stage iterate the shard first, e.g. .shard(rank, world_size).prefetch(2)"
                    ".map(fn, workers=N, backend='thread')"
                )
            if state["len"] != self._length:
                raise StateError(f"state is for a dataset of {state['len']} items, this one "
                                 f"has {self._length}")
            start = non_negative_int("state['next']", state["next"])
        else:
            check_state(state, "thread_map", ("parent",))
            assert self._source is not None  # a stream input when not indexed
            self._source.set_state(state["parent"])
            self._states = {}
            start = 0
        self._pos = start
        self._skip = {start + d for d in done}

    def _drop_inflight(self) -> None:
        for fut in self._inflight.values():
            fut.cancel()
        self._inflight.clear()
        self._order.clear()
        self._started.clear()

    def buffer_fill(self) -> float:
        """Fraction of the in-flight slots holding finished results (for statistics)."""
        done = sum(1 for f in self._inflight.values() if f.done())
        return done / self._owner._depth

    def close(self) -> None:
        if getattr(self, "_closed", True):
            return
        self._closed = True
        self._drop_inflight()
        executor, self._executor = self._executor, None
        if executor is not None:  # a timed-out call may never return: do not wait for it
            executor.shutdown(wait=not self._hung, cancel_futures=True)
        if self._source is not None:
            self._source.close()
