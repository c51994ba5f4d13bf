"""MXNet's NDArray list files (``mx.nd.save``/``mx.nd.load``): mean images, ``.params``.

An NDArray list file holds dense arrays, with or without names. :func:`save` writes
exactly the bytes ``mx.nd.save`` (MXNet 1.x) writes for the same arrays; :func:`load`
reads those files and the NumPy-shape variant (``NDARRAY_V3``) that MXNet writes with
``npx.set_np()`` on. The layout, all little-endian::

    u64 0x112, u64 0, u64 count, count x array, u64 name count, name count x (u64 length, bytes)
    array: u32 0xF993FAC9 (V2) or 0xF993FACA (V3), i32 storage type (0 = dense),
           shape (V2: u32 ndim, 0 = none; V3: i32 ndim, -1 = none), i64 x ndim dims,
           i32 device type, i32 device id, i32 type flag, the elements (C order)

Type flags: 0 float32, 1 float64, 2 float16, 3 uint8, 4 int32, 5 int8, 6 int64, 7 bool.
A "none" array (no shape) loads as ``None``. Sparse arrays and MXNet's pre-1.0 layouts
are refused with :class:`~feedline.exceptions.CorruptRecordError` naming the file, the
array and the byte offset, as is any truncated or inconsistent file.

>>> import os, tempfile, numpy as np
>>> path = os.path.join(tempfile.mkdtemp(), "mean.bin")
>>> save(path, {"mean_img": np.zeros((3, 2, 2), np.float32)})
>>> {k: v.shape for k, v in load(path).items()}
{'mean_img': (3, 2, 2)}
>>> save(path, [np.arange(3, dtype=np.int64)]); load(path)
[array([0, 1, 2])]
"""

from feedline.formats.ndarray_file import *  # noqa: F403 - the public names, defined there
from feedline.formats.ndarray_file import __all__ as __all__
