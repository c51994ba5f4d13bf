"""``map(fn, num_workers=N, backend="ray")``: the worker stage's chunks as Ray tasks.

The third implementation of :mod:`feedline.runtime.executor`'s protocol. The engine
(:mod:`feedline.dataset.parallel_map`) stays on the trainer and keeps order,
``get_state()``, errors in their place, ``timeout`` and exactly-once delivery; this
executor only runs chunks on the cluster that ``ray.init()`` (or ``RAY_ADDRESS``) names
— ``ray.init(address=os.environ["RAY_ADDRESS"])`` is called when Ray is not
initialised yet; with neither, :class:`~feedline.exceptions.ClusterUnavailableError`
(feedline never starts a cluster by itself).

* **Tasks.** Each of the ``N`` slots keeps up to ``depth`` (default 2) chunk tasks in
  flight; a task gets item *positions* (and, for a stream input, the items). A
  random-access input is shipped once through the object store (``ray.put`` of
  ``(fn, source)``, cached per Ray worker process) and the task reads its own records
  with ``source[base + position]``: record bytes never travel through the trainer.
  Results come back through the object store; small numpy arrays of a chunk travel
  stacked (one buffer per column).
* **Large results.** Ray puts a task's results over 100 KiB into its node's object
  store; a chunk made on another node is then copied by both nodes' object managers on
  its way to the trainer (about 0.35 CPU-ms per 150 KB image, in
  ``benchmarks/bench_ray.py``). A cluster whose nodes are started with
  ``RAY_max_direct_call_object_size`` and ``RAY_task_rpc_inlined_bytes_limit`` set to
  ``34603008`` (33 MiB, above the 32 MiB a chunk carries at most) in their environment
  sends each chunk in the task's reply instead, straight to the trainer: the raylets
  take no part. Each reply then needs 20-30 MB buffers on both ends; with glibc's
  allocator told to keep them (``GLIBC_TUNABLES``, in the scale-out guide) they are
  reused rather than mapped and zero-filled afresh each time. feedline does not set the
  Ray settings per task: tasks with a ``runtime_env`` of their own wait for Ray worker
  processes of their own, and Ray then placed them on fewer nodes than it had.
* **Placement.** Tasks are spread over the nodes (Ray's ``"SPREAD"`` strategy,
  :data:`SCHEDULING`), as Ray Data's are. Under Ray's default strategy the head's
  raylet was seen to go on counting the other node's CPU as taken while that node sat
  idle; it then queued every later task behind its own busy CPU, and all of a
  pipeline's tasks ran on one node for the rest of the run (half the rate on the
  2-node benchmark cluster, in some runs from the second epoch).
* **Bound.** ``buffer_size`` bounds the items in flight (pulled and not yet yielded),
  as on every backend.
* **Resources.** :class:`~feedline.RayOptions` (``map(..., execution=ExecutionOptions(
  ray=RayOptions(...)))``; its :meth:`~feedline.RayOptions.as_dict` is the
  ``ray_options`` dict checked here): ``num_cpus`` (per task, default 1), ``resources``
  (custom resources such as ``{"prep": 1}`` for nodes started with
  ``ray start --resources='{"prep": 8}'``), ``max_retries`` (default 3), ``depth``,
  ``chunk_seconds`` (work per task, default 0.2 s: a task costs Ray's processes about
  5 CPU-ms together, far more than a message costs a local worker).
* **Node loss.** A task lost with its node (``WorkerCrashedError``/node death) is rerun
  elsewhere by Ray, up to ``max_retries`` times; its items are seeded from
  ``(seed, epoch, position)`` (:mod:`feedline.runtime.seeding`), so the rerun returns
  the very same results and the output is identical, nothing lost or repeated. Lost more
  often than that: :class:`~feedline.exceptions.WorkerDiedError` naming the stage.
* **Errors.** ``fn``'s own exception is caught inside the task and returned as that
  item's entry, so Ray never retries it: it surfaces at the item's position in the
  output as the original type with a :class:`~feedline.exceptions.RemoteTraceback`.
* **Cluster gone.** With ``timeout=seconds`` a chunk not answered within ``timeout`` per
  item raises :class:`~feedline.exceptions.ClusterUnavailableError` when the cluster
  cannot be reached (else :class:`~feedline.exceptions.StageTimeoutError`); an error Ray
  raises for the connection itself is a ``ClusterUnavailableError`` at once.

Without Ray installed: ``ImportError`` naming ``pip install 'feedline[ray]'``.

>>> check_ray_options({"num_cpus": 1, "resources": {"prep": 1}})
>>> check_ray_options({"gpus": 1})
Traceback (most recent call last):
...
ValueError: `ray_options` has unknown key(s) ['gpus']; known: chunk_seconds, depth, max_retries, num_cpus, resources
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections import deque
from collections.abc import Sequence
from typing import Any

from feedline._internal.optional import require
from feedline.exceptions import (
    ClusterUnavailableError,
    PipelineError,
    StageTimeoutError,
    WorkerDiedError,
)
from feedline.runtime.executor import Slot, SlotExecutor, run_chunk
from feedline.runtime.workers import pack_entries, pack_exception, unpack_entries, unpack_exception

__all__ = ["SCHEDULING", "RayExecutor", "RayActorExecutor", "check_ray_options", "cluster_cpus",
           "reachable", "require_ray"]

_OPTIONS = ("chunk_seconds", "depth", "max_retries", "num_cpus", "resources")
SCHEDULING = "SPREAD"  # Ray's scheduling strategy for feedline's tasks (see "Placement")
_PROBE_SECONDS = 3.0  # how long a liveness probe of the cluster may take


def require_ray() -> Any:
    """The ``ray`` module, or ``ImportError`` naming ``pip install 'feedline[ray]'``.
    Importing Ray starts nothing.

    >>> require_ray().__name__  # doctest: +SKIP
    'ray'
    """
    return require("ray", extra="ray")


def check_ray_options(options: dict[str, Any]) -> None:
    """Validate ``ray_options`` (see the module docstring).

    Args:
        options: the ``ray_options`` dict. Unknown keys raise ``ValueError`` listing the
            known ones; so do ``num_cpus``/``chunk_seconds`` that are not positive
            numbers, ``max_retries`` not an int ``>= 0``, ``depth`` not an int ``>= 1``
            and ``resources`` not a dict of names to numbers.

    >>> check_ray_options({"num_cpus": 2, "resources": {"prep": 1}, "max_retries": 3})
    >>> check_ray_options({"num_cpus": 0})
    Traceback (most recent call last):
    ...
    ValueError: `ray_options['num_cpus']` must be a positive number, got 0
    """
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise ValueError(f"`ray_options` has unknown key(s) {unknown}; known: {', '.join(_OPTIONS)}")
    for key in ("num_cpus", "chunk_seconds"):
        value = options.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ValueError(f"`ray_options['{key}']` must be a positive number, got {value!r}")
    for key, least in (("max_retries", 0), ("depth", 1)):
        value = options.get(key, least)
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"`ray_options['{key}']` must be an int >= {least}, got {value!r}")
    resources = options.get("resources", {})
    if not isinstance(resources, dict) or not all(
            isinstance(k, str) and isinstance(v, (int, float)) for k, v in resources.items()):
        raise ValueError(f"`ray_options['resources']` must map names to amounts, got {resources!r}")


def connect() -> Any:
    """``ray``, connected to the cluster ``ray.init()`` or ``RAY_ADDRESS`` names.

    feedline never starts a cluster by itself: with Ray not initialised and no
    ``RAY_ADDRESS``, :class:`~feedline.exceptions.ClusterUnavailableError` says what to
    do (``ray.init()`` without an address starts a local one, if that is what you want).
    """
    ray = require_ray()
    if not ray.is_initialized():
        address = os.environ.get("RAY_ADDRESS")
        if not address:
            raise ClusterUnavailableError(
                "backend='ray' runs on the cluster that ray.init() or RAY_ADDRESS names, and "
                "there is none: set RAY_ADDRESS=HOST:PORT (see `ray start --head`), or call "
                "ray.init(address=...) first (ray.init() alone starts a local cluster)")
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    return ray


def cluster_cpus() -> int:
    """The cluster's CPUs (``num_workers="auto"`` with ``backend="ray"``)."""
    return max(1, int(connect().cluster_resources().get("CPU", 1)))


def _cluster_id(ray: Any) -> str | None:
    """The address of the cluster's control store, naming the cluster Ray is connected to."""
    try:
        return str(ray.get_runtime_context().gcs_address)
    except Exception:  # noqa: BLE001 - not connected
        return None


def reachable(ray: Any) -> bool:
    """Whether the cluster ``ray`` is connected to answers (alive nodes listed) within
    a few seconds (a probe in a thread of its own: a lost cluster can block the call).

    Args:
        ray: the ``ray`` module (connected), or anything with its ``nodes()``.

    >>> import types
    >>> reachable(types.SimpleNamespace(nodes=lambda: [{"Alive": True}]))
    True
    """
    answer: list[bool] = []

    def probe() -> None:
        try:
            answer.append(any(n.get("Alive") for n in ray.nodes()))
        except Exception:  # noqa: BLE001 - any failure means: not reachable
            answer.append(False)

    t = threading.Thread(target=probe, daemon=True, name="feedline-ray-probe")
    t.start()
    t.join(_PROBE_SECONDS)
    return bool(answer and answer[0])


# ------------------------------------------------------------------ task side
_SPECS: dict[str, Any] = {}  # token -> (fn, source), per Ray worker process


def _run_task(token: str, box: list, seed_key: Any, base: int, positions: list[int],
              items: list | None, slot: int) -> tuple[Any, float]:
    """One chunk, in a Ray worker: the packed reply entries and the seconds it took."""
    spec = _SPECS.get(token)
    if spec is None:
        if len(_SPECS) > 8:
            _SPECS.clear()
        spec = _SPECS[token] = require_ray().get(box[0])
    fn, source = spec
    t0 = time.perf_counter()
    entries = run_chunk(fn, source, seed_key, base, positions, items,
                        pack_error=lambda exc, phase: pack_exception(exc, phase=phase, worker=slot))
    return pack_entries(entries), time.perf_counter() - t0


class _RaySlot(Slot):
    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.refs: deque[Any] = deque()
        self.sent: deque[float] = deque()
        self.head_since = 0.0  # when the oldest chunk became the oldest


class RayExecutor(SlotExecutor):
    """Slots whose chunks run as Ray tasks; see the module docstring.

    Connects to the cluster first (``ClusterUnavailableError`` when there is none) and
    ships ``(fn, source)`` to the object store once (``PipelineError`` when they do not
    pickle).

    Args:
        fn: the function each task applies to items.
        source: the random-access input tasks read from (``source._getitem(base +
            position)``), or ``None`` (chunks carry the items).
        workers: how many slots (chunk streams) to keep.
        stage: the stage's name, in task names and error messages.
        timeout: the stage's per-item ``timeout`` in seconds, which :meth:`progress`
            scales by chunk length; ``None``: none.
        num_cpus: CPUs Ray reserves per task.
        resources: custom Ray resources per task, such as ``{"prep": 1}``.
        max_retries: times Ray reruns a task lost with its node.
        depth: most chunk tasks in flight per slot.
        chunk_seconds: the work one task should carry, in seconds.
    """

    keep_when_idle = True

    def __init__(self, fn: Any, source: Any, *, workers: int, stage: str,
                 timeout: float | None = None, num_cpus: float = 1,
                 resources: dict[str, float] | None = None, max_retries: int = 3,
                 depth: int = 2, chunk_seconds: float = 0.2) -> None:
        self._ray = ray = connect()
        self.stage = stage
        self.depth = depth
        self.timeout = timeout
        self.chunk_seconds = chunk_seconds
        self.chunk_bytes = 32 << 20  # keep below the cluster settings under "Large results"
        self.broken: str | None = None
        self._generation = 0
        self._cluster = _cluster_id(ray)
        self._token = uuid.uuid4().hex
        try:
            self._box = [ray.put((fn, source))]
        except Exception as exc:
            raise PipelineError(
                f"stage {stage!r} cannot ship its function and input to the Ray cluster "
                f"(they must pickle with cloudpickle): {exc}") from exc
        self._task = ray.remote(_run_task).options(
            num_cpus=num_cpus, resources=dict(resources or {}), max_retries=max_retries,
            retry_exceptions=False, name=f"feedline:{stage}", scheduling_strategy=SCHEDULING)
        self._slots: list[_RaySlot] = []
        self.add_workers(workers)

    def _new_slot(self, index: int) -> _RaySlot:
        return _RaySlot(index)

    def new_generation(self) -> int:
        """Cancel every task in flight (their results are never read) and start anew."""
        self._generation += 1
        for slot in self._slots:
            for ref in slot.refs:
                try:
                    self._ray.cancel(ref)
                except Exception:  # noqa: BLE001 - already done, or the cluster is gone
                    pass
            slot.refs.clear()
            slot.outstanding.clear()
            slot.sent.clear()
        return self._generation

    cancel = new_generation

    def submit(self, worker: int, generation: int, base: int, positions: list[int],
               items: list | None) -> None:
        """Start a chunk task for a slot; ``PipelineError`` when it already has ``depth``
        in flight, ``ClusterUnavailableError``/``WorkerDiedError`` when Ray fails.

        Args:
            worker: the slot's index.
            generation: unused: older generations' tasks are cancelled by
                :meth:`new_generation` itself.
            base: added to each position to read ``source._getitem(base + position)``.
            positions: the items' positions.
            items: the items, one per position, or ``None`` to read them in the task.
        """
        slot = self._check_room(worker)
        try:
            ref = self._call(slot, base, positions, items)
        except Exception as exc:  # noqa: BLE001 - Ray's own errors
            raise self._lost(exc, positions) from exc
        now = time.monotonic()
        if not slot.refs:
            slot.head_since = now
        slot.refs.append(ref)
        slot.outstanding.append(positions)
        slot.sent.append(now)

    def _call(self, slot: _RaySlot, base: int, positions: list[int], items: list | None) -> Any:
        """Start the chunk on the cluster; its reference."""
        return self._task.remote(self._token, self._box, slot.seed_key, base, positions,
                                 items, slot.index)

    def ready(self, workers: Sequence[int], timeout: float | None) -> list[int]:
        """The slots among ``workers`` whose oldest task finished, waiting for one up to
        ``timeout`` (``ray.wait``); ``PipelineError`` once the executor is broken.

        Args:
            workers: the slot indices to wait on; ``[]`` at once when none has a task.
            timeout: most seconds to wait (``None``: no limit).
        """
        if self.broken:
            raise PipelineError(f"the workers of stage {self.stage!r} are unusable: {self.broken}")
        heads = {self._slots[w].refs[0]: w for w in workers if self._slots[w].refs}
        if not heads:
            return []
        try:
            done, rest = self._ray.wait(list(heads), num_returns=1, timeout=timeout,
                                        fetch_local=True)
            if done and rest:
                more, _ = self._ray.wait(rest, num_returns=len(rest), timeout=0,
                                         fetch_local=False)
                done += more
        except Exception as exc:  # noqa: BLE001 - Ray's own errors
            raise self._lost(exc, None) from exc
        return [heads[ref] for ref in done]

    def collect(self, worker: int) -> tuple[list[int], list, float, int]:
        """The slot's oldest task's reply: ``(positions, entries, busy seconds, 0)``; a task
        lost beyond ``max_retries`` raises ``WorkerDiedError``, a lost cluster
        ``ClusterUnavailableError``.

        Args:
            worker: a slot :meth:`ready` returned.
        """
        slot = self._slots[worker]
        ref = slot.refs.popleft()
        positions = slot.outstanding.popleft()
        slot.sent.popleft()
        slot.head_since = time.monotonic()
        try:
            packed, busy = self._ray.get(ref)
        except Exception as exc:  # noqa: BLE001 - a lost task or the cluster gone
            raise self._lost(exc, positions) from exc
        return positions, unpack_entries(packed), busy, 0

    def _lost(self, exc: BaseException, positions: list[int] | None) -> PipelineError:
        what = "" if not positions else f" (items {positions[0]}..{positions[-1]})"
        self.broken = f"a task was lost: {type(exc).__name__}"
        ray_exceptions = self._ray.exceptions
        lost = (ray_exceptions.WorkerCrashedError, ray_exceptions.NodeDiedError,
                ray_exceptions.ObjectLostError, ray_exceptions.RayActorError)
        if isinstance(exc, ray_exceptions.RayTaskError):  # the task itself failed, not fn
            return PipelineError(
                f"a Ray task of stage {self.stage!r}{what} failed outside the function "
                f"(the function and input must unpickle on every node: defined at module "
                f"level of an importable module, or in __main__): {exc}")
        if isinstance(exc, lost) and self._reachable():
            return WorkerDiedError(
                f"a Ray task of stage {self.stage!r}{what} was lost more often than "
                f"max_retries allows: {exc}")
        return ClusterUnavailableError(
            f"stage {self.stage!r} lost its Ray cluster{what}: {type(exc).__name__}: {exc}")

    def error(self, payload: Any, *, stage: str, position: int) -> BaseException:
        """The exception an ``ERROR`` entry's payload stands for
        (:func:`~feedline.runtime.workers.unpack_exception`).

        Args:
            payload: the packed exception from the task.
            stage: the stage's name, for the note.
            position: the item's position, for the note.
        """
        return unpack_exception(payload, stage=stage, position=position)

    def progress(self, worker: int) -> tuple[int, float] | None:
        """The oldest chunk's first position and the time its deadline counts from: a
        chunk of ``k`` items may take ``k * timeout`` from when it became the slot's
        oldest (earlier work of the slot, queued on the cluster, does not count).
        ``None`` when the slot has no task.

        Args:
            worker: the slot's index.
        """
        slot = self._slots[worker]
        if not slot.outstanding:
            return None
        positions = slot.outstanding[0]
        since = max(slot.head_since, slot.sent[0])
        return positions[0], since + (len(positions) - 1) * (self.timeout or 0.0)

    def timeout_error(self, stage: str, position: int, timeout: float) -> PipelineError:
        """The error for an item not back in time: ``ClusterUnavailableError`` (and the
        executor broken) when the cluster does not answer a probe within a few seconds,
        else :class:`~feedline.exceptions.StageTimeoutError`.

        Args:
            stage: the stage's name, for the message.
            position: the late item's position.
            timeout: the per-item timeout that passed, in seconds.
        """
        if not self._reachable():
            self.broken = "the Ray cluster is unreachable"
            return ClusterUnavailableError(
                f"stage {stage!r}: item {position} was not back within {timeout:g} s and "
                "the Ray cluster cannot be reached (stopped, or its head node is gone)")
        return StageTimeoutError(stage, position, timeout)

    def _reachable(self) -> bool:
        return reachable(self._ray)

    def drain(self, timeout: float) -> bool:
        """Outstanding tasks are cancelled, not awaited: nothing to wait for. ``True``
        unless the executor is broken.

        Args:
            timeout: unused (nothing is awaited).
        """
        if any(slot.refs for slot in self._slots):
            self.new_generation()
        return self.broken is None

    def alive(self) -> bool:
        """Not broken, and Ray still connected to the cluster the executor was made on
        (after ``ray.shutdown()`` and ``ray.init()`` elsewhere, a new executor is made)."""
        return (self.broken is None and self._ray.is_initialized()
                and _cluster_id(self._ray) == self._cluster)

    def shutdown(self) -> None:
        if self.broken is None:
            try:
                self.new_generation()
            except Exception:  # noqa: BLE001 - the cluster may be gone already
                pass
        self.broken = self.broken or "shut down"
        self._box = []


# ------------------------------------------------------------------ one actor
class _SourceActor:
    """Ray actor of :class:`RayActorExecutor`: keeps ``(fn, source)`` and runs chunks
    against it in the order they were sent (a stateful source, such as the cursor of
    ``prefetch(backend="ray")``, advances from one chunk to the next)."""

    def __init__(self, box: list) -> None:
        self.fn, self.source = require_ray().get(box[0])

    def configure(self, payload: Any) -> None:
        self.source._configure(payload)

    def run(self, seed_key: Any, base: int, positions: list[int], items: list | None,
            slot: int) -> tuple[Any, float]:
        t0 = time.perf_counter()
        entries = run_chunk(self.fn, self.source, seed_key, base, positions, items,
                            pack_error=lambda exc, phase: pack_exception(exc, phase=phase,
                                                                         worker=slot))
        return pack_entries(entries), time.perf_counter() - t0


class RayActorExecutor(RayExecutor):
    """One slot whose chunks run, in order, in one Ray actor that keeps the input: for a
    source with state (``_configure(payload)``, then ``_getitem(position)`` in order, as
    :class:`~feedline.runtime.workers.WorkerPool`'s worker runs it), such as the
    pipeline that ``prefetch(n, backend="ray")`` runs on the cluster.

    Everything else is :class:`RayExecutor`'s: results through the object store,
    ``ready``/``collect``/``progress``/``timeout_error``, an actor lost with its node a
    :class:`~feedline.exceptions.WorkerDiedError`, the cluster gone a
    :class:`~feedline.exceptions.ClusterUnavailableError`. The actor is not restarted
    (its state would be lost with it): resume from the consumer's ``get_state()``.
    :meth:`shutdown` kills it.

    Args:
        fn: applied to each item the source gives.
        source: the stateful input, shipped to the actor once (it must pickle with
            cloudpickle).
        stage: the stage's name, in the actor's name and in errors.
        timeout: seconds per item before ``timeout_error`` (``None``: no limit).
        num_cpus: CPUs the actor holds while it lives.
        resources: custom resources it needs (its placement, e.g. ``{"prep": 1}``).
        depth: chunks in flight at once.

    >>> RayActorExecutor.keep_when_idle   # kept between iterations, like map's tasks
    True
    """

    def __init__(self, fn: Any, source: Any, *, stage: str, timeout: float | None = None,
                 num_cpus: float = 1, resources: dict[str, float] | None = None,
                 depth: int = 2) -> None:
        super().__init__(fn, source, workers=1, stage=stage, timeout=timeout,
                         num_cpus=num_cpus, resources=resources, depth=depth)
        try:
            self._actor = self._ray.remote(_SourceActor).options(
                num_cpus=num_cpus, resources=dict(resources or {}), max_restarts=0,
                max_task_retries=0, name=f"feedline:{stage}:{self._token[:8]}",
            ).remote(self._box)
        except Exception as exc:  # noqa: BLE001 - Ray's own errors
            raise self._lost(exc, None) from exc

    def _call(self, slot: _RaySlot, base: int, positions: list[int], items: list | None) -> Any:
        return self._actor.run.remote(slot.seed_key, base, positions, items, slot.index)

    def configure(self, worker: int, payload: Any) -> None:
        """Make the actor call ``source._configure(payload)`` before the chunks sent after it.

        Args:
            worker: the slot's index (0: there is one).
            payload: passed to ``source._configure``.
        """
        try:
            self._actor.configure.remote(payload)
        except Exception as exc:  # noqa: BLE001 - Ray's own errors
            raise self._lost(exc, None) from exc

    def shutdown(self) -> None:
        """Stop using the actor and kill it (its pipeline ends with it)."""
        super().shutdown()
        try:
            self._ray.kill(self._actor)
        except Exception:  # noqa: BLE001 - the actor or the cluster is gone already
            pass
