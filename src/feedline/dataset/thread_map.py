"""``map(fn, num_workers=N, backend="thread")``: apply ``fn`` in ``N`` threads of this process.

For functions that spend their time outside the GIL — JPEG decoding (libjpeg-turbo),
most numpy work, zlib, file and network reads — threads run in parallel without the
cost of processes: no pickling, no copies of the results, no start-up. Pure-Python
functions hold the GIL and should use the default process backend instead.

This is the worker-stage engine of :mod:`feedline.dataset.parallel_map` over a
:class:`~feedline.runtime.executor.ThreadExecutor`: order, ``buffer_size``, state,
``timeout`` and statistics behave exactly as with processes; the differences are

* an exception raised by ``fn`` is re-raised in the consumer as the same exception
  object, with its original traceback and a note naming the stage;
* with ``timeout=seconds`` a thread stuck in ``fn`` cannot be stopped from outside: the
  call is abandoned (its thread ends when ``fn`` returns) and ``close()`` does not wait
  for it;
* the threads stop when the iteration ends or is closed (named ``feedline-<stage>-<k>``);
* threads share ``random``/numpy/torch's global generators, so the stage does not seed
  them; draw from :func:`feedline.runtime.seeding.item_rng` for per-item randomness that
  is identical on every backend.

``num_workers="auto"`` uses one thread more than the machine has cores, so that the
cores stay busy while one thread holds the GIL between two GIL-free calls.

>>> import zlib
>>> ds = Dataset.range(6).map(lambda i: zlib.crc32(bytes(i)), num_workers=2, backend="thread")
>>> ds.to_list() == [zlib.crc32(bytes(i)) for i in range(6)]
True
"""

from __future__ import annotations

import os
from collections.abc import Callable

from feedline.dataset.base import Dataset
from feedline.dataset.parallel_map import ParallelMapDataset

__all__ = ["ThreadMapDataset"]


class ThreadMapDataset(ParallelMapDataset):
    """``fn`` over the parent's items in a pool of threads; see the module docstring.

    Args:
        parent: the dataset read.
        fn: the mapped function.
        workers: the number of threads, or ``"auto"``: one more than the machine's cores.
        ordered: ``True`` yields in input order; ``False`` as results are ready.
        buffer_size: the most items in flight (``None``: three chunks per thread).
        name: the stage's name (``None``: ``map(<fn's name>)``).
        timeout: seconds per item before :class:`~feedline.exceptions.StageTimeoutError`;
            the stuck call is abandoned, not stopped.
        seed: seeds :func:`feedline.runtime.seeding.item_rng` for each item from
            ``(seed, epoch, position)``; the global generators are not seeded (the
            threads share them).

    >>> ds = Dataset.range(4).map(abs, num_workers=2, backend="thread")
    >>> type(ds).__name__, ds.name, ds.to_list()
    ('ThreadMapDataset', 'map(abs) [2 threads]', [0, 1, 2, 3])
    """

    def __init__(self, parent: Dataset, fn: Callable, *, workers: int | str,
                 ordered: bool = True, buffer_size: int | None = None,
                 name: str | None = None, timeout: float | None = None,
                 seed: int | None = None) -> None:
        count = (os.cpu_count() or 1) + 1 if workers == "auto" else workers
        super().__init__(parent, fn, workers=count, ordered=ordered, seed=seed, name=name,
                         buffer_size=buffer_size, timeout=timeout, backend="thread")

    @property
    def name(self) -> str:
        return f"{self._name} [{self.workers} threads]"
