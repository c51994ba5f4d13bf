"""Pick worker counts, chunk sizes and buffer depths by measuring (tf.data's AUTOTUNE, simply).

Everything here is a small pure function of measured times, so what "auto" does can be
read and tested:

``num_workers="auto"`` (:class:`WorkerCalibration`, used by
:mod:`feedline.dataset.parallel_map`)
    The first iteration starts **one** worker and sends it the first
    :data:`CALIBRATION_ITEMS` items. While they are yielded it measures

    * ``item_seconds``: the function's time per item inside the worker, and
    * ``consumer_seconds``: the consumer's time per item — the time between two
      ``next()`` calls spent outside the stage plus the stage's own work in the
      consumer's thread (pulling from its input, decoding results), waiting excluded.

    It then starts :func:`choose_workers` ``- 1`` more workers: the smallest ``n`` whose
    production rate ``n / item_seconds`` covers the consumer's rate
    ``1 / consumer_seconds`` with 10 % headroom, at most the CPU budget (the CPUs this
    process may run on, :func:`cpu_budget`). The choice is kept for later iterations of
    the same dataset. Because the count depends on timing, a mapper that draws random
    numbers is reproducible only with an explicit ``num_workers=N``.

Chunk size (:func:`choose_chunk`)
    Items go to a worker in chunks so that small items do not pay a message each: a
    chunk holds about :data:`CHUNK_SECONDS` of work, at most :data:`MAX_CHUNK` items
    and at most ``bytes_cap`` bytes of results. It only changes which message carries an
    item, never which worker maps it.

Shared-memory ring (the memory budget)
    Each worker has 3 result blocks (one per chunk in flight) that grow to the largest
    chunk they carried. :mod:`~feedline.dataset.parallel_map` passes
    ``bytes_cap = min(1 MiB, shm_budget / (3 * workers))`` — big items gain nothing from
    sharing a message — so the ring stays near ``3 * workers * max(1 MiB, item size)``;
    ``shm_budget`` defaults to 1 GiB or a quarter of the free ``/dev/shm``. Before the
    workers start, ``/dev/shm`` must have room for the initial ring (1 MiB per block) or
    the stage falls back to pipes (:mod:`feedline.runtime.workers`).

Prefetch depth (:func:`choose_prefetch_depth`)
    For ``prefetch("auto")``: enough items to ride out the producer's slow items.

>>> choose_workers(item_seconds=0.010, consumer_seconds=0.004, max_workers=8)
3
>>> choose_workers(item_seconds=0.010, consumer_seconds=0.0, max_workers=2)
2
>>> choose_chunk(item_seconds=1e-6, item_bytes=100, bytes_cap=1 << 20)
256
>>> choose_chunk(item_seconds=0.01, item_bytes=600_000, bytes_cap=1 << 20)
1
>>> choose_prefetch_depth(produce_seconds=[0.002] * 9 + [0.05], consume_seconds=0.01)
6
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

__all__ = [
    "CALIBRATION_ITEMS",
    "CHUNK_SECONDS",
    "MAX_CHUNK",
    "cpu_budget",
    "choose_workers",
    "choose_chunk",
    "running_mean",
    "choose_prefetch_depth",
    "WorkerCalibration",
]

#: Items mapped by a single worker before ``num_workers="auto"`` decides.
CALIBRATION_ITEMS = 8
#: Target worker time per chunk message.
CHUNK_SECONDS = 0.002
#: Most items per chunk message.
MAX_CHUNK = 256
_HEADROOM = 1.1


def cpu_budget() -> int:
    """CPUs this process may run on (``sched_getaffinity``; ``os.cpu_count()`` elsewhere).

    >>> import os
    >>> 1 <= cpu_budget() <= (os.cpu_count() or 1)
    True
    """
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def choose_workers(*, item_seconds: float, consumer_seconds: float, max_workers: int) -> int:
    """Smallest ``n`` in ``1..max_workers`` with ``n / item_seconds >= 1.1 / consumer_seconds``
    (``max_workers`` when none is enough or the consumer takes no time).

    Args:
        item_seconds: the mapped function's time per item inside one worker; ``<= 0``
            gives 1.
        consumer_seconds: the consumer's time per item; ``<= 0`` gives ``max_workers``.
        max_workers: the upper bound (values below 1 count as 1).

    >>> choose_workers(item_seconds=0.01, consumer_seconds=0.004, max_workers=8)  # 3 / 0.01 >= 1.1 / 0.004
    3
    >>> choose_workers(item_seconds=1.0, consumer_seconds=0.001, max_workers=4)   # never enough
    4
    """
    max_workers = max(1, int(max_workers))
    if item_seconds <= 0:
        return 1
    if consumer_seconds <= 0:
        return max_workers
    n = math.ceil(_HEADROOM * item_seconds / consumer_seconds - 1e-9)
    return min(max(n, 1), max_workers)


def running_mean(old: float | None, new: float) -> float:
    """``new`` folded into the running measurement ``old`` (``new`` itself when nothing
    was measured yet): recent chunks weigh 30%, so the tuning follows a drift quickly
    without jumping on one odd chunk.

    Args:
        old: the measurement so far, or ``None`` when nothing was measured yet.
        new: the latest measurement.

    >>> running_mean(None, 2.0), running_mean(2.0, 12.0)
    (2.0, 5.0)
    """
    return new if old is None else 0.7 * old + 0.3 * new


def choose_chunk(
    *,
    item_seconds: float | None,
    item_bytes: float | None,
    bytes_cap: int,
    max_items: int = MAX_CHUNK,
    target_seconds: float = CHUNK_SECONDS,
) -> int:
    """Items per chunk: ``target_seconds / item_seconds``, clamped to ``1..max_items`` and
    to ``bytes_cap / item_bytes``; 1 before anything was measured.

    Args:
        item_seconds: measured time per item; ``None`` (not measured yet) gives 1, ``<= 0``
            gives ``max_items`` before the bytes cap.
        item_bytes: measured result size per item; ``None`` or ``<= 0`` applies no bytes cap.
        bytes_cap: most result bytes one chunk may carry.
        max_items: most items per chunk.
        target_seconds: worker time one chunk should take.

    >>> choose_chunk(item_seconds=None, item_bytes=None, bytes_cap=1 << 20)   # nothing measured yet
    1
    >>> choose_chunk(item_seconds=1e-6, item_bytes=1000, bytes_cap=10_000)   # capped at 10 items by bytes
    10
    """
    if item_seconds is None:
        return 1
    n = max_items if item_seconds <= 0 else int(target_seconds / item_seconds)
    if item_bytes and item_bytes > 0:
        n = min(n, int(bytes_cap // item_bytes))
    return max(1, min(n, max_items))


def choose_prefetch_depth(
    *,
    produce_seconds: float | Sequence[float],
    consume_seconds: float,
    item_bytes: int = 0,
    memory_budget: int = 256 << 20,
    max_depth: int = 64,
) -> int:
    """Buffer depth for a prefetch stage.

    The depth is
    ``ceil(slowest_produce / consume) + 1`` — enough ready items to cover the slowest
    item seen while the consumer keeps taking one per ``consume_seconds`` — at least 2,
    at most ``max_depth`` and at most ``memory_budget // item_bytes``. A producer slower
    on average than the consumer cannot be helped by depth; it gets 2.

    Args:
        produce_seconds: the producer's time per item (a mean, or measured samples — the
            slowest is used); no samples gives 2.
        consume_seconds: the consumer's mean time per item; ``<= 0`` gives 2.
        item_bytes: size of one item; ``0`` applies no memory cap, else the depth is at
            most ``memory_budget // item_bytes`` (and at least 1).
        memory_budget: bytes the buffered items may take (with ``item_bytes``).
        max_depth: the largest depth returned (before the memory cap).

    >>> choose_prefetch_depth(produce_seconds=[0.002, 0.002, 0.002, 0.03], consume_seconds=0.01)
    4
    >>> choose_prefetch_depth(produce_seconds=[0.01, 0.05], consume_seconds=0.01)  # slower on average
    2
    >>> choose_prefetch_depth(produce_seconds=0.03, consume_seconds=0.05, item_bytes=200 << 20)  # memory cap
    1
    """
    samples = [produce_seconds] if isinstance(produce_seconds, (int, float)) else list(produce_seconds)
    if not samples:
        return 2
    mean = sum(samples) / len(samples)
    slowest = max(samples)
    if consume_seconds <= 0 or mean > consume_seconds:
        depth = 2
    else:
        depth = math.ceil(slowest / consume_seconds - 1e-9) + 1
    depth = max(2, min(depth, max_depth))
    if item_bytes > 0:
        depth = max(1, min(depth, memory_budget // item_bytes))
    return depth


class WorkerCalibration:
    """Collects the measurements of ``num_workers="auto"`` and decides once enough came in.

    Args:
        items: how many items both the worker and the consumer must have been measured
            on before :meth:`ready` is true.
        max_workers: the most workers :meth:`decide` returns; ``None`` (or 0) uses
            :func:`cpu_budget`.

    >>> cal = WorkerCalibration(items=2, max_workers=4)
    >>> cal.add_worker(items=2, seconds=0.020)          # 10 ms per item in the worker
    >>> cal.add_consumer(0.008, items=2)                  # 4 ms per item in the consumer
    >>> cal.decide()
    3
    """

    def __init__(self, *, items: int = CALIBRATION_ITEMS, max_workers: int | None = None) -> None:
        self.items = items
        self.max_workers = max_workers or cpu_budget()
        self._worker_items = 0
        self._worker_seconds = 0.0
        self._consumer = 0
        self._consumer_seconds = 0.0

    def add_worker(self, *, items: int, seconds: float) -> None:
        """Add worker time: ``seconds`` spent by the function on ``items`` items.

        Args:
            items: items the worker mapped in that time.
            seconds: the function's time on those items inside the worker.
        """
        self._worker_items += items
        self._worker_seconds += seconds

    def add_consumer(self, seconds: float, *, items: int = 0) -> None:
        """Add consumer time.

        Args:
            seconds: consumer time to add.
            items: the items that time covered (0: more time for items already counted
                or about to be).
        """
        self._consumer += items
        self._consumer_seconds += seconds

    def ready(self) -> bool:
        return self._worker_items >= self.items and self._consumer >= self.items

    def decide(self) -> int:
        item = self._worker_seconds / max(1, self._worker_items)
        consumer = self._consumer_seconds / max(1, self._consumer)
        return choose_workers(item_seconds=item, consumer_seconds=consumer,
                              max_workers=self.max_workers)
