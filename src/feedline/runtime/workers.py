"""A pool of worker processes that apply one function to chunks of items.

This is the engine behind ``Dataset.map(fn, num_workers=N)``
(:mod:`feedline.dataset.parallel_map`); it knows nothing about datasets beyond "call
``source._getitem(i)``" for random-access inputs.

Processes
    ``N`` processes named ``feedline-<stage>-<k>`` started with ``fork`` by default
    (where the platform has it): start-up costs a few milliseconds, and the function and
    the input dataset are inherited as they are — lambdas and closures work, nothing has
    to be pickled. ``spawn``/``forkserver`` are available for programs that must not
    fork (for example when other threads hold locks a child could need); they start each
    worker in a fresh interpreter (hundreds of milliseconds) and pickle the function and
    dataset, so those must be importable at module level. Workers ignore ``SIGINT`` (the
    consumer handles Ctrl-C and shuts them down), run torch with one thread, and exit by
    themselves within a second when the consumer process is gone (``os.getppid`` check
    while idle; a broken pipe while sending). A worker busy inside the function dies with
    its consumer too: on Linux the kernel sends it ``SIGKILL`` when the consumer exits
    (``prctl(PR_SET_PDEATHSIG)``, set when the pool was created on the main thread, since
    the kernel ties the signal to the creating thread), and everywhere a watchdog thread
    checks ``os.getppid`` every quarter second and ends the worker (``os._exit``) once the
    consumer is gone.

Links
    Each worker has a task channel and a result channel (:class:`~feedline.runtime.shm.Channel`):
    a pipe for small messages plus a ring of shared-memory blocks for array payloads
    (``transport="shm"``), or the pipe alone (``transport="pipe"``). At most
    :attr:`WorkerPool.depth` chunks are outstanding per worker — 3 with shared memory,
    1 over pipes — which is what lets ring blocks be reused without handshakes and keeps
    pipes from ever filling up (no deadlock between a consumer writing a task and a
    worker writing a result).

Cancellation
    A shared control word holds the current *generation*; every task carries the
    generation it was sent in. :meth:`WorkerPool.cancel` bumps it, and workers then skip
    (without calling the function) every item of an older generation still queued, so an
    abandoned iteration leaves at most one item per worker running. The outstanding
    replies are drained before the pool is used again (:meth:`WorkerPool.drain`).

Failures
    An exception in the function is sent back with its formatted traceback (see
    :func:`pack_exception`/:func:`unpack_exception`). A worker that dies without
    replying — ``SIGKILL``, the OOM killer, a segfault in an extension — is seen at once
    through its process sentinel by :meth:`WorkerPool.ready` and reported as
    :class:`~feedline.exceptions.WorkerDiedError` naming the worker, its pid and the signal.

Shutdown
    :meth:`WorkerPool.shutdown` stops idle workers with a message and terminates busy
    ones (``SIGTERM``, then ``SIGKILL`` after a second), joins them and closes every pipe
    and block. It runs on garbage collection and at interpreter exit too. Shared-memory
    blocks are unlinked from ``/dev/shm`` as soon as they are created, so no segment can
    outlive the processes.

>>> pool = WorkerPool(abs, None, workers=2, stage="demo")
>>> gen = pool.new_generation()
>>> pool.submit(0, gen, 0, [0, 1], [-3, 4]); pool.submit(1, gen, 0, [2], [-5])
>>> pool.ready([0], timeout=10)
[0]
>>> positions, entries, _, _ = pool.collect(0)
>>> positions, [value for _, value in entries]
([0, 1], [3, 4])
>>> pool.drain(timeout=10)
True
>>> pool.shutdown()
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import pickle
import select
import signal
import struct
import sys
import tempfile
import threading
import time
import traceback
import warnings
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from feedline._internal.notes import add_note
from feedline.exceptions import (
    PipelineError,
    RemoteTraceback,
    SharedMemoryError,
    WorkerDiedError,
    WorkerError,
)
from feedline.runtime.executor import CANCELLED, END, ERROR, OK, EndOfInput, Executor, run_chunk
from feedline.runtime.shm import (
    Block,
    BufferRecycler,
    Channel,
    FdHandle,
    Ring,
    check_shm_space,
)

__all__ = [
    "START_METHODS",
    "TRANSPORTS",
    "OK",
    "ERROR",
    "CANCELLED",
    "END",
    "EndOfInput",
    "default_start_method",
    "WorkerPool",
    "PoolKeeper",
    "pack_exception",
    "unpack_exception",
]

START_METHODS = ("fork", "spawn", "forkserver")
TRANSPORTS = ("auto", "shm", "pipe")

_TASK, _SEED, _STOP, _CONFIG = 0, 1, 2, 3
_IDLE_CHECK = 1.0  # seconds between parent-liveness checks in an idle worker
_SHM_DEPTH = 3
_PIPE_DEPTH = 1
_RESULT_BLOCK = 1 << 20  # initial size of each result block
_TASK_BLOCK = 1 << 16  # initial size of each task block (items of stream inputs)
_GEN = struct.Struct("<q")
# per-worker progress slots in the control block, after the generation word: the position
# of the item the worker is on and when it began it (CLOCK_MONOTONIC, shared by all
# processes of the machine; 0.0 between items). Read by ``map(..., timeout=)``.
_SLOT = struct.Struct("<qd")
_SLOT_BASE = 64
MAX_TRACKED_WORKERS = (4096 - _SLOT_BASE) // _SLOT.size


def default_start_method() -> str:
    """``$FEEDLINE_START_METHOD`` if set, else ``"fork"`` where available, else ``"spawn"``.

    >>> import os, multiprocessing
    >>> expected = os.environ.get("FEEDLINE_START_METHOD") or (
    ...     "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    >>> default_start_method() == expected
    True
    """
    env = os.environ.get("FEEDLINE_START_METHOD")
    if env:
        if env not in START_METHODS:
            raise ValueError(
                f"FEEDLINE_START_METHOD must be one of {', '.join(START_METHODS)}, got {env!r}"
            )
        return env
    return "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"


def pack_exception(exc: BaseException, *, phase: str, worker: int) -> tuple:
    """What a worker sends back for an exception: the pickled exception when it survives
    a pickle round trip as its own type (else ``None``), its type name and message, the
    formatted traceback, the phase (``"mapping"``/``"reading"``), the worker and its pid.

    Args:
        exc: the exception to send back.
        phase: what the worker was doing: ``"mapping"`` (in the function) or
            ``"reading"`` (in ``source._getitem``).
        worker: the worker's index in its pool.

    >>> try:
    ...     int("x")
    ... except ValueError as e:
    ...     blob, name, message, tb, phase, worker, pid = pack_exception(e, phase="mapping", worker=1)
    >>> name, message, phase, worker, "int(" in tb, blob is not None
    ('builtins.ValueError', "invalid literal for int() with base 10: 'x'", 'mapping', 1, True, True)
    """
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    blob: bytes | None
    try:
        blob = pickle.dumps(exc, pickle.HIGHEST_PROTOCOL)
        if type(pickle.loads(blob)) is not type(exc):
            blob = None
    except Exception:  # noqa: BLE001 - any failure means: send the text only
        blob = None
    name = f"{type(exc).__module__}.{type(exc).__qualname__}"
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001
        message = "<unprintable>"
    return (blob, name, message, tb, phase, worker, os.getpid())


def unpack_exception(payload: tuple, *, stage: str, position: int | None = None) -> BaseException:
    """Rebuild the exception of :func:`pack_exception` in the consumer: the original type
    when it unpickles, else :class:`WorkerError`; ``__cause__`` is a
    :class:`RemoteTraceback` with the worker's traceback, and a note names the stage,
    worker, pid and item position.

    Args:
        payload: the tuple :func:`pack_exception` made.
        stage: the stage's name, for the note.
        position: the item's position, for the note; ``None`` leaves it out.

    >>> try:
    ...     int("x")
    ... except ValueError as e:
    ...     payload = pack_exception(e, phase="mapping", worker=1)
    >>> exc = unpack_exception(payload, stage="map(parse)", position=7)
    >>> type(exc).__name__, "int(\\"x\\")" in exc.__cause__.tb
    ('ValueError', True)
    >>> exc.__notes__[-1].startswith("raised in worker 1")
    True
    """
    blob, name, message, tb, phase, worker, pid = payload
    exc: BaseException | None = None
    if blob is not None:
        try:
            exc = pickle.loads(blob)
        except Exception:  # noqa: BLE001
            exc = None
    if exc is None:
        exc = WorkerError(f"{name}: {message}")
    exc.__cause__ = RemoteTraceback(tb)
    where = "" if position is None else f" item {position}"
    add_note(exc, f"raised in worker {worker} (pid {pid}) of stage {stage!r} while {phase}{where}")
    return exc


@dataclass
class WorkerSpec:
    """What every worker of a pool runs: ``fn`` over items, or over
    ``source._getitem(index)`` when ``source`` is a random-access dataset."""

    fn: Callable[[Any], Any]
    source: Any
    stage: str
    parent_pid: int
    # the worker may start processes of its own (a pipeline run in it has worker stages)
    nested: bool = False
    nice: int = 0  # added to the worker's niceness (its own children inherit it)
    # set per process by _start_one: started from the main thread (the kernel ties the
    # parent-death signal to the creating thread), and whether through a fork server
    pdeathsig: bool = False
    via_server: bool = False


# ---------------------------------------------------------------------------- worker side
def _worker_main(
    spec: WorkerSpec,
    index: int,
    task_conn: Any,
    result_conn: Any,
    task_ring: list | None,
    result_ring: list | None,
    control: FdHandle,
    close_first: Sequence[Any],
) -> None:
    """Body of a worker process: read tasks, map, reply; see the module docstring."""
    for conn in close_first:  # the consumer's ends, inherited through fork
        conn.close()
    _die_with_parent(spec)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if spec.nice:
        os.nice(spec.nice)
    if spec.nested:
        # multiprocessing refuses children to a daemonic process; this one ends its own
        # (their parent-death signal and watchdog) when it ends, so lift the refusal
        multiprocessing.current_process()._config["daemon"] = False  # type: ignore[attr-defined]
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "set_num_threads"):
        torch.set_num_threads(1)
    rx = Channel(task_conn, None if task_ring is None else Ring.from_fds(task_ring),
                 BufferRecycler())
    tx = Channel(result_conn, None if result_ring is None else Ring.from_fds(result_ring))
    ctl = Block(control.fd, 4096)
    fn, source = spec.fn, spec.source
    seed_key: tuple[int, int, bool] | None = None
    try:
        while True:
            if not rx.poll(_IDLE_CHECK):
                if os.getppid() != spec.parent_pid:
                    return
                continue
            msg = rx.recv()
            kind = msg[0]
            if kind == _STOP:
                return
            if kind == _SEED:
                seed_key = msg[1]
                continue
            if kind == _CONFIG:
                source._configure(msg[1])
                continue
            _, gen, base, positions, items = msg
            view = ctl.view
            slot = _SLOT_BASE + _SLOT.size * index if index < MAX_TRACKED_WORKERS else -1

            def mark(pos: int, since: float, view: Any = view, slot: int = slot) -> None:
                _SLOT.pack_into(view, slot, pos, since)

            def cancelled(view: Any = view, gen: int = gen) -> bool:
                return bool(_GEN.unpack_from(view, 0)[0] != gen)

            t0 = time.perf_counter()
            out = run_chunk(
                fn, source, seed_key, base, positions, items,
                pack_error=lambda exc, phase: pack_exception(exc, phase=phase, worker=index),
                cancelled=cancelled,
                mark=mark if slot >= 0 else None)
            busy = time.perf_counter() - t0
            del items
            _reply(tx, out, busy, index)
            del out
    except (EOFError, BrokenPipeError, ConnectionResetError):
        return


_PR_SET_PDEATHSIG = 1
_WATCHDOG_PERIOD = 0.25


def _die_with_parent(spec: WorkerSpec) -> None:
    """Make this worker end when its consumer process ends, even while it is busy inside
    user code (see "Processes" in the module docstring). Under ``forkserver`` the parent
    is the fork server, which exits with the consumer."""
    if spec.pdeathsig and sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # no prctl: the watchdog below still works
            pass
    parent_pid = os.getppid() if spec.via_server else spec.parent_pid
    if os.getppid() != parent_pid:  # the consumer died before the signal was armed
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(_WATCHDOG_PERIOD)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, name="feedline-parent-watchdog", daemon=True).start()


_PACK_MAX_BYTES = 1 << 16  # arrays up to this size are stacked per chunk (see pack_entries)


def pack_entries(entries: list) -> Any:
    """A chunk's reply entries in a cheaper form to send, when they allow it; else
    ``entries`` itself. :func:`unpack_entries` gives back an equal list.

    When every entry is ``(OK, value)``, every value is a plain ``tuple`` of the same
    length (or every value a numpy array) and some columns hold plain, non-object numpy
    arrays of one dtype and shape (at most 64 KiB each), those columns travel stacked,
    one array per column: unpickling ``n`` small arrays one by one costs the consumer
    far more than one stacked array split into rows. Each value the consumer gets back
    is then a row of that stacked array: a writable array of the same dtype, shape and
    contents (a view, so it keeps the chunk's column alive).

    >>> import numpy as np
    >>> entries = [(OK, (np.full(3, i, np.float32), i)) for i in range(4)]
    >>> packed = pack_entries(entries)
    >>> type(packed).__name__, packed[1]
    ('tuple', 4)
    >>> back = unpack_entries(packed)
    >>> [(s, v[0].tolist(), v[1]) for s, v in back][1], back[2][1][0].flags.writeable
    ((0, [1.0, 1.0, 1.0], 1), True)
    >>> pack_entries([(OK, "a"), (OK, "b")]) == [(OK, "a"), (OK, "b")]   # nothing to stack
    True
    """
    n = len(entries)
    if n < 2:
        return entries
    first = entries[0][1]
    if type(first) is tuple:
        width = len(first)
        cols = [j for j in range(width) if _stackable(first[j])]
        if not cols:
            return entries
        for status, value in entries:
            if status != OK or type(value) is not tuple or len(value) != width:
                return entries
        values = [value for _, value in entries]
        stacked = {}
        for j in cols:
            column = [value[j] for value in values]
            if not _same_arrays(column):
                return entries
            stacked[j] = _stack(column)
        rest = {j: [value[j] for value in values] for j in range(width) if j not in stacked}
        return ("stacked", n, width, stacked, rest)
    if _stackable(first):
        column = []
        for status, value in entries:
            if status != OK:
                return entries
            column.append(value)
        if not _same_arrays(column):
            return entries
        return ("stacked", n, None, {0: _stack(column)}, None)
    return entries


def _stackable(x: Any) -> bool:
    return type(x) is np.ndarray and not x.dtype.hasobject and x.nbytes <= _PACK_MAX_BYTES


def _same_arrays(column: list) -> bool:
    a = column[0]
    dtype, shape = a.dtype, a.shape
    for x in column:
        if type(x) is not np.ndarray or (x.dtype is not dtype and x.dtype != dtype) or (
                x.shape != shape):
            return False
    return True


def _stack(column: list) -> np.ndarray:
    """``np.stack(column)`` for arrays of one dtype and shape, without its per-array
    reshaping: one ``concatenate`` of the arrays, reshaped."""
    first = column[0]
    if first.ndim == 0:
        return np.stack(column)
    return np.concatenate(column).reshape((len(column), *first.shape))


def unpack_entries(packed: Any) -> list:
    """The entries :func:`pack_entries` packed (a list is returned as it is)."""
    if type(packed) is not tuple:
        return packed
    _, n, width, stacked, rest = packed
    if width is None:
        return [(OK, row) for row in stacked[0]]
    columns = [list(stacked[j]) if j in stacked else rest[j] for j in range(width)]
    return [(OK, value) for value in zip(*columns)]


def _reply(tx: Channel, out: list, busy: float, index: int) -> None:
    try:
        tx.send((pack_entries(out), busy))
        return
    except SharedMemoryError as exc:
        err = pack_exception(exc, phase="sending the result of", worker=index)
        out = [(ERROR, err) if status == OK else (status, v) for status, v in out]
    except Exception:  # noqa: BLE001 - find the entries that do not pickle
        fixed = []
        for status, value in out:
            try:
                pickle.dumps(value, 5, buffer_callback=lambda b: False)
                fixed.append((status, value))
            except Exception as exc:  # noqa: BLE001
                try:
                    raise TypeError(
                        f"the result {type(value).__name__} cannot be sent back from the worker "
                        f"process: {exc}"
                    ) from exc
                except TypeError as wrapped:
                    fixed.append((ERROR, pack_exception(wrapped, phase="sending the result of",
                                                        worker=index)))
        out = fixed
    tx.send((out, busy))


# ---------------------------------------------------------------------------- consumer side
class _Link:
    """The consumer's end of one worker."""

    __slots__ = ("index", "process", "pid", "tx", "rx", "outstanding")

    def __init__(self, index: int, process: Any, tx: Channel, rx: Channel) -> None:
        self.index = index
        self.process = process
        self.pid = process.pid
        self.tx = tx
        self.rx = rx
        self.outstanding: deque[list[int]] = deque()


def _shutdown_links(links: list[_Link], control: list[Block], owner: int) -> None:
    """Stop, join and release every worker; safe to call more than once. In a process
    forked from the pool's owner (``owner`` is its pid) the workers are not this
    process's children: the copy is only dropped."""
    if os.getpid() != owner:
        links.clear()
        control.clear()
        return
    for link in links:
        if not link.outstanding and link.process.is_alive():
            try:
                link.tx.send((_STOP,))
            except Exception:  # noqa: BLE001 - it is going anyway
                pass
    deadline = time.monotonic() + 1.0
    for link in links:
        if link.outstanding:
            _terminate(link.process)
        link.process.join(max(0.0, deadline - time.monotonic()))
    for link in links:
        if link.process.is_alive():
            _terminate(link.process)
    for link in links:
        p = link.process
        p.join(1.0)
        if p.is_alive():
            p.kill()
            p.join()
        for ch in (link.tx, link.rx):
            try:
                ch.close()
            except OSError:
                pass
        try:
            p.close()
        except ValueError:
            pass
    links.clear()
    for block in control:
        block.close()
    control.clear()


def _terminate(process: Any) -> None:
    try:
        process.terminate()
    except (OSError, ValueError, AttributeError):
        pass


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "stopped responding"
    if code < 0:
        try:
            sig = signal.Signals(-code).name
        except ValueError:
            sig = f"signal {-code}"
        hint = ""
        if -code == signal.SIGKILL:
            hint = " (SIGKILL: the out-of-memory killer or `kill -9`; check `dmesg` and the worker's memory use)"
        elif -code == signal.SIGBUS:
            hint = " (SIGBUS: often a full /dev/shm)"
        return f"was killed by signal {-code} ({sig}){hint}"
    return f"exited with code {code} without reporting (sys.exit or os._exit in the function?)"


class WorkerPool:
    """``workers`` processes applying ``fn``; see the module docstring.

    A process forked from the one that made the pool sees it as not :meth:`alive` and
    never stops, signals or cancels its workers.

    Args:
        fn: the function the workers apply to each item.
        source: a random-access dataset (workers call ``source._getitem(base + pos)``) or
            ``None`` (tasks carry the items); a source may also take :meth:`configure`
            messages (``source._configure(payload)``, which must not raise) and end its
            data with :class:`EndOfInput`.
        workers: how many worker processes to start.
        stage: the stage's name, in process names and error messages.
        start_method: ``"fork"``, ``"spawn"`` or ``"forkserver"``; ``None`` uses
            :func:`default_start_method`. Another value raises ``ValueError``; with
            ``spawn``/``forkserver``, a function or source that does not pickle raises
            ``TypeError``.
        transport: ``"shm"``, ``"pipe"`` or ``"auto"`` (shared memory; pipes with a
            :class:`RuntimeWarning` when ``/dev/shm`` is missing or has less free space
            than the initial ring needs); another value raises ``ValueError``, and
            ``"shm"`` without room raises :class:`~feedline.exceptions.SharedMemoryError`.
        result_block: the initial size in bytes of each result block; blocks grow on demand.
        depth: chunks outstanding per worker over shared memory (values below 1 count as
            1); always 1 over pipes.
        nested: workers may start processes of their own.
        nice: added to the workers' niceness (lower CPU priority; their own children
            inherit it).

    Raises:
        PipelineError: when this process is itself a daemonic worker (for example a
            DataLoader worker), which may not have children.

    >>> pool = WorkerPool(len, None, workers=1, stage="doc", transport="pipe")
    >>> gen = pool.new_generation()
    >>> pool.submit(0, gen, 0, [0, 1], ["ab", "cde"])
    >>> pool.ready([0], timeout=10), pool.size, len(pool.pids)
    ([0], 1, 1)
    >>> positions, entries, _, _ = pool.collect(0)
    >>> positions, [value for _, value in entries]
    ([0, 1], [2, 3])
    >>> pool.shutdown()
    """

    keep_when_idle = True  # kept by the stage between iterations (PoolKeeper)

    def __init__(
        self,
        fn: Callable[[Any], Any],
        source: Any,
        *,
        workers: int,
        stage: str = "map",
        start_method: str | None = None,
        transport: str = "auto",
        result_block: int = _RESULT_BLOCK,
        depth: int = _SHM_DEPTH,
        nested: bool = False,
        nice: int = 0,
    ) -> None:
        self.stage = stage
        self.start_method = start_method or default_start_method()
        if self.start_method not in START_METHODS:
            raise ValueError(
                f"`start_method` must be one of {', '.join(map(repr, START_METHODS))}, "
                f"got {self.start_method!r}"
            )
        if transport not in TRANSPORTS:
            raise ValueError(
                f"`transport` must be one of {', '.join(map(repr, TRANSPORTS))}, got {transport!r}"
            )
        if multiprocessing.current_process().daemon:
            raise PipelineError(
                f"stage {stage!r} cannot start worker processes: this process is itself a "
                f"daemonic worker ({multiprocessing.current_process().name}, for example a "
                "DataLoader worker), which may not have children; give the DataLoader "
                "num_workers=0, or run the stage's work in threads (map(..., backend='thread'))"
            )
        self._ctx = multiprocessing.get_context(self.start_method)
        self._spec = WorkerSpec(fn, source, stage, os.getpid(), nested=nested, nice=nice)
        if self.start_method != "fork":
            try:
                pickle.dumps(self._spec)
            except Exception as exc:
                what = "function and dataset" if source is not None else "function"
                raise TypeError(
                    f"start_method={self.start_method!r} pickles the {what} of stage {stage!r} "
                    f"into each worker, which failed: {exc}; define the function at module "
                    "level or use start_method='fork'"
                ) from exc
        self._result_block = result_block
        self._stream = source is None
        self._shm_depth = max(1, int(depth))
        self.transport = self._choose_transport(transport, workers)
        self.depth = self._shm_depth if self.transport == "shm" else _PIPE_DEPTH
        self.broken: str | None = None
        self._links: list[_Link] = []
        self._control: list[Block] = [Block.create(4096) if self.transport == "shm" else _anon_control()]
        self._generation = 0
        self._lock = threading.Lock()
        self._recycler = BufferRecycler() if self.transport == "shm" else None
        self._finalizer = weakref.finalize(self, _shutdown_links, self._links, self._control,
                                           os.getpid())
        # one poll object over every worker's result pipe and process sentinel, kept for
        # the pool's life: waiting costs one system call, not a selector per wait
        self._poller = select.poll()
        self._fd_owner: dict[int, tuple[int, bool]] = {}  # fd -> (worker, is_sentinel)
        try:
            self.add_workers(workers)
        except BaseException:
            self.shutdown()
            raise

    # ------------------------------------------------------------------ set-up
    def _ring_bytes(self, workers: int) -> int:
        per = self._shm_depth * self._result_block
        if self._stream:
            per += (self._shm_depth + 1) * _TASK_BLOCK
        return workers * per

    def _choose_transport(self, transport: str, workers: int) -> str:
        if transport == "pipe":
            return "pipe"
        try:
            check_shm_space(self._ring_bytes(workers), what=f"the shared-memory ring of {workers} "
                            f"worker(s) of stage {self.stage!r}")
        except SharedMemoryError as exc:
            if transport == "shm":
                raise
            warnings.warn(f"{exc}; falling back to pickling results through pipes",
                          RuntimeWarning, stacklevel=4)
            return "pipe"
        return "shm"

    def add_workers(self, count: int) -> None:
        """Start ``count`` more workers (numbered after the existing ones).

        Args:
            count: how many workers to start.
        """
        for _ in range(count):
            link = self._start_one(len(self._links))
            self._links.append(link)
            for fd, is_sentinel in ((link.rx.fileno(), False), (link.process.sentinel, True)):
                self._poller.register(fd, select.POLLIN)
                self._fd_owner[fd] = (link.index, is_sentinel)

    def _start_one(self, index: int) -> _Link:
        ctx = self._ctx
        task_r, task_w = ctx.Pipe(duplex=False)
        result_r, result_w = ctx.Pipe(duplex=False)
        task_ring = result_ring = None
        try:
            if self.transport == "shm":
                task_ring = Ring.create(self.depth + 1, _TASK_BLOCK if self._stream else 4096)
                result_ring = Ring.create(self.depth, self._result_block)
            fork = self.start_method == "fork"
            spec = dataclasses.replace(
                self._spec,
                pdeathsig=threading.current_thread() is threading.main_thread(),
                via_server=self.start_method == "forkserver",
            )
            process = ctx.Process(  # type: ignore[attr-defined]  # stubs: BaseContext lacks it
                target=_worker_main,
                args=(
                    spec, index, task_r, result_w,
                    None if task_ring is None else task_ring.fd_handles(),
                    None if result_ring is None else result_ring.fd_handles(),
                    FdHandle(self._control[0].fd),
                    (task_w, result_r) if fork else (),
                ),
                name=f"feedline-{self.stage}-{index}",
                daemon=True,
            )
            process.start()
        except BaseException:
            for obj in (task_ring, result_ring):
                if obj is not None:
                    obj.close()
            for c in (task_r, task_w, result_r, result_w):
                c.close()
            raise
        task_r.close()
        result_w.close()
        return _Link(index, process, Channel(task_w, task_ring),
                     Channel(result_r, result_ring, self._recycler))

    # ------------------------------------------------------------------ use
    @property
    def size(self) -> int:
        """Number of workers."""
        return len(self._links)

    @property
    def pids(self) -> list[int]:
        return [link.pid for link in self._links]

    def outstanding(self, worker: int) -> deque[list[int]]:
        """Positions of the chunks sent to ``worker`` and not yet collected, oldest first.

        Args:
            worker: the worker's index.
        """
        return self._links[worker].outstanding

    def new_generation(self) -> int:
        """Start a new generation (cancelling queued items of older ones) and return it.
        In a process that did not make the pool (a copy inherited through ``fork``) it
        changes nothing: the control word is shared with the owner's workers."""
        with self._lock:
            if self._spec.parent_pid != os.getpid():
                return self._generation
            self._generation += 1
            _GEN.pack_into(self._control[0].view, 0, self._generation)
            return self._generation

    cancel = new_generation

    def progress(self, worker: int) -> tuple[int, float] | None:
        """``(position, started)`` of the item ``worker`` is on (``started`` in
        ``time.monotonic()`` seconds), or ``None`` between items, when untracked (index
        ``>= MAX_TRACKED_WORKERS``) or once the pool is broken.

        Args:
            worker: the worker's index.
        """
        if worker >= MAX_TRACKED_WORKERS or self.broken:
            return None
        pos, started = _SLOT.unpack_from(self._control[0].view, _SLOT_BASE + _SLOT.size * worker)
        return None if started == 0.0 else (pos, started)

    def reseed(self, worker: int, seed: tuple[int, int, bool] | None) -> None:
        """Make ``worker`` seed each item of its next tasks from ``(seed, epoch, position)``
        (see :func:`~feedline.runtime.executor.run_chunk`).

        Args:
            worker: the worker's index.
            seed: ``(seed, epoch, exact)``, or ``None`` for no per-item seeding.
        """
        self._send(worker, (_SEED, seed))

    def error(self, payload: tuple, *, stage: str, position: int) -> BaseException:
        """The exception an ``ERROR`` entry's payload stands for (:func:`unpack_exception`).

        Args:
            payload: the packed exception from the worker.
            stage: the stage's name, for the note.
            position: the item's position, for the note.
        """
        return unpack_exception(payload, stage=stage, position=position)

    def configure(self, worker: int, payload: Any) -> None:
        """Make ``worker`` call ``source._configure(payload)`` before its next task.

        Args:
            worker: the worker's index.
            payload: passed to ``source._configure``; must pickle.
        """
        self._send(worker, (_CONFIG, payload))

    def submit(self, worker: int, generation: int, base: int, positions: list[int],
               items: list | None) -> None:
        """Queue a chunk: ``fn`` of ``items`` (or of ``source._getitem(base + p)``).
        ``PipelineError`` when the worker already has ``depth`` chunks outstanding,
        :class:`WorkerDiedError` when it is gone.

        Args:
            worker: the worker's index.
            generation: the chunk's generation; items still queued when a newer one
                starts are answered ``(CANCELLED, None)`` without calling ``fn``.
            base: added to each position to read ``source._getitem(base + position)``.
            positions: the items' positions.
            items: the items, one per position (they must pickle), or ``None`` to read
                them from ``source``.
        """
        link = self._links[worker]
        if len(link.outstanding) >= self.depth:
            raise PipelineError(f"worker {worker} already has {self.depth} chunks outstanding")
        self._send(worker, (_TASK, generation, base, positions, items))
        link.outstanding.append(positions)

    def _send(self, worker: int, msg: tuple) -> None:
        link = self._links[worker]
        try:
            link.tx.send(msg)
        except (BrokenPipeError, ConnectionResetError):
            raise self._died(worker) from None
        except (SharedMemoryError, pickle.PicklingError, TypeError, AttributeError):
            raise
        except BaseException:
            self.broken = "interrupted while sending a task"
            raise

    def ready(self, workers: Sequence[int], timeout: float | None) -> list[int]:
        """Wait up to ``timeout`` seconds until some of ``workers`` have a reply; return
        those that do. A worker that died without replying raises
        :class:`WorkerDiedError` at once; a broken pool raises ``PipelineError``.

        Args:
            workers: the worker indices to wait on.
            timeout: most seconds to wait (``None``: no limit); ``[]`` when it passed.
        """
        if self.broken:
            raise PipelineError(f"the workers of stage {self.stage!r} are unusable: {self.broken}")
        wanted = set(workers)
        events = self._poller.poll(None if timeout is None else max(0, int(timeout * 1000)))
        got: list[int] = []
        dead: list[int] = []
        for fd, _mask in events:
            owner = self._fd_owner.get(fd)
            if owner is None:
                continue
            w, is_sentinel = owner
            if is_sentinel:
                dead.append(w)
            elif w in wanted and w not in got:
                got.append(w)
        for w in dead:
            # a worker that died: an error now unless a reply it sent is waiting to be
            # read (collecting it reports the death next); an idle one is an error too
            if w not in got and (w not in wanted or not self._links[w].rx.poll(0)):
                raise self._died(w)
        return got

    def collect(self, worker: int) -> tuple[list[int], list, float, int]:
        """Read ``worker``'s oldest reply: (positions, entries, busy seconds, bytes).

        Args:
            worker: a worker :meth:`ready` returned; one that died raises
                :class:`WorkerDiedError`.
        """
        link = self._links[worker]
        try:
            entries, busy = link.rx.recv()
            entries = unpack_entries(entries)
        except (EOFError, ConnectionResetError, BrokenPipeError):
            raise self._died(worker) from None
        except BaseException:
            self.broken = "interrupted while receiving a result"
            raise
        return link.outstanding.popleft(), entries, busy, link.rx.last_nbytes

    def _died(self, worker: int) -> WorkerDiedError:
        link = self._links[worker]
        link.process.join(1.0)
        code = link.process.exitcode
        self.broken = f"worker {worker} (pid {link.pid}) {_describe_exit(code)}"
        return WorkerDiedError(
            f"worker {worker} (pid {link.pid}) of stage {self.stage!r} {_describe_exit(code)}"
        )

    def alive(self) -> bool:
        """Whether the pool is usable: not broken, made by this process (not inherited
        through ``fork``) and every worker running."""
        return (self.broken is None and self._spec.parent_pid == os.getpid()
                and all(link.process.is_alive() for link in self._links))

    def drain(self, timeout: float) -> bool:
        """Collect and discard every outstanding reply (after :meth:`cancel`); ``False`` if
        it took longer than ``timeout`` seconds or a worker died (the pool is then broken).

        Args:
            timeout: most seconds to spend.
        """
        deadline = time.monotonic() + timeout
        try:
            while True:
                busy = [link.index for link in self._links if link.outstanding]
                if not busy:
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    self.broken = f"outstanding work did not finish within {timeout} s"
                    return False
                for w in self.ready(busy, left):
                    self.collect(w)
        except (PipelineError, OSError):
            self.broken = self.broken or "a worker failed while draining"
            return False

    def shutdown(self) -> None:
        """Stop every worker and release pipes and shared memory (idempotent)."""
        self.broken = self.broken or "shut down"
        self._finalizer()


P = TypeVar("P", bound=Executor)  # the kind of executor a keeper holds


class PoolKeeper(Generic[P]):
    """Keeps a stage's idle :class:`WorkerPool` between iterations and lends pools to
    iterators, one at a time: a second, concurrent iterator gets a pool of its own, shut
    down when it is handed back. What an iterator hands back with its pool (``extra``)
    is given to the next one with it.

    >>> keeper = PoolKeeper()
    >>> pool = keeper.lend(None, lambda: WorkerPool(abs, None, workers=1, stage="doc"))
    >>> len(keeper.pids())
    1
    >>> keeper.release(pool, extra="kept"); keeper.take_idle() == (pool, "kept")
    True
    >>> keeper.release(keeper.lend(pool, lambda: None)); keeper.close(); keeper.pids()
    []
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: P | None = None
        self._extra: Any = None
        self._leased: set[P] = set()
        self._orphaned = False

    def __getstate__(self) -> dict[str, Any]:
        # a keeper travels empty (to a Ray actor, a spawned process): its pools, lock and
        # lenders belong to the process that made them
        state = self.__dict__.copy()
        state.update(_idle=None, _extra=None, _leased=set(), _orphaned=False)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def take_idle(self) -> tuple[P | None, Any]:
        """The idle pool (``None`` when there is none) and what was handed back with it."""
        with self._lock:
            pool, self._idle = self._idle, None
            extra, self._extra = self._extra, None
        return pool, extra

    def lend(self, pool: P | None, make: Callable[[], P], *,
             fits: bool = True, drain_timeout: float = 3.0) -> P:
        """``pool`` (from :meth:`take_idle`) when it is usable — alive, ``fits``, and its
        outstanding work drained within ``drain_timeout`` seconds — else a new pool from
        ``make()`` (the old one is shut down); either way recorded as lent.

        Args:
            pool: the idle pool to reuse, or ``None``.
            make: makes a new pool when ``pool`` cannot be reused.
            fits: whether ``pool`` suits the borrower (``False`` always makes a new one).
            drain_timeout: seconds ``pool``'s outstanding work may take to drain.
        """
        if pool is not None and not (pool.alive() and fits and pool.drain(drain_timeout)
                                     and pool.alive()):
            pool.shutdown()
            pool = None
        if pool is None:
            pool = make()
        return self.lend_as_is(pool)

    def lend_as_is(self, pool: P) -> P:
        """Record ``pool`` as lent without checking or draining it (its outstanding work
        is the borrower's).

        Args:
            pool: the pool to record.
        """
        with self._lock:
            self._leased.add(pool)
        return pool

    def release(self, pool: P, extra: Any = None) -> None:
        """Take ``pool`` back: kept idle (with ``extra``) unless another is, it is broken
        or the stage is gone; else shut down.

        Args:
            pool: the pool handed back.
            extra: what the next borrower gets with it (:meth:`take_idle`).
        """
        with self._lock:
            self._leased.discard(pool)
            keep = (not self._orphaned and self._idle is None and pool.broken is None
                    and getattr(pool, "keep_when_idle", True))
            if keep:
                self._idle, self._extra = pool, extra
        if not keep:
            pool.shutdown()

    def pids(self) -> list[int]:
        """Process ids of the workers of every pool kept or lent."""
        with self._lock:
            pools = [p for p in (self._idle, *self._leased) if p is not None]
        return [pid for p in pools if p.broken is None for pid in p.pids]

    def orphan(self) -> None:
        """The stage is gone: stop the idle pool; pools in use stop when handed back."""
        with self._lock:
            self._orphaned = True
            pool, self._idle, self._extra = self._idle, None, None
        if pool is not None:
            pool.shutdown()

    def close(self) -> None:
        """Shut every pool down now, those lent included."""
        with self._lock:
            pools = [p for p in (self._idle, *self._leased) if p is not None]
            self._idle = self._extra = None
        for pool in pools:
            pool.shutdown()


def _anon_control() -> Block:
    """The control word for pipe transport: a block in /dev/shm when there is one, else an
    unlinked temporary file (both can be inherited or passed to spawned workers)."""
    try:
        return Block.create(4096)
    except (SharedMemoryError, OSError):
        with tempfile.TemporaryFile() as f:
            fd = os.dup(f.fileno())
        os.ftruncate(fd, 4096)
        return Block(fd, 4096)
