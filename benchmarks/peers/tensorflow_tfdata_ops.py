"""Peer side of bench_tfdata_ops.py: tf.data's ``interleave`` and ``group_by_window`` on
the same synthetic inputs, iterated from Python as a training loop reads them.

Runs under the TensorFlow peer's Python (``harness.run_peer("tensorflow", ...)``)::

    python benchmarks/peers/tensorflow_tfdata_ops.py INPUTS PER_INPUT ITEMS

* interleave: ``range(INPUTS).interleave(lambda i: range(i*PER_INPUT, (i+1)*PER_INPUT),
  cycle_length=4, block_length=2)`` (sequential: no ``num_parallel_calls``);
* group_by_window: ``range(ITEMS).group_by_window(key x % 8, reduce w.batch(32),
  window_size=32)``.

Best of three epochs each, checked against the expected counts. Prints one JSON object on
its last line.
"""

import json
import sys
import time

import tensorflow as tf


def best(ds, expected):
    seconds = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        count = 0
        for x in ds:
            count += x.shape[0] if x.shape.rank else 1
        seconds = min(seconds, time.perf_counter() - start)
        if count != expected:
            raise SystemExit(f"expected {expected} items, got {count}")
    return seconds


def main():
    inputs, per_input, items = (int(a) for a in sys.argv[1:4])
    inter = tf.data.Dataset.range(inputs).interleave(
        lambda i: tf.data.Dataset.range(i * per_input, (i + 1) * per_input),
        cycle_length=4, block_length=2)
    grouped = tf.data.Dataset.range(items).group_by_window(
        key_func=lambda x: x % 8, reduce_func=lambda k, w: w.batch(32), window_size=32)
    print(json.dumps({"version": tf.__version__,
                      "interleave_s": best(inter, inputs * per_input),
                      "group_by_window_s": best(grouped, items)}))


if __name__ == "__main__":
    main()
