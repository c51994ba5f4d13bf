"""Peer side of bench_tfrecord.py: tf.data TFRecord reading and tf.io.parse_example.

Runs under the TensorFlow peer's Python (``harness.run_peer("tensorflow", ...)``)::

    python benchmarks/peers/tensorflow_tfrecord.py read REPEAT BATCH FILE [FILE ...]
    python benchmarks/peers/tensorflow_tfrecord.py parse REPEAT BATCH FILE

``read`` iterates ``tf.data.TFRecordDataset(FILE).batch(BATCH)`` over each file (CRCs are
always checked by TensorFlow); ``parse`` loads the serialized Examples of FILE into memory
and times ``tf.io.parse_example`` over batches of BATCH with the fixture's spec. Prints one
JSON object on its last line: best of REPEAT timed runs after one warm-up, in seconds.
"""

import json
import sys

import tensorflow as tf
from peer_timing import best_of

SPEC = {
    "label": tf.io.FixedLenFeature([], tf.int64),
    "big": tf.io.FixedLenFeature([2], tf.int64),
    "score": tf.io.FixedLenFeature([], tf.float32, default_value=-1.0),
    "embedding": tf.io.FixedLenFeature([4], tf.float32),
    "ids": tf.io.VarLenFeature(tf.int64),
    "tags": tf.io.VarLenFeature(tf.string),
    "name": tf.io.FixedLenFeature([], tf.string),
    "image": tf.io.FixedLenFeature([], tf.string),
}  # the fixture's spec without its Ragged view of "ids" (TF refuses a key both sparse and ragged)


def read(repeat, batch, paths):
    out = {}
    for path in paths:

        def run(path=path):
            count = 0
            for b in tf.data.TFRecordDataset(path).batch(batch):
                count += int(b.shape[0])
            return count

        seconds, count = best_of(repeat, run)
        out[path] = {"seconds": seconds, "records": count}
    return out


def parse(repeat, batch, path):
    serialized = [r.numpy() for r in tf.data.TFRecordDataset(path)]
    batches = [tf.constant(serialized[i : i + batch]) for i in range(0, len(serialized), batch)]

    def run():
        for b in batches:
            tf.io.parse_example(b, SPEC)
        return len(serialized)

    seconds, count = best_of(repeat, run)
    return {"seconds": seconds, "examples": count}


def main():
    mode, repeat, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    result = {"tensorflow": tf.__version__}
    if mode == "read":
        result["files"] = read(repeat, batch, sys.argv[4:])
    else:
        result["parse"] = parse(repeat, batch, sys.argv[4])
    print(json.dumps(result))


if __name__ == "__main__":
    main()
