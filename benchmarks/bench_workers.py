"""Worker processes: feedline ``map(fn, num_workers=N)`` vs PyTorch's ``DataLoader(num_workers=N)``.

Run: python benchmarks/bench_workers.py [--quick]   (results -> benchmarks/results/workers.md)

Side by side in one run, on the same functions:

1. Throughput of a CPU-bound numpy/Python mapper producing 600 KB float32 arrays
   (:func:`augment`): feedline ``workers=2`` vs ``DataLoader(num_workers=2)``, and feedline's
   own 1-worker rate. Both pools are warm (``persistent_workers=True`` for the DataLoader);
   the consumer reads one element of every array. Items one at a time
   (``batch_size=None``), the DataLoader's most direct equivalent of ``map``.
2. Per-item overhead: a trivial map (``x + 1`` on ints) through 2 workers, items/s.
3. Time to first batch from a fresh pool of 2 workers: a batch of 32 arrays from
   :func:`augment` (feedline ``map(num_workers=2).batch(32, collate="numpy")`` vs
   ``DataLoader(batch_size=32, num_workers=2)``), and the first item of the trivial map
   (start-up cost alone); feedline with ``start_method="spawn"`` beside it, to show why
   ``fork`` is the default.

torch comes from the same environment as feedline (it is an optional extra); without it the
DataLoader rows read "not installed".
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from feedline import Dataset  # noqa: E402
from feedline.dataset.parallel_map import ParallelMapDataset  # noqa: E402

import harness  # noqa: E402

try:  # noqa: SIM105
    import torch
    from torch.utils.data import DataLoader
except ImportError:  # pragma: no cover - torch is optional
    torch = None


def augment(i: int) -> np.ndarray:
    """CPU-bound numpy + Python work producing a 600 KB float32 image (200 x 250 x 3)."""
    rng = np.random.default_rng(i)
    img = rng.standard_normal((200, 250, 3), dtype=np.float32)
    for _ in range(3):
        img = np.tanh(img * np.float32(1.1) + np.float32(0.1))
    acc = 0.0
    for row in range(200):
        acc += float(img[row, row % 250, 0])
    img[0, 0, 0] = acc
    return img


def inc(i: int) -> int:
    return i + 1


class MapStyle:
    """The same function as a map-style torch dataset."""

    def __init__(self, n: int, fn) -> None:
        self.n, self.fn = n, fn

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        return self.fn(i)


def consume_arrays(iterable, n: int) -> None:
    count = 0
    for x in iterable:
        float(x[0, 0, 0])
        count += 1
    assert count == n, count


def consume_items(iterable, n: int) -> None:
    count = sum(1 for _ in iterable)
    assert count == n, count


def throughput(n_items: int, repeat: int) -> dict[str, float | None]:
    rates: dict[str, float | None] = {}
    serial = harness.timed(lambda: consume_arrays(map(augment, range(n_items)), n_items),
                           repeat=1, warmup=0)
    rates["in-thread"] = n_items / serial
    for workers in (1, 2):
        ds = Dataset.range(n_items).map(augment, num_workers=workers)
        t = harness.timed(lambda ds=ds: consume_arrays(ds, n_items), repeat=repeat)
        ds.close()
        rates[f"feedline-{workers}"] = n_items / t
    rates["dataloader-2"] = None
    if torch is not None:
        loader = DataLoader(MapStyle(n_items, augment), batch_size=None, num_workers=2,
                            persistent_workers=True)
        t = harness.timed(lambda: consume_arrays(loader, n_items), repeat=repeat)
        rates["dataloader-2"] = n_items / t
        del loader
    return rates


def overhead(n_items: int, repeat: int) -> dict[str, float | None]:
    rates: dict[str, float | None] = {}
    ds = Dataset.range(n_items).map(inc, num_workers=2)
    rates["feedline"] = n_items / harness.timed(lambda: consume_items(ds, n_items), repeat=repeat)
    ds.close()
    rates["dataloader"] = None
    if torch is not None:
        loader = DataLoader(MapStyle(n_items, inc), batch_size=None, num_workers=2,
                            persistent_workers=True)
        rates["dataloader"] = n_items / harness.timed(lambda: consume_items(loader, n_items),
                                                      repeat=repeat)
        del loader
    return rates


def _median_first(make, trials: int) -> float:
    """Median seconds from building a fresh pipeline to its first batch."""
    times = []
    for _ in range(trials):
        pipeline, cleanup = make()
        t0 = time.perf_counter()
        it = iter(pipeline)
        next(it)
        times.append(time.perf_counter() - t0)
        cleanup(it)
    return statistics.median(times)


def first_batch(trials: int) -> dict[str, float | None]:
    out: dict[str, float | None] = {}

    def feedline(fn, batch, method=None):
        def make():
            ds = ParallelMapDataset(Dataset.range(1000), fn, workers=2, start_method=method)
            pipeline = ds.batch(batch, collate="numpy") if batch else ds

            def cleanup(it):
                it.close()
                ds.close()

            return pipeline, cleanup

        return make

    def loader(fn, batch):
        def make():
            dl = DataLoader(MapStyle(1000, fn), batch_size=batch, num_workers=2)

            def cleanup(it):
                del it

            return dl, cleanup

        return make

    out["feedline-batch"] = _median_first(feedline(augment, 32), trials)
    out["feedline-spawn-batch"] = _median_first(feedline(augment, 32, "spawn"), max(1, trials // 2))
    out["feedline-item"] = _median_first(feedline(inc, None), trials)
    out["feedline-spawn-item"] = _median_first(feedline(inc, None, "spawn"), max(1, trials // 2))
    out["dataloader-batch"] = out["dataloader-item"] = None
    if torch is not None:
        out["dataloader-batch"] = _median_first(loader(augment, 32), trials)
        out["dataloader-item"] = _median_first(loader(inc, None), trials)
    return out


def _ms(seconds: float | None) -> str:
    return harness.NOT_INSTALLED if seconds is None else f"{seconds * 1000:.1f} ms"


def _speed(ours: float | None, theirs: float | None) -> str:
    """How many times faster ours is, for durations (lower is better)."""
    if ours is None or theirs is None:
        return harness.NOT_INSTALLED
    return harness.ratio(1 / ours, 1 / theirs)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    args = parser.parse_args(argv)
    n_arrays, n_small, repeat, trials = (60, 3000, 1, 3) if args.quick else (800, 50_000, 3, 7)

    thr = throughput(n_arrays, repeat)
    ovh = overhead(n_small, repeat)
    first = first_batch(trials)

    torch_version = torch.__version__ if torch is not None else harness.NOT_INSTALLED
    dl2 = thr["dataloader-2"]
    fl1, fl2 = thr["feedline-1"], thr["feedline-2"]
    table1 = harness.markdown_table(
        ["pipeline", "arrays/s", "vs DataLoader(2)", "vs feedline 1 worker"],
        [
            ["in-thread `map(augment)` (no workers)", harness.fmt_rate(thr["in-thread"]),
             harness.ratio(thr["in-thread"], dl2), harness.ratio(thr["in-thread"], fl1)],
            ["feedline `map(augment, num_workers=1)`", harness.fmt_rate(fl1), harness.ratio(fl1, dl2),
             "1.00x"],
            ["feedline `map(augment, num_workers=2)`", harness.fmt_rate(fl2), harness.ratio(fl2, dl2),
             harness.ratio(fl2, fl1)],
            [f"DataLoader(num_workers=2) (torch {torch_version})", harness.fmt_rate(dl2), "1.00x"
             if dl2 else harness.NOT_INSTALLED, harness.ratio(dl2, fl1)],
        ],
    )
    table2 = harness.markdown_table(
        ["pipeline", "items/s", "vs DataLoader(2)"],
        [
            ["feedline `map(inc, num_workers=2)`", harness.fmt_rate(ovh["feedline"]),
             harness.ratio(ovh["feedline"], ovh["dataloader"])],
            [f"DataLoader(num_workers=2, batch_size=None) (torch {torch_version})",
             harness.fmt_rate(ovh["dataloader"]), "1.00x" if ovh["dataloader"] else
             harness.NOT_INSTALLED],
        ],
    )
    table3 = harness.markdown_table(
        ["first output from a fresh pool of 2 workers", "feedline (fork)", "feedline (spawn)",
         "DataLoader", "feedline (fork) vs DataLoader"],
        [
            ["batch of 32 `augment` arrays", _ms(first["feedline-batch"]),
             _ms(first["feedline-spawn-batch"]), _ms(first["dataloader-batch"]),
             _speed(first["feedline-batch"], first["dataloader-batch"])],
            ["one item of the trivial map (start-up alone)", _ms(first["feedline-item"]),
             _ms(first["feedline-spawn-item"]), _ms(first["dataloader-item"]),
             _speed(first["feedline-item"], first["dataloader-item"])],
        ],
    )
    size = "quick smoke sizes" if args.quick else "full sizes"
    markdown = f"""## Worker processes vs DataLoader

`python benchmarks/bench_workers.py` ({size}). A CPU-bound numpy/Python mapper producing
600 KB float32 arrays (`augment` in the script) over {n_arrays} items, warm pools, the
consumer reading one element of each array; goals: feedline `workers=2` at least 1.3x
`DataLoader(num_workers=2)` and at least 1.7x feedline's own 1-worker rate.

{table1}

Per-item overhead: a trivial map (`x + 1`) over {n_small:,} ints through 2 workers.

{table2}

Time to the first output from a fresh pool (median of {trials} tries; feedline starts its
workers with `fork` by default, `spawn` shown for comparison).

{table3}
"""
    path = harness.write_section("workers", markdown)
    print(markdown)
    print(f"[written to {path}]")


if __name__ == "__main__":
    main()
