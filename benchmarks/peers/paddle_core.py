"""Peer side of bench_core.py: the same workloads through paddle.reader (PaddlePaddle)."""

import json
import os
import sys
import time
import warnings

warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import paddle  # noqa: E402

import core_workloads as w  # noqa: E402


def best(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def pipeline():
    r = paddle.batch(paddle.reader.map_readers(w.inc, paddle.reader.shuffle(w.source, w.SHUFFLE_BUFFER)), w.BATCH)
    n = sum(len(b) for b in r())
    assert n == w.N_ITEMS


def xmap():
    r = paddle.reader.xmap_readers(w.cpu_bound, w.cpu_source, 2, 64, order=False)
    assert sum(1 for _ in r()) == w.CPU_ITEMS


def serial():
    assert sum(1 for _ in map(w.cpu_bound, w.cpu_source())) == w.CPU_ITEMS


repeat = int(sys.argv[1]) if len(sys.argv) > 1 else 3
out = {
    "version": paddle.__version__,
    "pipeline_s": best(pipeline, repeat),
    "xmap2_s": best(xmap, 1),
    "serial_s": best(serial, 1),
}
print(json.dumps(out))
