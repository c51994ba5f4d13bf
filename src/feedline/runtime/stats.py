"""Per-stage pipeline statistics and a bottleneck verdict.

``ds.iterator(stats=True)`` wraps every stage iterator with a timer; ``it.stats()``
returns a :class:`StatsReport`. For each stage (numbered from the source, ``#0``):

``items``
    items the stage produced.
``total_s``
    seconds spent inside the stage's ``__next__``, its inputs included.
``self_s``
    ``total_s`` minus the time spent in its inputs' ``__next__`` *in the same thread*
    (an input running in a prefetch thread or in worker processes is not subtracted,
    since the stage does not run it).
``wait_s``
    seconds the consumer blocked waiting for a background thread or worker processes
    (stages that have them report it as ``wait_seconds``); part of ``self_s``.
``fill``
    the stage's buffer fill level — ready items over capacity, sampled at every
    ``next`` call — as ``(min, mean, max)`` fractions (TensorFlow's queue-fullness
    summary); ``None`` for stages without a buffer (those without ``buffer_fill()``).
``items_per_s``
    ``items`` over the wall time from the stage's first call to its last return.
``workers``, ``worker_s``
    for stages with worker processes: their number and the seconds they spent in the
    function (``worker_count`` and ``worker_seconds`` of the stage's iterator).
``skipped``
    elements the stage skipped or replaced under an ``on_error`` policy (the
    ``skipped`` counter of the stage's iterator; 0 for stages without one).
``stalled_s``
    seconds the stage's current ``next`` call has been running without producing an item
    (``0.0`` when the stage is not inside a call). ``stats()`` may be called from another
    thread while the pipeline is blocked: a stage stuck for longer than a second, whose
    own inputs are not inside a call (so the time is its own), makes the verdict
    ``stalled: map(f) has produced nothing for 12.3 s ...``.

**Bottleneck.** Each stage's *cost* is the time it needed of the critical resource: for
a stage in the consumer's thread, ``self_s - wait_s``; for a worker stage,
``max(worker_s / workers, self_s - wait_s)`` (its workers run in parallel). The
*consumer's* cost is the wall time minus the outermost stage's ``total_s`` (the training
step and everything else between ``next`` calls). The largest cost names the bottleneck:

* the consumer → ``consumer-bound: the training step ... the pipeline is not the
  bottleneck`` — unless the consumer waited on a background thread or workers for
  longer than it worked, in which case the largest stage cost is named instead;
* a worker stage whose cost is its workers' time → ``compute-bound: map(decode) with 2
  worker(s) is saturated (97% busy); add workers or make the function cheaper (e.g.
  lower resolution)``; one whose cost is its own work in the consumer's thread (sending
  items, receiving results) → ``transfer-bound: ...``;
* the source (stage #0) → ``source-bound: ...; read ahead with .prefetch() ...``;
* another stage in the consumer's thread → ``compute-bound: map(f) runs in the consumer's
  thread ...; run it in worker processes with .map(fn, num_workers=N)`` for maps, or
  ``stage-bound: ...`` for others.

Stage iterators that do not run in the consumer's thread are still timed where they run;
wrappers forward ``get_state``, ``set_state``, ``close`` and ``buffer_fill``. Stages that
are never iterated do not appear: a map over a random-access dataset reads its input by
index, and ``map(..., num_workers=N)`` over one has its workers read it.

>>> from feedline import Dataset
>>> ds = Dataset.from_reader(lambda: iter(range(6))).map(lambda x: x + 1).batch(2)
>>> it = ds.iterator(stats=True)
>>> list(it)
[[1, 2], [3, 4], [5, 6]]
>>> report = it.stats()
>>> [(s.position, s.name, s.items) for s in report.stages]
[(0, 'reader(<lambda>)', 6), (1, 'map(<lambda>)', 6), (2, 'batch(2)', 3)]
>>> report.bottleneck.split(":")[0] in {"consumer-bound", "source-bound", "compute-bound", "stage-bound"}
True
>>> sorted(report.to_dict())
['bottleneck', 'stages', 'wall_s']
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from feedline.dataset.iterator import DatasetIterator

__all__ = ["PipelineStats", "StatsReport", "StageStats"]


@dataclass(frozen=True)
class StageStats:
    """The numbers of one stage (the module docstring explains how each is measured).

    Args:
        position: the stage's number, counted from the source (``0``).
        name: the stage's name, such as ``"map(decode)"``.
        items: items the stage produced.
        total_s: seconds inside the stage's ``__next__``, its inputs included.
        self_s: ``total_s`` minus the time in its inputs' ``__next__`` in the same thread.
        wait_s: seconds the consumer blocked waiting for the stage's background thread or
            worker processes (part of ``self_s``).
        fill: the buffer fill level as ``(min, mean, max)`` fractions, or ``None`` for a
            stage without a buffer.
        items_per_s: ``items`` over the wall time from the stage's first call to its last
            return.
        workers: the number of worker processes, or ``None`` for a stage without them.
        worker_s: seconds the workers spent in the function (``None`` without workers).
        skipped: elements skipped or replaced under an ``on_error`` policy.
        stalled_s: seconds the stage's current ``next`` call has run without producing an
            item (``0.0`` outside a call).

    >>> s = StageStats(position=1, name="map(decode)", items=10, total_s=4.0, self_s=3.0, wait_s=1.0,
    ...                fill=None, items_per_s=2.5, workers=2, worker_s=6.0)
    >>> s.cost_s                         # max(worker_s / workers, self_s - wait_s)
    3.0
    """

    position: int
    name: str
    items: int
    total_s: float
    self_s: float
    wait_s: float
    fill: tuple[float, float, float] | None
    items_per_s: float
    workers: int | None = None
    worker_s: float | None = None
    skipped: int = 0
    stalled_s: float = 0.0

    @property
    def cost_s(self) -> float:
        """Time this stage needed of its critical resource (see the module docstring)."""
        own = max(0.0, self.self_s - self.wait_s)
        if self.workers:
            return max((self.worker_s or 0.0) / self.workers, own)
        return own


_UNITS = ("B", "kB", "MB", "GB", "TB", "PB", "EB")


def format_bytes(n: float) -> str:
    """``n`` bytes in decimal units with three significant digits, so that small sizes
    do not print as ``0.0 MB``.

    >>> [format_bytes(n) for n in (0, 512, 12_345, 4_500_000, 2.5e9)]
    ['0 B', '512 B', '12.3 kB', '4.50 MB', '2.50 GB']
    """
    value = float(n)
    unit = 0
    while abs(value) >= 999.5 and unit < len(_UNITS) - 1:
        value /= 1000.0
        unit += 1
    if unit == 0:
        return f"{value:.0f} B"
    return f"{f'{value:#.3g}'.rstrip('.')} {_UNITS[unit]}"


class _Record:
    """Accumulated numbers of one dataset node (all its iterators, e.g. one per epoch)."""

    def __init__(self, key: int, name: str, position: int, is_source: bool,
                 parent_ids: set[int], creator: int | None = None) -> None:
        self.key = key
        self.name = name
        self.position = position
        self.creator = creator  # the stage whose next() created this one (interleave's inputs)
        self.is_source = is_source
        self.parent_ids = parent_ids
        self.items = 0
        self.total = 0.0
        self.self_time = 0.0
        self.first_start: float | None = None
        self.last_end: float | None = None
        self.fill_n = 0
        self.fill_sum = 0.0
        self.fill_min = 1.0
        self.fill_max = 0.0
        self.wait_seconds = 0.0
        self.worker_seconds = 0.0
        self.worker_count: int | None = None
        self.skipped = 0.0
        self.call_start: float | None = None  # the running next() call began (or None)


_COUNTERS = ("wait_seconds", "worker_seconds", "skipped")


class _TimedIterator(DatasetIterator):
    """Times ``__next__`` of one stage iterator; forwards everything else."""

    def __init__(self, it: DatasetIterator, record: _Record, tls: threading.local,
                 clock: Any) -> None:
        self._it = it
        self._rec = record
        self._tls = tls
        self._clock = clock
        fill = getattr(it, "buffer_fill", None)
        self._fill = fill if callable(fill) else None
        if self._fill is not None:
            self.buffer_fill = fill
        # counters the stage keeps itself (seconds, growing): sampled after every call
        self._counters: list[list[Any]] = [[name, 0.0] for name in _COUNTERS if hasattr(it, name)]
        self._has_workers = hasattr(it, "worker_count")

    def __next__(self) -> Any:
        rec = self._rec
        if self._fill is not None:
            try:
                f = float(self._fill())
            except Exception:  # noqa: BLE001 - statistics never break the pipeline
                f = None
            if f is not None:
                rec.fill_n += 1
                rec.fill_sum += f
                rec.fill_min = min(rec.fill_min, f)
                rec.fill_max = max(rec.fill_max, f)
        stack = getattr(self._tls, "stack", None)
        if stack is None:
            stack = self._tls.stack = []
            self._tls.running = []
        running = self._tls.running
        running.append(rec.key)
        clock = self._clock
        t0 = clock()
        if rec.first_start is None:
            rec.first_start = t0
        rec.call_start = t0
        stack.append(0.0)
        produced = 0
        try:
            item = next(self._it)
            produced = 1
            return item
        finally:
            t1 = clock()
            dt = t1 - t0
            inner = stack.pop()
            running.pop()
            if stack:
                stack[-1] += dt
            rec.items += produced
            rec.total += dt
            rec.self_time += dt - inner
            rec.last_end = t1
            rec.call_start = None
            if self._counters:
                self._sample()

    def _sample(self) -> None:
        rec, it = self._rec, self._it
        for entry in self._counters:
            value = float(getattr(it, entry[0], 0.0) or 0.0)
            setattr(rec, entry[0], getattr(rec, entry[0]) + value - entry[1])
            entry[1] = value
        if self._has_workers:
            n = getattr(it, "worker_count", None)
            if n:
                rec.worker_count = int(n)

    def get_state(self) -> dict[str, Any]:
        return self._it.get_state()

    def set_state(self, state: dict[str, Any]) -> None:
        self._it.set_state(state)

    def close(self) -> None:
        it = self.__dict__.get("_it")
        if it is not None:
            it.close()

    def __getattr__(self, name: str) -> Any:
        it = self.__dict__.get("_it")
        if it is None:
            raise AttributeError(name)
        return getattr(it, name)


class PipelineStats:
    """Collects per-stage timings; pass ``stats=True`` (or an instance) to
    ``Dataset.iterator``.

    Args:
        clock: the time source: a callable returning monotonic seconds as a float.

    >>> import itertools
    >>> ticks = itertools.count()
    >>> stats = PipelineStats(clock=lambda: float(next(ticks)))     # a fake clock: one tick a call
    >>> it = Dataset.range(4).map(lambda x: x * 2).iterator(stats=stats)
    >>> list(it)
    [0, 2, 4, 6]
    >>> stage = stats.report().stages[0]
    >>> stage.name, stage.items, stage.total_s
    ('map(<lambda>)', 4, 5.0)
    """

    def __init__(self, *, clock: Any = time.perf_counter) -> None:
        self._clock = clock
        self._records: dict[int, _Record] = {}
        self._nodes: list[Any] = []  # keeps ids stable while we report on them
        self._tls = threading.local()
        self._lock = threading.Lock()
        self._root: int | None = None

    def mark_root(self, node: Any) -> None:
        """Name the pipeline's outermost stage (the one the consumer calls); stages that
        other stages create while running (``interleave``'s inner datasets) are never
        taken for it.

        Args:
            node: the outermost dataset node.
        """
        self._root = id(node)

    def wrap(self, node: Any, iterator: DatasetIterator) -> DatasetIterator:
        """Return ``iterator`` timed as a stage of dataset ``node``.

        Args:
            node: the dataset the iterator belongs to; every iterator of one node (one
                per epoch, say) adds to the same stage's numbers, named by its ``name``.
            iterator: the stage iterator to time; the wrapper forwards ``get_state``,
                ``set_state``, ``close`` and ``buffer_fill``.
        """
        with self._lock:
            rec = self._records.get(id(node))
            if rec is None:
                parents = tuple(getattr(node, "_parents", ()) or ())
                running = getattr(self._tls, "running", None)
                rec = _Record(id(node), str(getattr(node, "name", type(node).__name__)),
                              len(self._records), not parents, {id(p) for p in parents},
                              running[-1] if running else None)
                self._records[id(node)] = rec
                self._nodes.append(node)
        return _TimedIterator(iterator, rec, self._tls, self._clock)

    def report(self) -> StatsReport:
        """The numbers so far (the pipeline may still be running)."""
        with self._lock:
            records = _pipeline_order(sorted(self._records.values(), key=lambda r: r.position))
        stages = []
        now = self._clock()
        for position, rec in enumerate(records):
            span = (
                (rec.last_end - rec.first_start)
                if rec.first_start is not None and rec.last_end is not None else 0.0
            )
            fill = None
            if rec.fill_n:
                fill = (rec.fill_min, rec.fill_sum / rec.fill_n, rec.fill_max)
            stages.append(StageStats(
                position=position,
                name=rec.name,
                items=rec.items,
                total_s=rec.total,
                self_s=rec.self_time,
                wait_s=rec.wait_seconds,
                fill=fill,
                items_per_s=rec.items / span if span > 0 else 0.0,
                workers=rec.worker_count,
                worker_s=rec.worker_seconds if rec.worker_count else None,
                skipped=int(rec.skipped),
                stalled_s=0.0 if rec.call_start is None else max(0.0, now - rec.call_start),
            ))
        starts = [r.first_start for r in records if r.first_start is not None]
        ends = [r.last_end for r in records if r.last_end is not None]
        wall = (max(ends) - min(starts)) if starts and ends else 0.0
        rooted = [s for s, r in zip(stages, records) if r.key == self._root]
        top: StageStats | None
        if rooted:
            top = rooted[0]
        else:
            parent_ids = set().union(*(r.parent_ids for r in records)) if records else set()
            tops = [s for s, r in zip(stages, records) if r.key not in parent_ids]
            top = tops[-1] if tops else (stages[-1] if stages else None)
        return StatsReport(stages, wall, _verdict(stages, top, wall, records))


def _pipeline_order(records: list[_Record]) -> list[_Record]:
    """``records`` (in the order their stages were first iterated) in pipeline order: a
    stage that another stage created while running (``interleave``'s per-file inputs,
    opened as it goes) is listed just before that stage, with the stages it feeds after
    it, instead of at the end of the table.

    >>> recs = [_Record(k, n, k, not k, set(), c) for k, n, c in
    ...         [(0, "files", None), (1, "interleave", None), (2, "batch", None),
    ...          (3, "read(a)", 1), (4, "read(b)", 1)]]
    >>> [r.name for r in _pipeline_order(recs)]
    ['files', 'read(a)', 'read(b)', 'interleave', 'batch']
    """
    keys = {r.key for r in records}
    created: dict[int, list[_Record]] = {}
    top: list[_Record] = []
    for rec in records:
        if rec.creator is not None and rec.creator in keys and rec.creator != rec.key:
            created.setdefault(rec.creator, []).append(rec)
        else:
            top.append(rec)
    out: list[_Record] = []

    def emit(rec: _Record) -> None:
        for inner in created.pop(rec.key, ()):
            emit(inner)
        out.append(rec)

    for rec in top:
        emit(rec)
    for rest in created.values():  # not reached: a creator is always recorded first
        out.extend(rest)
    return out


_STALLED_S = 1.0


def _verdict(stages: list[StageStats], top: StageStats | None, wall: float,
             records: list[_Record]) -> str:
    in_call = {r.key for r in records if r.call_start is not None}
    stuck = [
        s for s, r in zip(stages, records)
        if s.stalled_s > _STALLED_S and not (r.parent_ids & in_call)
    ]
    if stuck:
        worst = max(stuck, key=lambda s: s.stalled_s)
        return (
            f"stalled: {worst.name} has produced nothing for {worst.stalled_s:.1f} s; a hung "
            "function or input? give map(..., execution=ExecutionOptions(timeout=seconds)) to turn "
            "a hang into an error"
        )
    if top is None or wall <= 0:
        return "no items yet: nothing to judge"
    consumer = max(0.0, wall - top.total_s)
    worst = max(stages, key=lambda s: s.cost_s)
    # a consumer that waited on the pipeline longer than it worked is not the bottleneck
    if consumer >= worst.cost_s and top.wait_s <= consumer:
        return (
            f"consumer-bound: the training step (the time between next() calls) takes "
            f"{consumer / wall:.0%} of the time and waits for nothing; the pipeline is not "
            "the bottleneck"
        )
    pct = f"{worst.cost_s / wall:.0%}"
    if worst.workers:
        busy = (worst.worker_s or 0.0) / (worst.workers * wall)
        own = max(0.0, worst.self_s - worst.wait_s)
        if (worst.worker_s or 0.0) / worst.workers >= own:
            return (
                f"compute-bound: {worst.name} with {worst.workers} worker(s) is saturated "
                f"({busy:.0%} busy); add workers or make the function cheaper (e.g. lower "
                "resolution)"
            )
        return (
            f"transfer-bound: {worst.name} with {worst.workers} worker(s) is the slowest stage "
            f"but its workers are only {busy:.0%} busy; the consumer's share (sending items, "
            "receiving results) limits it: read from a random-access input, return numpy "
            "arrays, or make items larger"
        )
    is_source = records[stages.index(worst)].is_source
    if is_source:
        return (
            f"source-bound: {worst.name} takes {pct} of the time; read ahead with .prefetch(), "
            "read several files in parallel, or use faster storage"
        )
    if worst.name.startswith(("map(", "xmap(")):
        return (
            f"compute-bound: {worst.name} runs in the consumer's thread and takes {pct} of the "
            "time; run it in worker processes with .map(fn, num_workers=N) or make it cheaper"
        )
    return f"stage-bound: {worst.name} takes {pct} of the time in the consumer's thread"


class StatsReport:
    """Per-stage statistics (:attr:`stages`), the wall time and the :attr:`bottleneck`
    line. ``str(report)`` renders a table.

    Args:
        stages: the stages' numbers, in pipeline order.
        wall_s: seconds from the first ``next`` call to the last return.
        bottleneck: the verdict line (see the module docstring).

    >>> it = Dataset.range(3).batch(2).iterator(stats=True)
    >>> _ = list(it)
    >>> report = it.stats()
    >>> type(report).__name__, [(s.name, s.items) for s in report.stages], sorted(report.to_dict())
    ('StatsReport', [('range[3]', 3), ('batch(2)', 2)], ['bottleneck', 'stages', 'wall_s'])
    >>> "batch(2)" in str(report)
    True
    """

    def __init__(self, stages: list[StageStats], wall_s: float, bottleneck: str) -> None:
        self.stages = stages
        self.wall_s = wall_s
        self.bottleneck = bottleneck

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data: ``{"wall_s", "stages": [...], "bottleneck"}``."""
        stages = []
        for s in self.stages:
            d = asdict(s)
            d["fill"] = None if s.fill is None else dict(zip(("min", "mean", "max"), s.fill))
            stages.append(d)
        return {"wall_s": self.wall_s, "stages": stages, "bottleneck": self.bottleneck}

    def to_tensorboard(self, writer: Any, step: int, *, prefix: str = "feedline") -> None:
        """Write each stage's throughput, wait time and mean buffer fill as scalars with
        ``writer.add_scalar(tag, value, step)`` (a ``torch.utils.tensorboard.SummaryWriter``
        or anything with that method); ``self_s`` is written too.

        Args:
            writer: the object whose ``add_scalar`` is called.
            step: the global step the values belong to.
            prefix: the tags' first part: tags read
                ``<prefix>/<position>_<name>/items_per_s`` (and ``wait_s``, ``self_s``,
                ``buffer_fill``).
        """
        for s in self.stages:
            tag = f"{prefix}/{s.position}_{s.name}"
            writer.add_scalar(f"{tag}/items_per_s", s.items_per_s, step)
            writer.add_scalar(f"{tag}/wait_s", s.wait_s, step)
            writer.add_scalar(f"{tag}/self_s", s.self_s, step)
            if s.fill is not None:
                writer.add_scalar(f"{tag}/buffer_fill", s.fill[1], step)

    def __str__(self) -> str:
        head = ["#", "stage", "items", "items/s", "total s", "self s", "wait s",
                "fill min/mean/max", "workers (busy)"]
        rows = []
        for s in self.stages:
            fill = "-" if s.fill is None else "/".join(f"{v:.2f}" for v in s.fill)
            workers = "-"
            if s.workers:
                busy = (s.worker_s or 0.0) / (s.workers * self.wall_s) if self.wall_s else 0.0
                workers = f"{s.workers} ({busy:.0%})"
            rows.append([str(s.position), s.name, str(s.items), f"{s.items_per_s:,.1f}",
                         f"{s.total_s:.3f}", f"{s.self_s:.3f}", f"{s.wait_s:.3f}", fill, workers])
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
        lines = ["  ".join(c.ljust(w) if i == 1 else c.rjust(w)
                           for i, (c, w) in enumerate(zip(r, widths))) for r in [head, *rows]]
        lines.insert(1, "  ".join("-" * w for w in widths))
        lines.append(f"wall time {self.wall_s:.3f} s")
        lines.append(f"bottleneck: {self.bottleneck}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"StatsReport({len(self.stages)} stages, bottleneck={self.bottleneck!r})"
