"""Data-parallel training on ``torch.distributed``: launching, splitting, reducing.

Two ways to run a job on several processes (gloo on the CPU, NCCL on GPUs):

* **torchrun**: ``torchrun --nproc-per-node 2 train.py``; inside, :func:`init_from_env`
  (called by the trainer) joins the process group described by ``RANK``,
  ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``;
* **spawn**: :func:`launch` starts ``nprocs`` processes on this machine, each joining a
  group on ``127.0.0.1``, runs ``fn(*args)`` in each and returns rank 0's result;
  :class:`RankPool` keeps such processes, each holding an object whose methods it runs
  on every rank at once. ``RunnerBuilder(device_count=n)`` (its ``build()`` and
  ``run(...)``) and ``Trainer.train(device_count=n)`` use it. Everything passed must
  pickle (module-level functions, not lambdas).

Inside the group, the model is wrapped in ``DistributedDataParallel`` (gradients are
averaged across ranks after every backward pass), each rank reads its own part of the
data (:func:`split_dataset`) with the *same number of batches* on every rank — a rank
that runs out early would leave the others waiting forever in the gradient all-reduce —
and metrics are summed across ranks (:func:`all_reduce_sum`) so that every rank reports
the global value.

With a strided split and a per-rank batch size ``B``, batch ``j`` of the ``W`` ranks
together is exactly batch ``j`` of a single process with batch size ``W * B``; since
every rank's cost is its batch mean and DDP averages the gradients, training matches
the single-process run on the global batch up to floating-point rounding.

>>> from feedline import Dataset
>>> ds = Dataset.range(10)
>>> [split_dataset(ds, r, 3).to_list() for r in range(3)]          # strided, padded
[[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]
>>> [split_dataset(ds, r, 3, mode="contiguous", remainder="drop").to_list() for r in range(3)]
[[0, 1, 2], [3, 4, 5], [6, 7, 8]]
"""

from __future__ import annotations

import atexit
import collections
import gc
import logging
import math
import os
import pickle
import socket
import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist

from feedline._internal.validate import non_negative_int, one_of, positive_int
from feedline.dataset.base import Dataset, RandomAccessDataset

__all__ = [
    "default_backend",
    "init_from_env",
    "is_distributed",
    "rank_and_world_size",
    "local_rank",
    "wrap_ddp",
    "all_reduce_sum",
    "split_dataset",
    "RankSplitDataset",
    "launch",
    "free_port",
    "leave_group",
    "RankPool",
]

logger = logging.getLogger(__name__)

# The tensors of the last collectives, kept alive from Python: gloo's worker thread drops
# its reference to a finished collective a moment after the caller has seen it finish; if
# that reference were the last one, the thread would need the GIL to free the tensor —
# which it cannot get once the interpreter shuts down (see leave_group).
_RECENT_TENSORS: collections.deque = collections.deque(maxlen=8)


def default_backend() -> str:
    """``"nccl"`` when CUDA is available, else ``"gloo"``.

    >>> import torch
    >>> default_backend() == ("nccl" if torch.cuda.is_available() else "gloo")
    True
    """
    return "nccl" if torch.cuda.is_available() else "gloo"


def is_distributed() -> bool:
    """True inside an initialized process group of more than one process.

    >>> is_distributed()                     # no process group in this process
    False
    """
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank_and_world_size() -> tuple[int, int]:
    """``(rank, world_size)`` of the initialized process group, else ``(0, 1)``.

    >>> rank_and_world_size()
    (0, 1)
    """
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def local_rank() -> int:
    """This process's rank on its machine (``LOCAL_RANK``, set by torchrun), else 0.

    >>> import os
    >>> local_rank() == int(os.environ.get("LOCAL_RANK", 0))
    True
    """
    try:
        return int(os.environ.get("LOCAL_RANK", "0"))
    except ValueError:
        return 0


def init_from_env(backend: str | None = None) -> bool:
    """Join the process group that torchrun's environment describes.

    Args:
        backend: the ``torch.distributed`` backend; ``None``: :func:`default_backend`.
            With ``"nccl"`` this process's CUDA device is set to ``LOCAL_RANK`` (modulo
            the device count) first.

    Returns True when a group is initialized afterwards (already, or now because
    ``WORLD_SIZE`` > 1), False for a single-process job. A group this function creates
    is destroyed at interpreter exit (unless the program destroyed it first): a gloo
    group left alive can abort the process while it shuts down.

    >>> import os
    >>> os.environ.get("WORLD_SIZE", "1") == "1" and init_from_env()   # a single-process job
    False
    """
    if not dist.is_available():
        return False
    if dist.is_initialized():
        return True
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        raise ValueError(f"WORLD_SIZE must be an int, got {os.environ['WORLD_SIZE']!r}") from None
    if world <= 1:
        return False
    backend = backend or default_backend()
    if backend == "nccl":
        torch.cuda.set_device(local_rank() % torch.cuda.device_count())
    dist.init_process_group(backend=backend, init_method="env://")
    atexit.register(leave_group)
    return True


def _gloo_threads() -> int:
    """How many of gloo's worker threads (``pt_gloo_runloop``) this process runs (Linux)."""
    try:
        names = os.listdir("/proc/self/task")
    except OSError:
        return 0
    count = 0
    for tid in names:
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                count += f.read().strip() == "pt_gloo_runloop"
        except OSError:
            pass
    return count


def leave_group() -> None:
    """Destroy the default process group while the interpreter is whole.

    ``dist.destroy_process_group()`` only unregisters the group: the C++ process group,
    and with gloo its worker and TCP threads, lives on while anything still refers to it
    — a runner context in a reference cycle that still holds the
    ``DistributedDataParallel`` wrapper, for instance. Such a group is torn down while the
    interpreter shuts down, when a gloo thread that still has to release a tensor gets
    no GIL: the thread is unwound and the process aborts ("terminate called without an
    active exception", SIGABRT), more often on a busy machine. So garbage is collected
    before and after the group is destroyed. A no-op without an initialized group;
    registered with ``atexit`` by :func:`init_from_env` and called by every process that
    :func:`launch` starts (which then ends without interpreter shutdown: a group on which
    a ``DistributedDataParallel`` wrapper was built stays alive in torch until the
    process exits). Threads still running afterwards are logged at DEBUG level.

    >>> leave_group()  # nothing to leave
    """
    if not (dist.is_available() and dist.is_initialized()):
        return
    gc.collect()
    dist.destroy_process_group()
    gc.collect()
    left = _gloo_threads()
    if left:
        logger.debug("process group destroyed; %d gloo thread(s) still referenced", left)


def wrap_ddp(module: torch.nn.Module, device: torch.device) -> Any:
    """``DistributedDataParallel(module)`` on ``device``.

    Args:
        module: the model, already on ``device``; a process group must be initialized.
        device: a CUDA device makes it the wrapper's only device (``device_ids`` and
            ``output_device``); any other device leaves them unset.

    >>> import torch, torch.distributed as dist
    >>> dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    >>> ddp = wrap_ddp(torch.nn.Linear(2, 1), torch.device("cpu"))
    >>> type(ddp).__name__, type(ddp.module).__name__
    ('DistributedDataParallel', 'Linear')
    >>> dist.destroy_process_group()
    """
    from torch.nn.parallel import DistributedDataParallel

    if device.type == "cuda":
        wrapper = DistributedDataParallel(module, device_ids=[device.index],
                                          output_device=device.index)
    else:
        wrapper = DistributedDataParallel(module)
    return wrapper


def all_reduce_sum(values: Sequence[float], device: Any = None) -> list[float]:
    """Sum ``values`` elementwise across ranks (float64); unchanged when not distributed.

    Args:
        values: numbers, as many on every rank, in the same order.
        device: where the reduced tensor lives; must be a CUDA device under NCCL
            (``None``: the CPU).

    Returns:
        The sums as Python floats (``values`` as floats when not distributed).

    >>> all_reduce_sum([1.0, 2.5])                     # not distributed: unchanged
    [1.0, 2.5]
    >>> import torch.distributed as dist
    >>> dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    >>> all_reduce_sum([1, 2.5])                       # a group of one: the sum is its own values
    [1.0, 2.5]
    >>> dist.destroy_process_group()
    """
    if not is_distributed():
        return [float(v) for v in values]
    t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=device)
    _RECENT_TENSORS.append(t)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.tolist()


# ---------------------------------------------------------------------- splitting

class RankSplitDataset(RandomAccessDataset):
    """Rank ``rank``'s part of a random-access dataset; see :func:`split_dataset`.

    Build it with :func:`split_dataset`, which validates the arguments (this constructor
    does not).

    Args:
        parent: the random-access dataset to split (not empty).
        rank: this part's rank, ``0 <= rank < world_size``.
        world_size: the number of parts.
        mode: ``"strided"`` or ``"contiguous"`` (see :func:`split_dataset`).
        remainder: ``"pad"``, ``"drop"`` or ``"keep"`` (see :func:`split_dataset`).

    Epoch ``e`` of the part reads the parent's epoch ``e`` (so a parent
    ``global_shuffle`` reshuffles every epoch, identically on every rank).

    >>> from feedline import Dataset
    >>> part = split_dataset(Dataset.range(5), 1, 2, mode="contiguous", remainder="keep")
    >>> type(part).__name__, part.name, part.to_list(), [part.parent_index(k) for k in range(len(part))]
    ('RankSplitDataset', 'split(1/2, contiguous, keep)', [3, 4], [3, 4])
    """

    def __init__(self, parent: RandomAccessDataset, rank: int, world_size: int, mode: str,
                 remainder: str) -> None:
        super().__init__()
        self._parents: tuple[RandomAccessDataset, ...] = (parent,)
        self._n = n = len(parent)
        self.rank, self.world_size, self.mode, self.remainder = rank, world_size, mode, remainder
        base, extra = divmod(n, world_size)
        if remainder == "pad":
            self._len = math.ceil(n / world_size)
        elif remainder == "drop":
            self._len = base
        else:  # keep: the first `extra` ranks get one more item
            self._len = base + (1 if rank < extra else 0)
        if mode == "contiguous":
            if remainder == "keep":
                self._start = rank * base + min(rank, extra)
            else:
                self._start = rank * self._len
        else:
            self._start = rank

    @property
    def name(self) -> str:
        return f"split({self.rank}/{self.world_size}, {self.mode}, {self.remainder})"

    def __len__(self) -> int:
        return self._len

    def parent_index(self, k: int) -> int:
        """Index in the parent (within one epoch) of this part's item ``k``.

        Args:
            k: 0-based index of an item of this part (``0 <= k < len(self)``); a
                padded item's index wraps around to the parent's first items.
        """
        if self.mode == "strided":
            j = k * self.world_size + self._start
        else:
            j = self._start + k
        return j % self._n  # padding wraps around to the first items

    def _getitem(self, index: int) -> Any:
        epoch, k = divmod(index, self._len)
        return self._parents[0]._getitem(epoch * self._n + self.parent_index(k))


def split_dataset(
    dataset: Dataset,
    rank: int,
    world_size: int,
    *,
    mode: str = "strided",
    remainder: str = "pad",
) -> RankSplitDataset:
    """Rank ``rank`` of ``world_size``'s part of a random-access dataset of ``n`` items.

    Args:
        dataset: a :class:`~feedline.dataset.base.RandomAccessDataset` (len + getitem);
            a stream raises ``TypeError``, an empty one ``ValueError``.
        rank: this process's rank, an int ``0 <= rank < world_size`` (else
            ``ValueError``/``TypeError``).
        world_size: the number of ranks ``W``, a positive int.
        mode: ``"strided"``: items ``rank, rank + W, rank + 2W, ...``;
            ``"contiguous"``: one block of consecutive items per rank. Other values
            raise ``ValueError``.
        remainder: what happens when ``W`` does not divide ``n``: ``"pad"`` gives every
            rank ``ceil(n / W)`` items, the missing ones taken again from the start of
            the data; ``"drop"`` gives every rank ``floor(n / W)`` items; ``"keep"``
            gives the first ``n % W`` ranks one more item (every item exactly once,
            unequal counts — for evaluation, never for training). Other values raise
            ``ValueError``.

    Shuffle *before* splitting (``global_shuffle(seed=...)`` with the same seed on every
    rank) so that the ranks split one common order.

    >>> from feedline import Dataset
    >>> ds = Dataset.range(5)
    >>> [split_dataset(ds, r, 2).to_list() for r in range(2)]                      # strided, padded
    [[0, 2, 4], [1, 3, 0]]
    >>> [split_dataset(ds, r, 2, remainder="keep").to_list() for r in range(2)]   # each item once
    [[0, 2, 4], [1, 3]]
    >>> shuffled = ds.global_shuffle(seed=3)                  # same seed on every rank
    >>> sorted(sum((split_dataset(shuffled, r, 2, remainder="keep").to_list() for r in range(2)), []))
    [0, 1, 2, 3, 4]
    """
    if not isinstance(dataset, RandomAccessDataset):
        raise TypeError(
            "splitting across ranks needs a random-access dataset (len + getitem), got "
            f"{getattr(dataset, 'name', type(dataset).__name__)}; split a stream yourself "
            "(e.g. with feedline.split) and pass shard=False"
        )
    positive_int("world_size", world_size)
    non_negative_int("rank", rank)
    if rank >= world_size:
        raise ValueError(f"`rank` must be < world_size ({world_size}), got {rank}")
    one_of("mode", mode, ("strided", "contiguous"))
    one_of("remainder", remainder, ("pad", "drop", "keep"))
    if len(dataset) == 0:
        raise ValueError("cannot split an empty dataset across ranks")
    return RankSplitDataset(dataset, rank, world_size, mode, remainder)


# ---------------------------------------------------------------------- launching

def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now.

    >>> import socket
    >>> port = free_port()
    >>> with socket.socket() as s:
    ...     s.bind(("127.0.0.1", port))          # nobody holds it
    >>> 0 < port < 65536
    True
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _join_group(rank: int, world_size: int, backend: str, port: int,
                threads: int | None) -> None:
    """In a process :func:`launch` or :class:`RankPool` started: set torchrun's
    environment and join the group on ``127.0.0.1:port``."""
    os.environ.update({
        "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world_size),
        "LOCAL_WORLD_SIZE": str(world_size), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
    })
    if threads is not None:
        torch.set_num_threads(threads)
    if backend == "nccl":
        torch.cuda.set_device(rank % torch.cuda.device_count())
    dist.init_process_group(backend=backend, init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world_size)


def _exit_now() -> None:
    """End a started process without interpreter shutdown, so that no gloo thread of a
    group that a DDP wrapper still holds (torch frees such a group only at exit) can be
    unwound during shutdown."""
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(0)


def _check_launch(nprocs: int, backend: str | None, threads: int | None
                  ) -> tuple[str, int | None]:
    """Validated ``(backend, threads per process)`` for starting ``nprocs`` processes."""
    positive_int("nprocs", nprocs)
    if dist.is_available() and dist.is_initialized():
        raise RuntimeError("launch() cannot start processes from inside a process group")
    backend = backend or default_backend()
    one_of("backend", backend, ("gloo", "nccl", "mpi"))
    if threads is None and backend == "gloo":
        threads = max(1, (os.cpu_count() or 1) // nprocs)
    return backend, threads


def launch(
    fn: Callable[..., Any],
    *args: Any,
    nprocs: int,
    backend: str | None = None,
    threads_per_process: int | None = None,
) -> Any:
    """Run ``fn(*args)`` in ``nprocs`` new processes forming one process group; return
    rank 0's result.

    Each process gets ``RANK``/``LOCAL_RANK``/``WORLD_SIZE``/``MASTER_ADDR``/
    ``MASTER_PORT`` set as torchrun would, joins the group on a free port of 127.0.0.1
    and leaves it when ``fn`` returns. An exception in any process ends them all and is
    raised here as a ``RuntimeError`` with that process's traceback. The processes are a
    :class:`RankPool` holding ``fn(*args)``'s result.

    Args:
        fn: an importable (picklable) function, called as ``fn(*args)`` in every
            process; its result must pickle too.
        nprocs: the number of processes, a positive int (else ``ValueError``/``TypeError``).
        backend: ``"gloo"``, ``"nccl"`` or ``"mpi"`` (else ``ValueError``); ``None``:
            :func:`default_backend`.
        threads_per_process: ``torch.set_num_threads`` in each process; ``None``: with
            gloo, this machine's cores divided among the processes (at least 1), else
            torch's default.

    Raises:
        RuntimeError: called inside a process group, or a process failed.

    A typical call (starting processes takes seconds, so the run is not shown as an
    example here)::

        launch(train_fn, config, nprocs=2)        # train_fn: an importable function

    The arguments are checked before any process starts:

    >>> launch(rank_and_world_size, nprocs=0)
    Traceback (most recent call last):
    ...
    ValueError: `nprocs` must be a positive int, got 0
    """
    pool = RankPool(_Returns, fn, *args, nprocs=nprocs, backend=backend,
                    threads_per_process=threads_per_process)
    try:
        return pool.call("result")
    finally:
        pool.close()


class _Returns:
    """What a :func:`launch` process holds: ``fn(*args)``'s result."""

    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        self.value = fn(*args)

    def result(self) -> Any:
        return self.value

    def __exit__(self, *exc_info: object) -> None:
        self.value = None


# ---------------------------------------------------------------------- a pool of ranks

def _serve(rank: int, world_size: int, backend: str, port: int, threads: int | None,
           payload: bytes, conn: Any, start_method: str) -> None:
    """A :class:`RankPool` process: build the object, then run the calls it is sent."""
    import multiprocessing

    # a spawned process would spawn its own children (DataLoader workers) too; start
    # them as the program's process does (fork on Linux), as a torchrun rank would
    multiprocessing.set_start_method(start_method, force=True)
    _join_group(rank, world_size, backend, port, threads)
    obj: Any = None
    try:
        factory, args = pickle.loads(payload)
        obj = factory(*args)
        conn.send(("ok", None))
        while True:
            name, call_args = conn.recv()
            value = getattr(obj, name)(*call_args)
            conn.send(("ok", value if rank == 0 else None))
            if name == RankPool.LAST_CALL:
                break
    except BaseException as exc:  # reported to the parent, which stops every rank
        import traceback

        try:
            conn.send(("error", f"rank {rank}: {type(exc).__name__}: {exc}\n"
                                f"{traceback.format_exc()}"))
        except OSError:  # pragma: no cover - the parent is gone
            pass
    finally:
        del obj
        leave_group()
    _exit_now()


class RankPool:
    """``nprocs`` processes on this machine forming one process group (as :func:`launch`
    starts them), each holding ``factory(*args)``; :meth:`call` runs one of its methods
    on every rank at once and returns rank 0's result.

    An exception on any rank stops all of them and is raised here as a
    ``RuntimeError`` with that rank's traceback (a rank left alone would wait forever
    in a collective). :meth:`close` calls ``__exit__(None, None, None)`` of every rank's
    object, then ends the processes. Everything passed must pickle.

    Args:
        factory: a picklable callable; ``factory(*args)`` builds each rank's object
            after the process has joined the group.
        nprocs: as in :func:`launch`.
        backend: as in :func:`launch`.
        threads_per_process: as in :func:`launch`.

    Starting processes takes seconds, so the run is not shown as an example here; the
    arguments are checked before any process starts:

    >>> RankPool(rank_and_world_size, nprocs=0)
    Traceback (most recent call last):
    ...
    ValueError: `nprocs` must be a positive int, got 0
    """

    LAST_CALL = "__exit__"

    def __init__(self, factory: Callable[..., Any], *args: Any, nprocs: int,
                 backend: str | None = None, threads_per_process: int | None = None) -> None:
        backend, threads = _check_launch(nprocs, backend, threads_per_process)
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        # Plain pickle, so every process gets its own copy of any tensor in `args`;
        # torch.multiprocessing would share their storage between the processes (and
        # every rank's optimizer step would land in the same memory).
        payload = pickle.dumps((factory, args))
        port = free_port()
        self._procs: list[Any] = []
        self._conns: list[Any] = []
        try:
            for rank in range(nprocs):
                mine, theirs = ctx.Pipe()
                proc = ctx.Process(target=_serve, name=f"feedline-rank-{rank}",
                                   args=(rank, nprocs, backend, port, threads, payload, theirs,
                                         mp.get_start_method()))
                proc.start()
                theirs.close()
                self._procs.append(proc)
                self._conns.append(mine)
            self._gather()
        except BaseException:
            self._stop(0)
            raise

    def _gather(self) -> Any:
        """Every rank's answer to the last request; rank 0's value."""
        from multiprocessing.connection import wait

        answers: dict[int, Any] = {}
        waiting = dict(enumerate(self._conns))
        while waiting:
            wait([*waiting.values(), *(self._procs[r].sentinel for r in waiting)])
            for rank in list(waiting):
                conn, proc = waiting[rank], self._procs[rank]
                if conn.poll():
                    try:
                        answer = conn.recv()
                    except EOFError:
                        answer = ("error", f"rank {rank} ended without an answer")
                elif not proc.is_alive():
                    answer = ("error", f"rank {rank} ended with exit code {proc.exitcode}")
                else:
                    continue
                del waiting[rank]
                if answer[0] == "error":
                    self._stop(0)
                    raise RuntimeError(f"a data-parallel process failed: {answer[1]}")
                answers[rank] = answer
        return answers[0][1]

    def call(self, name: str, *args: Any) -> Any:
        """Run ``obj.name(*args)`` on every rank; rank 0's result.

        Args:
            name: the name of a method of the object each rank holds; ``*args`` are
                passed to it and must pickle.

        Raises:
            RuntimeError: the pool is closed, or a rank failed (all ranks then stop).
        """
        if not self._procs:
            raise RuntimeError("the processes of this pool have ended")
        for conn in self._conns:
            conn.send((name, args))
        return self._gather()

    def close(self) -> None:
        """Call :attr:`LAST_CALL` on every rank (``__exit__(None, None, None)``), end the
        processes; idempotent."""
        if not self._procs:
            return
        try:
            self.call(self.LAST_CALL, None, None, None)
        finally:
            self._stop(30.0)

    def _stop(self, grace: float) -> None:
        """End the processes: each has ``grace`` seconds to exit, then is killed."""
        procs, self._procs = self._procs, []
        for proc in procs:
            proc.join(timeout=grace)
        for proc in procs:
            if proc.is_alive():
                proc.kill()
                proc.join()
        for conn in self._conns:
            conn.close()
        self._conns = []
