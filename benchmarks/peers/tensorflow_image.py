"""Peer side of bench_image.py: a tf.data pipeline over TFRecord shards of ``tf.train.Example``.

Runs under the TensorFlow peer's Python (``harness.run_peer("tensorflow", ...)``)::

    python benchmarks/peers/tensorflow_image.py BATCH DTYPE EPOCHS FILE [FILE ...]

``TFRecordDataset -> parse_single_example -> decode_jpeg -> random_crop 224 -> random flip ->
(normalise to float32 | keep uint8) -> NCHW -> batch -> prefetch``, every parallel knob at
``AUTOTUNE``. One warm-up epoch, then the best of EPOCHS timed epochs. Prints one JSON object on
its last line.
"""

import json
import sys

import tensorflow as tf
from peer_timing import best_of

MEAN = tf.constant([123.68, 116.28, 103.53])
STD = tf.constant([58.395, 57.12, 57.375])
FEATURES = {
    "image/encoded": tf.io.FixedLenFeature([], tf.string),
    "image/class/label": tf.io.FixedLenFeature([], tf.int64),
}


def main():
    batch, dtype, epochs = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    files = sys.argv[4:]
    auto = tf.data.AUTOTUNE

    def prepare(record):
        ex = tf.io.parse_single_example(record, FEATURES)
        img = tf.io.decode_jpeg(ex["image/encoded"], channels=3)
        img = tf.image.random_crop(img, [224, 224, 3])
        img = tf.image.random_flip_left_right(img)
        if dtype == "float32":
            img = (tf.cast(img, tf.float32) - MEAN) / STD
        img = tf.transpose(img, [2, 0, 1])
        return img, tf.cast(ex["image/class/label"], tf.float32)

    ds = (
        tf.data.TFRecordDataset(files, num_parallel_reads=auto)
        .map(prepare, num_parallel_calls=auto)
        .batch(batch)
        .prefetch(auto)
    )

    def epoch():
        count = 0
        for data, _label in ds:
            count += int(data.shape[0])
        return count

    best, images = best_of(epochs, epoch)  # one warm-up epoch, then the best
    print(json.dumps({"version": tf.__version__, "images": images, "seconds": best,
                      "images_per_s": images / best}))


if __name__ == "__main__":
    main()
