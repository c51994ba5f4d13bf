"""``paddle.dataset.mnist``: MNIST readers over local files (never a download).

:func:`train` and :func:`test` return a reader of ``(image, label)`` samples: ``image``
a ``float32`` vector with the pixels mapped from ``0..255`` to ``[-1, 1]``
(``pixel / 255 * 2 - 1``, as PaddlePaddle's reader computes it), ``label`` an ``int``.

The data comes from ``directory``, a folder holding MNIST's four IDX files
(``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``,
``t10k-labels-idx1-ubyte``, each optionally gzipped, as they are distributed). Without
``directory`` the readers use the copy of the UCI handwritten digits that scikit-learn
ships (``sklearn.datasets.load_digits``: 1,797 images of 8x8 pixels ``0..16``, so the
vectors have 64 values, mapped as ``pixel / 16 * 2 - 1``; ``pip install
'feedline[demo]'``), split like ``feedline demo`` splits it: a permutation seeded with
0, its first 20% (359 images) the test set and the rest (1,438) the training set.

>>> from feedline.datasets import mnist
>>> len(mnist.train()), len(mnist.test())
(1438, 359)
"""

from __future__ import annotations

import functools
import os
from typing import Any

import numpy as np

from feedline._internal.optional import require
from feedline.dataset.base import RandomAccessDataset
from feedline.dataset.sources import from_random_access
from feedline.datasets._samples import Samples
from feedline.exceptions import DataError
from feedline.formats.idx import read_idx

__all__ = ["train", "test", "mnist_pixels", "digits_pixels"]

#: One sample: the image as a float32 vector and its label.
Sample = tuple[np.ndarray, int]

_IDX = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def _idx_file(directory: str, stem: str) -> str:
    candidates = [os.path.join(directory, stem + suffix) for suffix in ("", ".gz")]
    for path in candidates:
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(
        f"no MNIST file {stem} (or {stem}.gz) in {directory}; feedline reads MNIST from local "
        "IDX files and never downloads it"
    )


def _signed(row: np.ndarray, top: float) -> np.ndarray:
    x = row.astype(np.float32) / np.float32(top)
    x *= np.float32(2.0)
    x -= np.float32(1.0)
    return x


def mnist_pixels(row: np.ndarray) -> np.ndarray:
    """``uint8`` pixels to ``float32`` in ``[-1, 1]``, step by step in ``float32`` as
    PaddlePaddle's reader computes them (``/ 255``, ``* 2``, ``- 1``), so the values are
    bit for bit its values.

    Args:
        row: one image's ``uint8`` pixels.

    >>> mnist_pixels(np.array([0, 255], np.uint8)).tolist()
    [-1.0, 1.0]
    """
    return _signed(row, 255.0)


def digits_pixels(row: np.ndarray) -> np.ndarray:
    """scikit-learn's digits pixels (``0..16``) to ``float32`` in ``[-1, 1]``, as
    :func:`mnist_pixels` maps ``0..255``.

    Args:
        row: one image's pixels (values ``0..16``).

    >>> digits_pixels(np.array([0, 16], np.uint8)).tolist()
    [-1.0, 1.0]
    """
    return _signed(row, 16.0)


def _from_idx(directory: str | os.PathLike, part: str) -> Samples:
    folder = os.fspath(directory)
    if not os.path.isdir(folder):
        raise NotADirectoryError(f"`directory` must be a folder with MNIST's IDX files, got {folder!r}")
    image_path, label_path = (_idx_file(folder, stem) for stem in _IDX[part])
    images, labels = read_idx(image_path), read_idx(label_path)
    if images.ndim != 3 or images.dtype != np.uint8:
        raise DataError(f"expected uint8 images of shape (n, rows, cols), got {images.dtype} "
                        f"{images.shape}", path=image_path)
    if labels.ndim != 1 or len(labels) != len(images):
        raise DataError(f"expected {len(images)} labels for the {len(images)} images of "
                        f"{image_path}, got shape {labels.shape}", path=label_path)
    return Samples(images, labels, mnist_pixels)


@functools.cache
def _digits() -> tuple[np.ndarray, np.ndarray]:
    digits = require("sklearn.datasets", extra="demo").load_digits()
    return digits.data.astype(np.uint8), digits.target.astype(np.int64)


def _from_digits(part: str) -> Samples:
    images, labels = _digits()
    order = np.random.default_rng(0).permutation(len(images))
    n_test = int(round(len(images) * 0.2))
    rows = order[:n_test] if part == "test" else order[n_test:]
    return Samples(images[rows], labels[rows], digits_pixels)


def _reader(directory: Any, part: str) -> RandomAccessDataset[Sample]:
    samples = _from_digits(part) if directory is None else _from_idx(directory, part)
    return from_random_access(samples)


def train(directory: str | os.PathLike | None = None) -> RandomAccessDataset[Sample]:
    """The training reader: MNIST's 60,000 training images from the IDX files in
    ``directory``, or scikit-learn's digits (1,438 images) without one; see the module
    docstring. The files are read when this is called.

    Args:
        directory: a folder holding MNIST's IDX files (each optionally gzipped; a
            missing folder raises ``NotADirectoryError``, a missing file
            ``FileNotFoundError``); ``None`` uses scikit-learn's digits (needs
            ``pip install 'feedline[demo]'``).

    >>> from feedline.datasets import mnist
    >>> image, label = mnist.train()[0]
    >>> image.shape, round(float(image.max()), 3), 0 <= label < 10
    ((64,), 1.0, True)
    """
    return _reader(directory, "train")


def test(directory: str | os.PathLike | None = None) -> RandomAccessDataset[Sample]:
    """The test reader: MNIST's 10,000 ``t10k`` images from ``directory``, or
    scikit-learn's digits (359 images, none of them in :func:`train`'s) without one.

    Args:
        directory: a folder holding MNIST's IDX files (each optionally gzipped; a
            missing folder raises ``NotADirectoryError``, a missing file
            ``FileNotFoundError``); ``None`` uses scikit-learn's digits (needs
            ``pip install 'feedline[demo]'``).

    >>> from feedline.datasets import mnist
    >>> len(mnist.test())
    359
    """
    return _reader(directory, "test")


test.__test__ = False  # type: ignore[attr-defined]  # not a pytest test function
