"""A bounded background thread that runs an iterator ahead of its consumer.

:class:`BackgroundIterator` pulls items from a :class:`DatasetIterator` in a daemon
thread named ``feedline-<stage>`` into a queue of at most ``buffer_size`` items.

* Errors: an exception raised by the source (any ``BaseException`` except the thread's
  own shutdown) is handed to the consumer, which re-raises the *same* exception object
  with its original traceback and a note naming the stage — the consumer never waits
  forever for an item that will not come.
* Shutdown: ``close()`` (also on garbage collection, ``with``, ``break`` then drop) stops
  the thread, joins it, and closes the source. The thread never holds a reference to
  the consumer object, so dropping the consumer is enough to stop it.
* State: together with each item the thread records the source's state *after* that
  item, so ``get_state()`` is the position right after the last item the consumer
  received — never a position that skips buffered items.

>>> from feedline import Dataset
>>> it = BackgroundIterator(Dataset.range(5).iterator(), buffer_size=2, name="demo")
>>> list(it)
[0, 1, 2, 3, 4]
>>> it.close()
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

from feedline._internal.notes import add_note
from feedline.dataset.iterator import DatasetIterator
from feedline.exceptions import StateError

__all__ = ["BackgroundIterator"]

_ITEM, _END, _ERROR = 0, 1, 2
_POLL = 0.1  # seconds between checks of the stop flag while the queue is full
_AUTO_SAMPLES = 16  # items measured before an automatic depth is chosen


def _produce(source: DatasetIterator, q: queue.Queue, stop: threading.Event,
             track_state: bool, produce_times: list | None = None) -> None:
    """Thread body: move items from ``source`` to ``q`` until the end, an error or stop.
    ``produce_times`` (when given) receives the seconds each of the first items took."""
    import time

    def put(msg: tuple) -> bool:
        while not stop.is_set():
            try:
                q.put(msg, timeout=_POLL)
                return True
            except queue.Full:
                continue
        return False

    state_error: StateError | None = None
    try:
        while not stop.is_set():
            t0 = time.perf_counter() if produce_times is not None else 0.0
            try:
                item = next(source)
            except StopIteration:
                put((_END, None, None))
                return
            if produce_times is not None:
                produce_times.append(time.perf_counter() - t0)
                if len(produce_times) >= _AUTO_SAMPLES:
                    produce_times = None
            state = None
            if track_state and state_error is None:
                try:
                    state = source.get_state()
                except StateError as exc:
                    state_error = exc
            if not put((_ITEM, item, state if state_error is None else state_error)):
                return
    except BaseException as exc:  # noqa: BLE001 - every error goes to the consumer
        put((_ERROR, exc, None))


class BackgroundIterator(DatasetIterator):
    """Runs ``source`` in a background thread; see the module docstring.

    The thread starts on the first ``next`` call.

    Args:
        source: the iterator to run ahead; closed by :meth:`close`.
        buffer_size: most items the queue holds (the initial depth under ``auto``).
        name: the stage's name: the thread is ``feedline-<name>`` and the note on a
            re-raised error names it.
        track_state: record the source's state after every item so ``get_state()``
            works; ``False`` saves that cost and makes ``get_state()`` raise
            :class:`~feedline.exceptions.StateError`.
        auto: measure the first items' production and consumption times and then set
            the depth once with
            :func:`~feedline.runtime.autotune.choose_prefetch_depth` (see :attr:`depth`).

    >>> from feedline import Dataset
    >>> it = BackgroundIterator(Dataset.range(5).iterator(), buffer_size=2, name="doc")
    >>> next(it), next(it)
    (0, 1)
    >>> state = it.get_state(); it.close()                 # the thread stops with the iterator
    >>> again = BackgroundIterator(Dataset.range(5).iterator(), buffer_size=2, name="doc")
    >>> again.set_state(state); list(again)
    [2, 3, 4]
    >>> again.close()
    >>> failing = Dataset.range(3).map(lambda x: {0: "a", 1: "b"}[x]).iterator()
    >>> broken = BackgroundIterator(failing, buffer_size=2, name="doc")
    >>> try:                                    # the thread's error reaches the consumer
    ...     list(broken)
    ... except KeyError as e:
    ...     print(repr(e), "/", e.__notes__[-1])
    KeyError(2) / raised in the background thread of stage 'doc'
    >>> broken.close()
    """

    def __init__(self, source: DatasetIterator, *, buffer_size: int, name: str,
                 track_state: bool = True, auto: bool = False) -> None:
        self._source = source
        self._size = buffer_size
        self._auto = auto
        self._produce_times: list[float] | None = [] if auto else None
        self._consume_times: list[float] = []
        self._returned_at = 0.0
        self.auto_measurements: dict | None = None
        self._name = name
        self._track_state = track_state
        self._queue: queue.Queue = queue.Queue(maxsize=buffer_size)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._done = False
        self._closed = False
        self._state: Any = None  # state after the last item handed out, or a StateError
        self._have_state = False
        self.wait_seconds = 0.0

    def _start(self) -> None:
        if not self._have_state and self._track_state:
            try:
                self._state = self._source.get_state()
            except StateError as exc:
                self._state = exc
            self._have_state = True
        self._thread = threading.Thread(
            target=_produce,
            args=(self._source, self._queue, self._stop, self._track_state,
                  self._produce_times),
            name=f"feedline-{self._name}",
            daemon=True,
        )
        self._thread.start()

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        if self._closed:
            raise StopIteration
        if self._thread is None:
            self._start()
        elif self._produce_times is not None:
            self._measure()
        try:
            kind, value, state = self._queue.get_nowait()
        except queue.Empty:
            t0 = time.perf_counter()
            kind, value, state = self._queue.get()
            self.wait_seconds += time.perf_counter() - t0
        if kind == _ITEM:
            self._state = state
            self._have_state = True
            if self._produce_times is not None:
                self._returned_at = time.perf_counter()
            return value
        self._done = True
        self._join()
        if kind == _END:
            raise StopIteration
        add_note(value, f"raised in the background thread of stage {self._name!r}")
        raise value

    def _measure(self) -> None:
        """``auto`` depth: time the consumer between items; once enough items were timed on
        both sides, set the queue's depth with :func:`choose_prefetch_depth`."""
        self._consume_times.append(time.perf_counter() - self._returned_at)
        produced = self._produce_times
        if produced is None or len(produced) < _AUTO_SAMPLES or len(self._consume_times) < 8:
            return
        from feedline.runtime.autotune import choose_prefetch_depth

        consume = sorted(self._consume_times)[len(self._consume_times) // 2]
        depth = choose_prefetch_depth(produce_seconds=list(produced), consume_seconds=consume)
        self.auto_measurements = {"produce_seconds": list(produced), "consume_seconds": consume}
        self._produce_times = None
        with self._queue.not_full:
            self._queue.maxsize = depth
            self._queue.not_full.notify_all()
        self._size = depth

    @property
    def depth(self) -> int:
        """The queue's current depth (changes once under ``auto``)."""
        return self._size

    def get_state(self) -> dict[str, Any]:
        if not self._track_state:
            raise StateError(f"stage {self._name!r} was built without state tracking")
        if not self._have_state:
            return self._source.get_state()
        if isinstance(self._state, StateError):
            raise self._state
        return self._state

    def set_state(self, state: dict[str, Any]) -> None:
        if self._thread is not None:
            raise StateError("set_state must be called before the first item is read")
        self._source.set_state(state)
        self._state = state
        self._have_state = True

    def buffer_fill(self) -> float:
        """Fraction of the buffer holding ready items."""
        return self._queue.qsize() / self._size

    def _join(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            while thread.is_alive():
                try:  # unblock a producer waiting on a full queue
                    while True:
                        self._queue.get_nowait()
                except queue.Empty:
                    pass
                thread.join(timeout=_POLL)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._join()
        self._source.close()
