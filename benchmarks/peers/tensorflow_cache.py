"""Peer side of bench_cache.py: tf.data's ``cache(filename)`` on a decode + augment pipeline.

Runs under the TensorFlow peer's Python (``harness.run_peer("tensorflow", ...)``)::

    python benchmarks/peers/tensorflow_cache.py CACHE_FILE|none FILE [FILE ...]

``from_tensor_slices(files) -> read_file -> decode_jpeg -> [cache(CACHE_FILE)] -> random_crop 224
-> random flip`` with tf.data's default options (its default optimisations,
``map_parallelization`` and ``inject_prefetch``, may run the maps in parallel and in the
background; feedline's side runs them in the consumer's thread). Times epoch 1 (which fills
the cache) and the best of three later epochs. Prints one JSON object on its last line.
"""

import json
import sys
import time

import tensorflow as tf


def main():
    cache, files = sys.argv[1], sys.argv[2:]

    def decode(path):
        return tf.io.decode_jpeg(tf.io.read_file(path), channels=3)

    def augment(img):
        img = tf.image.random_crop(img, [224, 224, 3])
        return tf.image.random_flip_left_right(img)

    ds = tf.data.Dataset.from_tensor_slices(files).map(decode)
    if cache != "none":
        ds = ds.cache(cache)
    ds = ds.map(augment)

    def epoch():
        count = 0
        for img in ds:
            count += int(img.shape[0] > 0)
        return count

    start = time.perf_counter()
    images = epoch()
    first = time.perf_counter() - start
    later = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        epoch()
        later = min(later, time.perf_counter() - start)
    print(json.dumps({"version": tf.__version__, "images": images, "epoch1_s": first,
                      "epoch2_s": later}))


if __name__ == "__main__":
    main()
