"""Tiny MNIST and CIFAR files in the distributed layouts, made the same way for the test
(``tests/test_paddle_programs.py``) and for the PaddlePaddle run that recorded what its
own readers give for them (``make_paddle_datasets_outputs.py``). Standard library and
NumPy only, so that it runs in a peer's environment too.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import pickle
import struct
import tarfile

import numpy as np

__all__ = ["write_mnist", "write_cifar", "digest", "shuffle_cases"]


def _pixels(n: int, size: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(n, size), dtype=np.uint8)


def write_mnist(directory: str, n_train: int = 7, n_test: int = 3) -> None:
    """MNIST's four gzipped IDX files (28x28 images) in ``directory``."""
    os.makedirs(directory, exist_ok=True)
    for prefix, n, seed in (("train", n_train, 1), ("t10k", n_test, 2)):
        images = _pixels(n, 28 * 28, seed)
        labels = (np.arange(n) * 3 % 10).astype(np.uint8)
        with gzip.open(os.path.join(directory, f"{prefix}-images-idx3-ubyte.gz"), "wb") as f:
            f.write(struct.pack(">IIII", 0x803, n, 28, 28) + images.tobytes())
        with gzip.open(os.path.join(directory, f"{prefix}-labels-idx1-ubyte.gz"), "wb") as f:
            f.write(struct.pack(">II", 0x801, n) + labels.tobytes())


def _member(tar: tarfile.TarFile, name: str, batch: dict) -> None:
    blob = pickle.dumps(batch, protocol=2)
    info = tarfile.TarInfo(name)
    info.size = len(blob)
    tar.addfile(info, io.BytesIO(blob))


def write_cifar(directory: str) -> tuple[str, str]:
    """``cifar-10-python.tar.gz`` (two training batches of 3 and a test batch of 2; a
    ``batches.meta`` member) and ``cifar-100-python.tar.gz`` (train 4, test 2, fine and
    coarse labels) in ``directory``; returns their paths."""
    os.makedirs(directory, exist_ok=True)
    ten = os.path.join(directory, "cifar-10-python.tar.gz")
    with tarfile.open(ten, "w:gz") as tar:
        _member(tar, "cifar-10-batches-py/batches.meta", {b"label_names": [b"a", b"b"]})
        for i, n in ((1, 3), (2, 3)):
            _member(tar, f"cifar-10-batches-py/data_batch_{i}",
                    {b"data": _pixels(n, 3072, 10 + i), b"labels": [(i + j) % 10 for j in range(n)]})
        _member(tar, "cifar-10-batches-py/test_batch",
                {b"data": _pixels(2, 3072, 20), b"labels": [9, 4]})
    hundred = os.path.join(directory, "cifar-100-python.tar.gz")
    with tarfile.open(hundred, "w:gz") as tar:
        for name, n, seed in (("train", 4, 30), ("test", 2, 31)):
            _member(tar, f"cifar-100-python/{name}",
                    {b"data": _pixels(n, 3072, seed), b"fine_labels": [97 - j for j in range(n)],
                     b"coarse_labels": [j for j in range(n)]})
    return ten, hundred


def digest(samples: list) -> list:
    """``[sha256 of the image's float32 bytes, label]`` per ``(image, label)`` sample."""
    out = []
    for image, label in samples:
        arr = np.asarray(image)
        out.append([str(arr.dtype), list(arr.shape),
                    hashlib.sha256(arr.tobytes()).hexdigest(), int(label)])
    return out


def shuffle_cases() -> list[tuple[int, int, int, int]]:
    """``(items, buf_size, seed, passes)`` for the chunk-shuffle orders."""
    return [(20, 7, 0, 3), (10, 3, 42, 2), (5, 100, 7, 2), (12, 4, 123, 1), (9, 1, 5, 1)]
