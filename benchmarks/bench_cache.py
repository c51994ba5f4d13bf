"""Epoch 2 of a decode + augment pipeline with ``cache(path)`` vs without, and vs tf.data.

The pipeline reads JPEG files (made by ``make_images.py``), decodes them, then random-crops
224x224 and flips at random. With the cache, the decoded images are cached on disk after
decoding (``.map(decode).cache(dir)``) and the augmentation runs after the cache, so every
epoch still gets new crops; tf.data's ``.map(decode).cache(filename)`` is the same placement.
Epoch 1 reads and decodes (and fills the cache); epoch 2 (best of three) reads the cache.
feedline's maps run in the consumer's thread; tf.data's run with its default options, whose
optimisations (``map_parallelization``, ``inject_prefetch``) may run them in parallel and in
the background.

    python benchmarks/bench_cache.py [--count N]
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import sys
import tempfile
import time

import numpy as np

import make_images
from feedline import Dataset
from feedline.image.codec import decode as decode_image

import harness

HERE = pathlib.Path(__file__).resolve().parent
DATA = HERE / "data" / "cache_images"


def images(count: int) -> list[str]:
    files = sorted(str(p) for p in DATA.rglob("*.jpg"))
    if len(files) != count:
        shutil.rmtree(DATA, ignore_errors=True)
        make_images.build(DATA, count, 0)
        files = sorted(str(p) for p in DATA.rglob("*.jpg"))
    return files


def read_decode(path: str) -> np.ndarray:
    with open(path, "rb") as f:
        return decode_image(f.read())


class Augment:
    """Random 224x224 crop and random horizontal flip, new draws on every call."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def __call__(self, img: np.ndarray) -> np.ndarray:
        h, w = img.shape[:2]
        y = int(self.rng.integers(0, h - 224 + 1))
        x = int(self.rng.integers(0, w - 224 + 1))
        out = img[y:y + 224, x:x + 224]
        if self.rng.random() < 0.5:
            out = out[:, ::-1]
        return np.ascontiguousarray(out)


def measure(ds: Dataset) -> tuple[int, float, float]:
    start = time.perf_counter()
    n = sum(1 for _ in ds)
    first = time.perf_counter() - start
    later = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        sum(1 for _ in ds)
        later = min(later, time.perf_counter() - start)
    return n, first, later


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=256)
    args = parser.parse_args(argv)
    files = images(args.count)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="bench-cache-"))
    try:
        plain = Dataset.from_iterable(files).map(read_decode).map(Augment())
        cached = (Dataset.from_iterable(files).map(read_decode)
                  .cache(tmp / "feedline").map(Augment()))
        n, plain1, plain2 = measure(plain)
        _, cache1, cache2 = measure(cached)
        tf_plain = harness.run_peer("tensorflow", HERE / "peers" / "tensorflow_cache.py",
                                    "none", *files)
        tf_cache = harness.run_peer("tensorflow", HERE / "peers" / "tensorflow_cache.py",
                                    tmp / "tf-cache", *files)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def row(name, first, second):
        if first is None:
            return [name, harness.NOT_INSTALLED, harness.NOT_INSTALLED, "-"]
        return [name, harness.fmt_rate(harness.rate(n, first)),
                harness.fmt_rate(harness.rate(n, second)), harness.ratio(plain2, second)]

    rows = [
        row("feedline, no cache", plain1, plain2),
        row("feedline `cache(path)`", cache1, cache2),
        row("tf.data, no cache", *(tf_plain and (tf_plain["epoch1_s"], tf_plain["epoch2_s"])
                                   or (None, None))),
        row("tf.data `cache(filename)`", *(tf_cache and (tf_cache["epoch1_s"],
                                                          tf_cache["epoch2_s"]) or (None, None))),
    ]
    version = tf_cache["version"] if tf_cache else harness.NOT_INSTALLED
    vs_tf = harness.ratio(cache2 and n / cache2,
                          tf_cache and n / tf_cache["epoch2_s"]) if tf_cache else "-"
    text = (
        "## Cache: epoch 2 of decode + augment\n\n"
        f"{n} JPEGs (about 400-520 px wide) read from files, decoded, then a random 224x224 "
        "crop and flip; the cache sits after decoding, so epoch 2 reads decoded images and "
        "still draws new crops. feedline's maps run in the consumer's thread; tf.data's run "
        "with its default options, whose optimisations (`map_parallelization`, "
        "`inject_prefetch`) may run its maps in parallel and in the background. Epoch 2 is "
        f"the best of three. TensorFlow {version}.\n\n"
        + harness.markdown_table(
            ["pipeline", "epoch 1 images/s", "epoch 2 images/s", "epoch 2 speed-up vs "
             "feedline without cache"], rows)
        + f"\n\nfeedline `cache(path)` epoch 2 vs tf.data `cache(filename)` epoch 2: {vs_tf}.\n"
    )
    path = harness.write_section("cache", text)
    print(text)
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
