"""How steady this machine is: the same pure-Python work timed repeatedly.

Run: python benchmarks/bench_noise.py   (results -> benchmarks/results/00-noise.md)

Ratios in the other sections compare runs made seconds apart; when the machine's speed
drifts between them, a ratio moves by as much. This section measures that drift: one
fixed CPU-bound workload (the core benchmark's mapper, 100 items), timed 15 times in a
row in one process, reported as min, median and max.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import core_workloads as w  # noqa: E402
import harness  # noqa: E402


def main() -> None:
    times = []
    for _ in range(15):
        t0 = time.perf_counter()
        for i in range(100):
            w.cpu_bound(i)
        times.append(time.perf_counter() - t0)
    lo, mid, hi = min(times), statistics.median(times), max(times)
    md = "\n".join([
        "## Machine steadiness (read the ratios below with this in mind)",
        "",
        "The same CPU-bound pure-Python work (100 items of the core benchmark's mapper) timed "
        "15 times in a row:",
        "",
        harness.markdown_table(["min", "median", "max", "max / min"],
                               [[f"{lo:.3f} s", f"{mid:.3f} s", f"{hi:.3f} s", f"{hi / lo:.2f}x"]]),
        "",
        f"A ratio between two runs made seconds apart can move by up to {hi / lo:.2f}x from "
        "the machine alone; the benchmarks interleave or repeat their variants and keep the "
        "best time of each to limit this.",
        "",
        "Command: `python benchmarks/bench_noise.py`",
    ])
    harness.write_section("00-noise", md)
    print(md)


if __name__ == "__main__":
    main()
