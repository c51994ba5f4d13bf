"""The demo's data: load digits (or MNIST), split, and pack into record files.

:func:`load` returns :class:`Images` — ``uint8`` pixels, ``int64`` labels and the pixel
``scale`` (16 for scikit-learn's digits, whose pixels are 0..16; 255 for MNIST) — split
into a training and a test set. :func:`pack` writes:

* ``train-0000k-of-0000n.rec`` / ``.idx``: MXNet RecordIO, one record per image:
  ``recordio.pack(IRHeader(0, label, index, 0), pixel bytes)``;
* ``test-0000k-of-0000n.tfrecord``: TFRecord, one ``tf.train.Example`` per image with
  features ``image_raw`` (bytes) and ``label`` (int64) — the layout of TensorFlow's
  MNIST tutorials.

:func:`decode_record` and :func:`decode_example` turn one record back into a sample
``(pixels float32 in [0, 1], label)``; they are module-level functions so that worker
processes can run them.

>>> images = load(test_fraction=0.2, seed=0)
>>> images.train_x.shape, images.test_x.shape, images.scale
((1438, 64), (359, 64), 16)
>>> import tempfile
>>> packed = pack(images, tempfile.mkdtemp(), train_shards=2, test_shards=1)
>>> sample = decode_record(next(iter(__import__("feedline").recordio.read(packed.train[0]))))
>>> sample[0].dtype, sample[0].shape, 0 <= sample[1] < 10
(dtype('float32'), (64,), True)
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from feedline._internal.optional import require
from feedline._internal.validate import positive_int
from feedline.formats import recordio
from feedline.formats.example import FixedLenFeature, encode_example, parse_single_example
from feedline.formats.sharded import ShardedWriter

__all__ = ["Images", "Packed", "load", "load_digits", "load_mnist", "pack", "decode_record",
           "decode_example"]

_MNIST_FILES = {
    "train_x": "train-images-idx3-ubyte",
    "train_y": "train-labels-idx1-ubyte",
    "test_x": "t10k-images-idx3-ubyte",
    "test_y": "t10k-labels-idx1-ubyte",
}


@dataclass
class Images:
    """Flattened ``uint8`` images and ``int64`` labels, split into train and test.

    Args:
        train_x: the training images, one flattened ``uint8`` row per image.
        train_y: the training labels (``int64``), one per row of ``train_x``.
        test_x: the test images, as ``train_x``.
        test_y: the test labels, as ``train_y``.
        scale: the largest pixel value (16 for scikit-learn's digits, 255 for MNIST).
        source: where the images came from (``"scikit-learn digits"`` or ``"MNIST"``).
        shape: one image's shape before flattening (``(8, 8)`` or ``(28, 28)``).

    >>> images = load_digits()
    >>> images.dim, images.classes, images.shape, images.scale
    (64, 10, (8, 8), 16)
    """

    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    scale: int
    source: str
    shape: tuple[int, ...]

    @property
    def dim(self) -> int:
        return int(self.train_x.shape[1])

    @property
    def classes(self) -> int:
        return int(max(self.train_y.max(), self.test_y.max())) + 1


@dataclass
class Packed:
    """The files :func:`pack` wrote.

    Args:
        train: the RecordIO shards of the training set (their ``.idx`` files beside them).
        test: the TFRecord shards of the test set.
        bytes: the total size of those files, ``.idx`` files included.

    >>> import tempfile
    >>> packed = pack(load_digits(), tempfile.mkdtemp(), train_shards=2, test_shards=1)
    >>> len(packed.train), len(packed.test), packed.bytes > 100_000
    (2, 1, True)
    """

    train: list[str]
    test: list[str]
    bytes: int


def load_digits(*, test_fraction: float = 0.2, seed: int = 0) -> Images:
    """scikit-learn's 1,797 digits (8x8, pixels 0..16), split by a seeded permutation.

    Needs scikit-learn (the ``demo`` extra).

    Args:
        test_fraction: the share of the images that goes to the test set (rounded to
            a whole number of images).
        seed: the seed of the permutation that decides the split.

    >>> images = load_digits(test_fraction=0.5, seed=1)
    >>> len(images.train_x), len(images.test_x), int(images.train_x.max())
    (899, 898, 16)
    """
    datasets = require("sklearn.datasets", extra="demo")
    digits = datasets.load_digits()
    x = digits.data.astype(np.uint8)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = int(round(len(x) * test_fraction))
    test, train = order[:n_test], order[n_test:]
    return Images(x[train], y[train], x[test], y[test], 16, "scikit-learn digits", (8, 8))


def _find(directory: str, stem: str) -> str:
    for name in (stem, stem + ".gz", stem.replace("-idx", ".idx")):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"{stem}[.gz] not found in {directory}")


def load_mnist(directory: str | os.PathLike) -> Images:
    """MNIST from its four IDX files (gzipped or not) in ``directory``.

    Args:
        directory: holds ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
            ``t10k-images-idx3-ubyte`` and ``t10k-labels-idx1-ubyte`` (each also found
            with ``.gz`` appended, or with ``.idx`` for ``-idx``); a missing one raises
            ``FileNotFoundError``. MNIST's own train/test split is kept.

    >>> import os, tempfile
    >>> import numpy as np
    >>> from feedline.formats.idx import write_idx
    >>> d = tempfile.mkdtemp()
    >>> for prefix, n in (("train", 3), ("t10k", 2)):
    ...     write_idx(os.path.join(d, f"{prefix}-images-idx3-ubyte.gz"), np.zeros((n, 28, 28), np.uint8))
    ...     write_idx(os.path.join(d, f"{prefix}-labels-idx1-ubyte"), np.arange(n, dtype=np.uint8))
    >>> images = load_mnist(d)
    >>> images.train_x.shape, images.test_y.tolist(), images.scale
    ((3, 784), [0, 1], 255)
    """
    from feedline.formats.idx import read_idx

    directory = os.fspath(directory)
    arrays = {k: read_idx(_find(directory, stem)) for k, stem in _MNIST_FILES.items()}
    flat = {k: v.reshape(len(v), -1).astype(np.uint8) if k.endswith("_x") else v.astype(np.int64)
            for k, v in arrays.items()}
    return Images(flat["train_x"], flat["train_y"], flat["test_x"], flat["test_y"], 255, "MNIST",
                  tuple(arrays["train_x"].shape[1:]))


def load(*, mnist: str | os.PathLike | None = None, test_fraction: float = 0.2, seed: int = 0) -> Images:
    """MNIST from ``mnist`` when given, else scikit-learn's digits.

    Args:
        mnist: a directory for :func:`load_mnist`; ``None`` loads :func:`load_digits`.
        test_fraction: the test share of the digits (ignored for MNIST).
        seed: the seed of the digits' split (ignored for MNIST).

    >>> load().source
    'scikit-learn digits'
    """
    if mnist is not None:
        return load_mnist(mnist)
    return load_digits(test_fraction=test_fraction, seed=seed)


def pack(images: Images, directory: str | os.PathLike, *, train_shards: int = 4,
         test_shards: int = 2) -> Packed:
    """Write the training set as sharded RecordIO and the test set as sharded TFRecord.

    Args:
        images: what to write (see the module docstring for the record layouts).
        directory: where the shards go (created when missing), as
            ``train-0000k-of-0000n.rec`` (with ``.idx``) and
            ``test-0000k-of-0000n.tfrecord``.
        train_shards: the number of training shards; a positive int (else
            ``ValueError``/``TypeError``).
        test_shards: the number of test shards; a positive int, as ``train_shards``.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> packed = pack(load_digits(), d, train_shards=2, test_shards=1)
    >>> sorted(os.path.basename(p) for p in packed.train + packed.test)
    ['test-00000-of-00001.tfrecord', 'train-00000-of-00002.rec', 'train-00001-of-00002.rec']
    """
    positive_int("train_shards", train_shards)
    positive_int("test_shards", test_shards)
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    train_prefix = os.path.join(directory, "train")
    test_prefix = os.path.join(directory, "test")
    with ShardedWriter(train_prefix, train_shards, format="recordio") as w:
        for i, (x, y) in enumerate(zip(images.train_x, images.train_y)):
            w.write(recordio.pack(recordio.IRHeader(0, float(y), i, 0), x.tobytes()))
    train = list(w.paths)
    with ShardedWriter(test_prefix, test_shards, format="tfrecord", suffix=".tfrecord") as w:
        for x, y in zip(images.test_x, images.test_y):
            w.write(encode_example({"image_raw": x.tobytes(), "label": int(y)}))
    test = list(w.paths)
    files = [*train, *(recordio.default_idx_path(p) for p in train), *test]
    return Packed(train, test, sum(os.path.getsize(p) for p in files))


def decode_record(record: bytes, scale: float = 16.0) -> tuple[np.ndarray, int]:
    """A RecordIO record -> ``(pixels / scale as float32, label)``.

    Args:
        record: one record as :func:`pack` wrote it: an ``IRHeader`` whose label is
            the class, then the ``uint8`` pixels.
        scale: the pixels are divided by it (the images' ``scale``: 16 or 255).

    >>> record = recordio.pack(recordio.IRHeader(0, 7.0, 0, 0), bytes([0, 8, 16]))
    >>> pixels, label = decode_record(record)
    >>> pixels.tolist(), label
    ([0.0, 0.5, 1.0], 7)
    """
    header, payload = recordio.unpack(record)
    pixels = np.frombuffer(payload, dtype=np.uint8).astype(np.float32) / np.float32(scale)
    return pixels, int(header.label)


_EXAMPLE_SPEC = {"image_raw": FixedLenFeature((), "string"), "label": FixedLenFeature((), "int64")}


def decode_example(record: bytes, scale: float = 16.0) -> tuple[np.ndarray, int]:
    """A TFRecord ``Example`` -> ``(pixels / scale as float32, label)``.

    Args:
        record: one serialized ``Example`` with features ``image_raw`` (the ``uint8``
            pixels) and ``label`` (int64).
        scale: the pixels are divided by it (the images' ``scale``: 16 or 255).

    >>> record = encode_example({"image_raw": bytes([0, 255]), "label": 3})
    >>> pixels, label = decode_example(record, scale=255)
    >>> pixels.tolist(), label
    ([0.0, 1.0], 3)
    """
    parsed = parse_single_example(record, _EXAMPLE_SPEC)
    raw = parsed["image_raw"]
    raw = raw.item() if isinstance(raw, np.ndarray) else raw
    pixels = np.frombuffer(raw, dtype=np.uint8).astype(np.float32) / np.float32(scale)
    return pixels, int(parsed["label"])
