"""Peer side of bench_text_formats.py: tf.data's CsvDataset, FixedLengthRecordDataset and
TextLineDataset.

Runs under the TensorFlow peer's Python (``harness.run_peer("tensorflow", ...)``)::

    python benchmarks/peers/tensorflow_text_formats.py REPEAT BATCH CSV FIXED RECORD_BYTES TEXT

For each file it times a full pass batched by BATCH and a full pass element by element
(the per-element iteration a Python consumer does), best of REPEAT after one warm-up, and
prints one JSON object on its last line: ``{"csv": {"batch": s, "element": s, "rows": n},
...}`` plus ``"tensorflow"``: the version.
"""

import json
import sys

import tensorflow as tf
from peer_timing import best_of

CSV_TYPES = [tf.int32, tf.float32, tf.int32, tf.string, tf.float32]


def passes(make, repeat, batch):
    def batched():
        n = 0
        for b in make().batch(batch):
            n += int(tf.nest.flatten(b)[0].shape[0])
        return n

    def element():
        n = 0
        for _ in make():
            n += 1
        return n

    b_s, rows = best_of(repeat, batched)
    e_s, rows_e = best_of(repeat, element)
    assert rows == rows_e, (rows, rows_e)
    return {"batch": b_s, "element": e_s, "rows": rows}


def main():
    repeat, batch = int(sys.argv[1]), int(sys.argv[2])
    csv_path, fixed_path, record_bytes, text_path = sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6]
    out = {
        "csv": passes(lambda: tf.data.experimental.CsvDataset(csv_path, CSV_TYPES), repeat, batch),
        "fixed": passes(lambda: tf.data.FixedLengthRecordDataset(fixed_path, record_bytes),
                        repeat, batch),
        "text": passes(lambda: tf.data.TextLineDataset(text_path), repeat, batch),
        "tensorflow": tf.__version__,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
