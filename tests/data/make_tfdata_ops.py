"""Write tests/data/tfdata_ops/expected.json: tf.data's output of interleave, window,
group_by_window, unbatch and scan on generated inputs, for tests/test_tfdata_ops.py.

Run once with TensorFlow, in its own environment (TensorFlow is not a dependency):

    python3.11 -m venv /tmp/tf && /tmp/tf/bin/pip install tensorflow-cpu
    /tmp/tf/bin/python tests/data/make_tfdata_ops.py

The inputs come from a seeded generator, so a rerun with the same TensorFlow version
writes the same file.
"""

from __future__ import annotations

import json
import os
import random

import tensorflow as tf

CASES = 150
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tfdata_ops", "expected.json")


def ints(ds):
    return [int(x) for x in ds.as_numpy_iterator()]


def interleave_case(rng):
    lengths = [rng.randint(0, 5) for _ in range(rng.randint(0, 6))]
    cycle, block = rng.randint(1, 4), rng.randint(1, 3)
    lens = tf.constant(lengths + [0], dtype=tf.int64)
    ds = tf.data.Dataset.range(len(lengths)).interleave(
        lambda i: tf.data.Dataset.range(100 * i, 100 * i + tf.gather(lens, i)),
        cycle_length=cycle, block_length=block)
    return {"lengths": lengths, "cycle_length": cycle, "block_length": block,
            "expected": ints(ds)}


def window_case(rng):
    n, size, shift = rng.randint(0, 12), rng.randint(1, 5), rng.randint(1, 5)
    stride, drop = rng.randint(1, 3), rng.random() < 0.5
    ds = tf.data.Dataset.range(n).window(size, shift=shift, stride=stride,
                                         drop_remainder=drop)
    ds = ds.flat_map(lambda w: w.batch(1000))
    return {"n": n, "size": size, "shift": shift, "stride": stride, "drop_remainder": drop,
            "expected": [[int(v) for v in w] for w in ds.as_numpy_iterator()]}


def group_by_window_case(rng):
    items = [rng.randint(0, 9) for _ in range(rng.randint(0, 20))]
    keys, size = rng.randint(1, 4), rng.randint(1, 4)
    by_key = rng.random() < 0.5  # window_size_func(key) = key + 1 instead of a fixed size
    options = ({"window_size_func": lambda k: k + 1} if by_key else {"window_size": size})
    ds = tf.data.Dataset.from_tensor_slices(tf.constant(items, dtype=tf.int64)).group_by_window(
        key_func=lambda x: x % keys, reduce_func=lambda k, w: w.batch(1000), **options)
    return {"items": items, "keys": keys, "window_size": None if by_key else size,
            "expected": [[int(v) for v in w] for w in ds.as_numpy_iterator()]}


def unbatch_case(rng):
    batches = [[rng.randint(0, 99) for _ in range(rng.randint(0, 4))]
               for _ in range(rng.randint(0, 6))]
    ds = tf.data.Dataset.from_generator(
        lambda: iter(batches), output_signature=tf.TensorSpec([None], tf.int64)).unbatch()
    return {"batches": batches, "expected": ints(ds)}


def scan_case(rng):
    items = [rng.randint(-5, 5) for _ in range(rng.randint(0, 12))]
    initial = rng.randint(-3, 3)
    # state' = state + x, output = state * x - 1
    ds = tf.data.Dataset.from_tensor_slices(tf.constant(items, dtype=tf.int64)).scan(
        tf.constant(initial, dtype=tf.int64), lambda s, x: (s + x, s * x - 1))
    return {"items": items, "initial": initial, "expected": ints(ds)}


def main() -> None:
    rng = random.Random(20261127)
    cases = {
        "tensorflow": tf.__version__,
        "interleave": [interleave_case(rng) for _ in range(CASES)],
        "window": [window_case(rng) for _ in range(CASES)],
        "group_by_window": [group_by_window_case(rng) for _ in range(CASES)],
        "unbatch": [unbatch_case(rng) for _ in range(CASES)],
        "scan": [scan_case(rng) for _ in range(CASES)],
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(cases, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
