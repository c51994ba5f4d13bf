"""feedline inside PyTorch's DataLoader vs a plain DataLoader: the same decode+augment work.

The workload (issue 13): JPEG decode (``feedline.image.decode``, libjpeg-turbo) + random
crop 224 + random horizontal flip, batches of 64 ``uint8`` HWC images with int labels, one
epoch over ``--count`` ImageNet-sized JPEGs from ``make_images.py`` (400-520 px wide), stored
as one TFRecord file (a label byte, then the JPEG bytes), read into memory by the OS cache
after the warm-up. Side by side, with ``--workers`` processes each (default 2):

* **feedline iterator**: ``Dataset.from_source(tfrecord.read) .map(work, num_workers=W)
  .batch(64, collate="numpy")``, iterated directly (feedline's own worker processes);
* **feedline in DataLoader**: ``DataLoader(pipeline.as_torch(), num_workers=W,
  batch_size=64)`` over ``from_source(tfrecord.read).map(work)``: each DataLoader worker
  reads its own part of the file and decodes only its records, the DataLoader collates;
  and the same with feedline batching (``.batch(64, collate="numpy")``,
  ``batch_size=None``: one more copy of every batch, numpy's stack before the transfer);
* **feedline in DataLoader, random access**: the same file through its sidecar index
  (``indexed_records([path]).map(work)`` is random access, so ``as_torch()`` is map-style
  and the DataLoader's sampler hands out record indices), ``batch_size=64``;
* **plain DataLoader**: a map-style ``torch.utils.data.Dataset`` that reads one JPEG file
  per item (the same images, from the folder the TFRecord file was packed from) and does
  the same work in ``__getitem__``, ``DataLoader(batch_size=64, num_workers=W)`` with the
  default collate.

Every pipeline runs one warm-up epoch, then ``--epochs`` rounds (default 7) that each
time one epoch of every pipeline in turn (so a busy machine slows each alike); the table
gives the best epoch and the median over rounds of each round's ratio to the plain
DataLoader. Results
go to ``benchmarks/results/pytorch.md``.

    python benchmarks/bench_pytorch.py                  # 1000 images
    python benchmarks/bench_pytorch.py --count 128 --epochs 1   # smoke run
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import make_images  # noqa: E402

import harness  # noqa: E402

DATA = HERE / "data"
BATCH = 64
CROP = 224


def records_file(count: int) -> tuple[pathlib.Path, int]:
    """A TFRecord file of ``count`` labelled JPEGs (built once); its record count."""
    from feedline import tfrecord

    path = DATA / "pytorch_bench" / f"images-{count}.tfrecord"
    if path.exists():
        return path, count
    folder = DATA / f"images-{count}"
    if sum(1 for _ in folder.glob("*/*.jpg")) != count if folder.is_dir() else True:
        print(f"building {count} JPEGs in {folder} ...", file=sys.stderr)
        make_images.build(folder, count, seed=0)
    classes = sorted(p.name for p in folder.iterdir() if p.is_dir())
    records = [bytes([classes.index(f.parent.name)]) + f.read_bytes()
               for f in sorted(folder.glob("*/*.jpg"))]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tfrecord.write(tmp, records)
    tmp.replace(path)
    return path, len(records)


class Work:
    """decode + random crop + flip of one record: ``(uint8 (224, 224, 3) array, label)``."""

    def __init__(self) -> None:
        from feedline.image.augment import HorizontalFlip, RandomCrop

        self.crop, self.flip = RandomCrop(CROP), HorizontalFlip()
        self.rng = None

    def __call__(self, record: bytes):
        import numpy as np

        from feedline.image import decode

        if self.rng is None:
            self.rng = np.random.default_rng()
        img = decode(memoryview(record)[1:])
        img = np.ascontiguousarray(self.flip(self.crop(img, self.rng), self.rng))
        return img, record[0]


def feedline_pipeline(path: pathlib.Path, workers: int):
    from feedline import Dataset, tfrecord

    src = Dataset.from_source(lambda: tfrecord.read(path), name="tfrecord")
    return src.map(Work(), num_workers=workers).batch(BATCH, collate="numpy")


def in_dataloader(path: pathlib.Path, workers: int, *, feedline_batches: bool = False):
    from torch.utils.data import DataLoader

    from feedline import Dataset, tfrecord

    pipeline = Dataset.from_source(lambda: tfrecord.read(path), name="tfrecord").map(Work())
    if feedline_batches:
        pipeline = pipeline.batch(BATCH, collate="numpy")
        return DataLoader(pipeline.as_torch(), batch_size=None, num_workers=workers)
    return DataLoader(pipeline.as_torch(), batch_size=BATCH, num_workers=workers)


def indexed_dataloader(path: pathlib.Path, workers: int):
    from torch.utils.data import DataLoader

    from feedline import tfrecord
    from feedline.io.records import indexed_records

    if not pathlib.Path(str(path) + ".index").exists():
        tfrecord.build_index(path)
    pipeline = indexed_records([path], format="tfrecord").map(Work())  # random access
    return DataLoader(pipeline.as_torch(), batch_size=BATCH, num_workers=workers)


def plain_dataloader(path: pathlib.Path, workers: int):
    """What a plain PyTorch user writes: a map-style dataset reading one JPEG file per item
    (the same images, from the folder the TFRecord file was made from)."""
    import torch
    from torch.utils.data import DataLoader

    folder = DATA / path.stem
    classes = sorted(p.name for p in folder.iterdir() if p.is_dir())
    files = [(str(f), classes.index(f.parent.name)) for f in sorted(folder.glob("*/*.jpg"))]

    class Images(torch.utils.data.Dataset):
        def __init__(self) -> None:
            self.work = Work()

        def __len__(self) -> int:
            return len(files)

        def __getitem__(self, i: int):
            name, label = files[i]
            with open(name, "rb") as f:
                return self.work(bytes([label]) + f.read())

    return DataLoader(Images(), batch_size=BATCH, num_workers=workers)


def epoch_seconds(iterable, counts: list[int]) -> float:
    """Seconds for one epoch of ``iterable``; appends the images seen to ``counts``."""
    t = time.perf_counter()
    n = 0
    for _images, labels in iterable:
        n += len(labels)
    counts.append(n)
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=7)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    path, count = records_file(args.count)
    w = args.workers
    makers = {
        "plain DataLoader (map-style, same work)": lambda: plain_dataloader(path, w),
        "feedline in DataLoader (`ds.as_torch()`, DataLoader batches)":
            lambda: in_dataloader(path, w),
        "feedline in DataLoader (`ds.batch(64).as_torch()`, `batch_size=None`)":
            lambda: in_dataloader(path, w, feedline_batches=True),
        "feedline in DataLoader, random access (`indexed_records(...).map(work).as_torch()`)":
            lambda: indexed_dataloader(path, w),
        "feedline iterator (`map(workers=W)`)": lambda: feedline_pipeline(path, w),
    }
    iterables = {name: make() for name, make in makers.items()}
    counts: dict[str, list[int]] = {name: [] for name in makers}
    seconds: dict[str, list[float]] = {name: [] for name in makers}
    for name, iterable in iterables.items():  # warm-up epoch (page cache, worker start)
        epoch_seconds(iterable, counts[name])
    for _ in range(args.epochs):  # rounds interleave the pipelines: same load for each
        for name, iterable in iterables.items():
            seconds[name].append(epoch_seconds(iterable, counts[name]))
    plain_name = "plain DataLoader (map-style, same work)"
    rows = []
    for name, iterable in iterables.items():
        assert counts[name] == [count] * (args.epochs + 1), (name, counts[name])
        best = harness.rate(count, min(seconds[name]))
        # paired by round: each round's plain epoch over this pipeline's epoch
        paired = statistics.median(p / s for p, s in zip(seconds[plain_name], seconds[name]))
        print(f"{name}: {best:.0f} images/s, {paired:.3f}x plain", file=sys.stderr)
        rows.append((name, harness.fmt_rate(best),
                     harness.ratio(best, harness.rate(count, min(seconds[plain_name]))),
                     f"{paired:.2f}x"))
        if hasattr(iterable, "close"):
            iterable.close()
    table = harness.markdown_table(
        ["pipeline", "images/s (best epoch)", "best vs best plain", "median of rounds vs plain"],
        rows,
    )
    md = (
        "## PyTorch DataLoader (issue 13)\n\n"
        f"JPEG decode + random crop {CROP} + random flip, batches of {BATCH} uint8 images, "
        f"{count} images (400-520 px) from one TFRecord file, {w} worker processes each "
        f"(started afresh each epoch, the DataLoader default), one warm-up epoch, then "
        f"{args.epochs} rounds that each time one epoch of every pipeline in turn; "
        f"torch {torch.__version__}. Ratios are throughput relative to the plain DataLoader "
        "(higher is faster): the best epochs compared, and the median over rounds of each "
        "round's ratio (steadier on a shared machine).\n\n"
        + table + "\n"
    )
    print(harness.write_section("pytorch", md))


if __name__ == "__main__":
    main()
