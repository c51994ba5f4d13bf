"""Timing shared by the peer scripts (they run under a peer's own Python, which has none of
feedline or the benchmark harness; a script's folder is on its ``sys.path``)."""

import time


def best_of(repeat, fn):
    """``(best seconds of repeat timed calls of fn() after one warm-up, the warm-up's result)``."""
    result = fn()  # warm-up
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best, result
