"""Workloads shared by bench_core.py and its peer script, so both run the same code.

Standard library only: the PaddlePaddle environment imports this file too.
"""

from __future__ import annotations

N_ITEMS = 1_000_000
SHUFFLE_BUFFER = 10_000
BATCH = 128
CPU_ITEMS = 800
CPU_WORK = 60_000


def source():
    """A reader of N_ITEMS small ints."""
    return iter(range(N_ITEMS))


def inc(x):
    """The trivial per-item mapper."""
    return x + 1


def cpu_bound(x):
    """A CPU-bound pure-Python mapper (holds the GIL for its whole run)."""
    acc = 0
    for i in range(CPU_WORK):
        acc = (acc + i * x) % 1_000_003
    return acc


def cpu_source():
    """A reader of CPU_ITEMS ints for the CPU-bound mapper."""
    return iter(range(CPU_ITEMS))
