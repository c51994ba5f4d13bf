"""Where stages run: background threads, worker processes, shared memory, statistics.

* :mod:`feedline.runtime.threads` — a bounded background thread (``prefetch``).
* :mod:`feedline.runtime.workers` — a pool of worker processes with failure detection
  and clean shutdown (``map(fn, num_workers=N)``).
* :mod:`feedline.runtime.shm` — the shared-memory transport that carries numpy arrays
  between processes without pickling them.
* :mod:`feedline.runtime.seeding` — deterministic per-worker seeds.
* :mod:`feedline.runtime.stats` — per-stage statistics and the bottleneck line
  (``ds.iterator(stats=True)``).
* :mod:`feedline.runtime.autotune` — worker counts, chunk sizes and buffer depths chosen
  by measuring (``num_workers="auto"``, ``prefetch("auto")``).
"""

__all__: list[str] = []
