"""``paddle.dataset.cifar``: CIFAR-10 and CIFAR-100 readers over a local tarball.

Each reader creator takes the path of the dataset's ``python`` tarball as distributed
(``cifar-10-python.tar.gz`` or ``cifar-100-python.tar.gz``; feedline never downloads
it) and returns a reader of ``(image, label)`` samples: ``image`` a ``float32`` vector of
3,072 values (the 32x32 red plane, then green, then blue) with the pixels divided by
255, ``label`` an ``int`` (CIFAR-100: the fine label). The samples come in the order
PaddlePaddle's readers give them: the archive's matching members in archive order
(``data_batch_1`` .. ``data_batch_5`` / ``test_batch``; ``train`` / ``test`` for
CIFAR-100), each member's rows in order. ``cycle=True`` repeats the data forever.

The tarball is read when the reader creator is called. Its members are Python pickles;
they are loaded with an unpickler that accepts only dicts, lists, strings, numbers and
NumPy arrays, so a tampered archive cannot run code: anything else is a
:class:`~feedline.exceptions.DataError` naming the member.

>>> import os, tempfile, numpy as np
>>> path = os.path.join(tempfile.mkdtemp(), "cifar-10-python.tar.gz")
>>> images = np.arange(2 * 3072, dtype=np.uint8).reshape(2, 3072)
>>> write(path, {"cifar-10-batches-py/test_batch": (images, [3, 5])})
>>> [(image.shape, label) for image, label in test10(path)()]
[((3072,), 3), ((3072,), 5)]
"""

from __future__ import annotations

import io
import os
import pickle
import tarfile
from typing import Any

import numpy as np

from feedline.dataset.base import Dataset
from feedline.dataset.sources import from_random_access
from feedline.datasets._samples import Samples
from feedline.exceptions import DataError

__all__ = ["train10", "test10", "train100", "test100", "write", "cifar_pixels"]

#: One sample: the image as a float32 vector and its label.
Sample = tuple[np.ndarray, int]

_ALLOWED = {
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("_codecs", "encode"),
}


class _ArraysOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}: a CIFAR batch "
                                         "holds only a dict of arrays and labels")
        return super().find_class(module, name)


def _load_member(tar: tarfile.TarFile, member: tarfile.TarInfo, path: str) -> dict:
    where = f"{path}:{member.name}"
    f = tar.extractfile(member)
    if f is None:
        raise DataError(f"member {member.name} is not a file", path=path)
    try:
        batch = _ArraysOnly(io.BytesIO(f.read()), encoding="bytes").load()
    except Exception as exc:
        raise DataError(f"not a CIFAR batch: {exc}", path=where) from exc
    if not isinstance(batch, dict):
        raise DataError(f"a CIFAR batch is a dict, got {type(batch).__name__}", path=where)
    return batch


def cifar_pixels(row: np.ndarray) -> np.ndarray:
    """``uint8`` pixels divided by 255 (in ``float64``, then made ``float32``, as
    PaddlePaddle's reader computes them).

    Args:
        row: one image's ``uint8`` pixels.

    >>> cifar_pixels(np.array([0, 51, 255], np.uint8)).tolist()
    [0.0, 0.20000000298023224, 1.0]
    """
    return (row / 255.0).astype(np.float32)


def _read(path: str | os.PathLike, sub_name: str, label_key: bytes) -> Samples:
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"no CIFAR tarball at {path!r}; feedline reads CIFAR from a local copy of the "
            "python version's tarball and never downloads it"
        )
    images: list[np.ndarray] = []
    labels: list[np.ndarray] = []
    try:
        tar = tarfile.open(path, mode="r")
    except tarfile.TarError as exc:
        raise DataError(f"not a tar archive: {exc}", path=path) from exc
    with tar:
        for member in tar:
            if sub_name not in member.name or not member.isfile():
                continue
            batch = _load_member(tar, member, path)
            data, target = batch.get(b"data"), batch.get(label_key)
            where = f"{path}:{member.name}"
            if data is None or target is None:
                raise DataError(f"a CIFAR batch needs b'data' and {label_key!r}, got keys "
                                f"{sorted(batch)}", path=where)
            data = np.asarray(data)
            if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
                raise DataError(f"expected uint8 data of shape (n, 3072), got {data.dtype} "
                                f"{data.shape}", path=where)
            target = np.asarray(target, dtype=np.int64)
            if target.shape != (len(data),):
                raise DataError(f"expected {len(data)} labels, got shape {target.shape}",
                                path=where)
            images.append(data)
            labels.append(target)
    if not images:
        raise DataError(f"no member whose name contains {sub_name!r}: is this the right "
                        "CIFAR tarball?", path=path)
    return Samples(np.concatenate(images), np.concatenate(labels), cifar_pixels)


def _reader(path: Any, sub_name: str, label_key: bytes, cycle: bool) -> Dataset[Sample]:
    ds: Dataset[Sample] = from_random_access(_read(path, sub_name, label_key))
    return ds.repeat() if cycle else ds


def train10(path: str | os.PathLike, *, cycle: bool = False) -> Dataset[Sample]:
    """CIFAR-10's 50,000 training images (members ``data_batch_*``) from the tarball at
    ``path``; see the module docstring.

    Args:
        path: the local ``cifar-10-python.tar.gz`` tarball (never downloaded); a missing
            file raises ``FileNotFoundError``, a damaged or wrong one
            :class:`~feedline.exceptions.DataError`.
        cycle: ``True`` repeats the samples forever (the result is then a stream).

    >>> import os, tempfile, numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "cifar-10-python.tar.gz")
    >>> write(path, {f"cifar-10-batches-py/data_batch_{i}": (np.zeros((2, 3072), np.uint8), [i, i])
    ...              for i in (1, 2)})
    >>> [label for _, label in train10(path)()]
    [1, 1, 2, 2]
    """
    return _reader(path, "data_batch", b"labels", cycle)


def test10(path: str | os.PathLike, *, cycle: bool = False) -> Dataset[Sample]:
    """CIFAR-10's 10,000 test images (member ``test_batch``) from the tarball at ``path``.

    Args:
        path: the local ``cifar-10-python.tar.gz`` tarball, as in :func:`train10`.
        cycle: as in :func:`train10`.

    >>> import os, tempfile, numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "cifar-10-python.tar.gz")
    >>> write(path, {"cifar-10-batches-py/test_batch": (np.full((1, 3072), 255, np.uint8), [7])})
    >>> image, label = test10(path)[0]
    >>> float(image.max()), label
    (1.0, 7)
    """
    return _reader(path, "test_batch", b"labels", cycle)


def train100(path: str | os.PathLike, *, cycle: bool = False) -> Dataset[Sample]:
    """CIFAR-100's 50,000 training images (member ``train``, fine labels) from the
    tarball at ``path``.

    Args:
        path: the local ``cifar-100-python.tar.gz`` tarball, as in :func:`train10`.
        cycle: as in :func:`train10`.

    >>> import os, tempfile, numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "cifar-100-python.tar.gz")
    >>> pixels = np.zeros((3, 3072), np.uint8)
    >>> write(path, {"cifar-100-python/train": (pixels, [97, 3, 50])}, label_key="fine_labels")
    >>> [label for _, label in train100(path, cycle=True).take(4)()]
    [97, 3, 50, 97]
    """
    return _reader(path, "train", b"fine_labels", cycle)


def test100(path: str | os.PathLike, *, cycle: bool = False) -> Dataset[Sample]:
    """CIFAR-100's 10,000 test images (member ``test``, fine labels) from the tarball at
    ``path``.

    Args:
        path: the local ``cifar-100-python.tar.gz`` tarball, as in :func:`train10`.
        cycle: as in :func:`train10`.

    >>> import os, tempfile, numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "cifar-100-python.tar.gz")
    >>> write(path, {"cifar-100-python/test": (np.ones((2, 3072), np.uint8), [0, 99])},
    ...       label_key="fine_labels")
    >>> len(test100(path))
    2
    """
    return _reader(path, "test", b"fine_labels", cycle)


def write(path: str | os.PathLike, batches: dict[str, tuple[Any, Any]], *,
          label_key: str = "labels") -> None:
    """Write a tarball in the CIFAR ``python`` layout, each member pickled as a dict with
    ``b"data"`` and the labels: the files the readers here read; for tests and small
    data sets.

    Args:
        path: the tarball written; gzip-compressed when it ends in ``.gz``.
        batches: maps each member name (``"cifar-10-batches-py/data_batch_1"``) to
            ``(images, labels)``: ``uint8`` images of shape ``(n, 3072)`` and ``n`` int
            labels (else ``ValueError``, before anything is written).
        label_key: the labels' key in each dict (``"fine_labels"`` for CIFAR-100).

    >>> import os, tempfile, numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "mini.tar")
    >>> write(path, {"x/test_batch": (np.zeros((1, 3072), np.uint8), [4])})
    >>> [label for _, label in test10(path)()]
    [4]
    """
    rows: list[tuple[str, np.ndarray, list[int]]] = []
    for name, (images, labels) in batches.items():
        data = np.asarray(images)
        if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
            raise ValueError(f"`batches[{name!r}]` images must be uint8 of shape (n, 3072), got "
                             f"{data.dtype} {data.shape}")
        targets = [int(label) for label in labels]
        if len(targets) != len(data):
            raise ValueError(f"`batches[{name!r}]` has {len(data)} images but {len(targets)} labels")
        rows.append((name, data, targets))
    gz = os.fspath(path).endswith(".gz")
    with (tarfile.open(path, "w:gz") if gz else tarfile.open(path, "w")) as tar:
        for name, data, targets in rows:
            blob = pickle.dumps({b"data": data, label_key.encode(): targets}, protocol=2)
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))


test10.__test__ = False  # type: ignore[attr-defined]  # not a pytest test function
test100.__test__ = False  # type: ignore[attr-defined]  # not a pytest test function
