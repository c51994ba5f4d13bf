"""Core engine vs paddle.reader: per-item overhead and CPU-bound mapping with 2 workers.

Run: python benchmarks/bench_core.py   (results -> benchmarks/results/core.md)

1. shuffle(10k buffer) -> map(x + 1) -> batch(128) over 1M small ints: feedline's
   paddle-compatible reader API and its Dataset API vs paddle.reader in one run.
2. A CPU-bound pure-Python mapper on 400 items: feedline ``map(workers=2)`` /
   ``xmap_readers(process_num=2)`` vs feedline's own 1-worker and in-thread rates, and
   paddle's (threaded, GIL-bound) ``xmap_readers`` beside it.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import feedline.reader as reader  # noqa: E402
from feedline import Dataset, batch  # noqa: E402

import core_workloads as w  # noqa: E402
import harness  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def feedline_reader_api():
    r = batch(reader.map_readers(w.inc, reader.shuffle(w.source, w.SHUFFLE_BUFFER)), w.BATCH)
    assert sum(len(b) for b in r()) == w.N_ITEMS


def feedline_dataset_api():
    ds = Dataset.from_reader(w.source).shuffle(w.SHUFFLE_BUFFER).map(w.inc).batch(w.BATCH)
    assert sum(len(b) for b in ds) == w.N_ITEMS


def feedline_workers(n):
    def run():
        ds = Dataset.from_reader(w.cpu_source).map(w.cpu_bound, num_workers=n)
        assert sum(1 for _ in ds) == w.CPU_ITEMS

    return run


def feedline_xmap():
    r = reader.xmap_readers(w.cpu_bound, w.cpu_source, 2, 64, order=False)
    assert sum(1 for _ in r()) == w.CPU_ITEMS


def serial():
    assert sum(1 for _ in map(w.cpu_bound, w.cpu_source())) == w.CPU_ITEMS


def interleaved(fns, rounds):
    """Best time of each function over ``rounds`` rounds that run each once, in turn."""
    best = [float("inf")] * len(fns)
    for fn in fns:
        fn()  # warm-up
    for _ in range(rounds):
        best = [min(b, harness.timed(fn, repeat=1, warmup=0)) for b, fn in zip(best, fns)]
    return best


def main() -> None:
    repeat = 3
    peer = harness.run_peer("paddle", os.path.join(HERE, "peers", "paddle_core.py"), repeat)
    t_reader, t_dataset = interleaved([feedline_reader_api, feedline_dataset_api], repeat)
    # one run of each per round, best per variant, so that drift in this machine's speed
    # hits every variant alike
    t_serial, t_w1, t_w2, t_xmap = interleaved(
        [serial, feedline_workers(1), feedline_workers(2), feedline_xmap], repeat)

    n = w.N_ITEMS
    paddle_rate = n / peer["pipeline_s"] if peer else None
    rows = [
        ["feedline.reader + feedline.batch", harness.fmt_rate(n / t_reader),
         harness.ratio(n / t_reader, paddle_rate)],
        ["feedline Dataset API", harness.fmt_rate(n / t_dataset),
         harness.ratio(n / t_dataset, paddle_rate)],
        [f"paddle.reader + paddle.batch ({peer['version'] if peer else harness.NOT_INSTALLED})",
         harness.fmt_rate(paddle_rate), harness.ratio(paddle_rate, paddle_rate)],
    ]
    m = w.CPU_ITEMS
    rows2 = [
        ["in-thread (plain map)", harness.fmt_rate(m / t_serial), "1.00x"],
        ["feedline map(workers=1)", harness.fmt_rate(m / t_w1), harness.ratio(t_serial / t_w1, 1.0)],
        ["feedline map(workers=2)", harness.fmt_rate(m / t_w2), harness.ratio(t_serial / t_w2, 1.0)],
        ["feedline.reader.xmap_readers(process_num=2)", harness.fmt_rate(m / t_xmap),
         harness.ratio(t_serial / t_xmap, 1.0)],
    ]
    if peer:
        rows2.append(["paddle.reader.xmap_readers(process_num=2) (threads)",
                      harness.fmt_rate(m / peer["xmap2_s"]),
                      harness.ratio(peer["serial_s"] / peer["xmap2_s"], 1.0)
                      + " of paddle's own in-thread run"])
    md = "\n".join([
        "## Core engine vs paddle.reader",
        "",
        f"Per-item overhead: `shuffle({w.SHUFFLE_BUFFER}) -> map(x + 1) -> batch({w.BATCH})` over "
        f"{n:,} ints, best of {repeat}. Ratio = items/s relative to paddle.reader (higher is better).",
        "",
        harness.markdown_table(["pipeline", "items/s", "vs paddle.reader"], rows),
        "",
        f"CPU-bound pure-Python mapper ({w.CPU_WORK:,} loop steps per item, {m} items), "
        f"best of {repeat} interleaved rounds. Ratio = speed-up over the in-thread run.",
        "",
        harness.markdown_table(["mapper", "items/s", "speed-up"], rows2),
        "",
        f"feedline 2 workers vs 1 worker: {t_w1 / t_w2:.2f}x.",
        "",
        "Command: `python benchmarks/bench_core.py`",
    ])
    harness.write_section("core", md)
    print(md)


if __name__ == "__main__":
    main()
