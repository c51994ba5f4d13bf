"""The implementation of :mod:`feedline.ndarray_file`, whose page documents it: import the
public names from ``feedline.ndarray_file``."""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from feedline._internal.atomic import replace_file
from feedline.exceptions import CorruptRecordError

__all__ = ["load", "save", "loads", "dumps"]

_LIST_MAGIC = 0x112
_V2_MAGIC = 0xF993FAC9
_V3_MAGIC = 0xF993FACA
_CPU = 1
_DTYPES: dict[int, np.dtype] = {
    0: np.dtype("<f4"), 1: np.dtype("<f8"), 2: np.dtype("<f2"), 3: np.dtype("u1"),
    4: np.dtype("<i4"), 5: np.dtype("i1"), 6: np.dtype("<i8"), 7: np.dtype("?"),
}
_FLAGS = {dtype: flag for flag, dtype in _DTYPES.items()}


def save(path: str | os.PathLike, data: Mapping[str, Any] | Sequence[Any]) -> None:
    """Write ``data`` to ``path`` as ``mx.nd.save`` does, atomically (a temporary file
    renamed into place).

    Args:
        path: the local file to write.
        data: a dict name -> array (names are written) or a list of arrays, as
            :func:`dumps` takes it.

    >>> import os, tempfile
    >>> import numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "params.nd")
    >>> save(path, {"w": np.ones((2, 2), dtype=np.float32), "b": np.zeros(2, dtype=np.float32)})
    >>> sorted(load(path).items(), key=lambda kv: kv[0])[0]
    ('b', array([0., 0.], dtype=float32))
    """
    replace_file(path, dumps(data))


def dumps(data: Mapping[str, Any] | Sequence[Any]) -> bytes:
    """The bytes :func:`save` writes.

    Args:
        data: a dict name -> array (keys written with ``str``) or a list of arrays
            (anything else raises ``TypeError``). Arrays must have a dtype MXNet can hold
            (float32, float64, float16, uint8, int32, int8, int64, bool; else
            ``TypeError``); 0-d arrays are written with shape ``(1,)``.

    >>> dumps([np.array([1], np.uint8)]).hex()[:48]
    '120100000000000000000000000000000100000000000000'
    """
    if isinstance(data, Mapping):
        names = [str(k) for k in data]
        arrays = list(data.values())
    elif isinstance(data, Sequence) and not isinstance(data, (str, bytes)):
        names, arrays = [], list(data)
    else:
        raise TypeError(f"`data` must be a dict name -> array or a list of arrays, got {data!r}")
    parts = [struct.pack("<QQQ", _LIST_MAGIC, 0, len(arrays))]
    for i, value in enumerate(arrays):
        array = np.asarray(value)
        dtype = array.dtype.newbyteorder("<") if array.dtype.byteorder == ">" else array.dtype
        flag = _FLAGS.get(dtype)
        if flag is None:
            what = names[i] if names else f"array {i}"
            raise TypeError(f"{what}: MXNet NDArray files cannot hold dtype {array.dtype}")
        if array.ndim == 0:
            array = array.reshape(1)  # MXNet 1.x shapes have no 0-d arrays
        parts.append(struct.pack("<Iii", _V2_MAGIC, 0, array.ndim))
        parts.append(struct.pack(f"<{array.ndim}q", *array.shape))
        parts.append(struct.pack("<iii", _CPU, 0, flag))
        parts.append(np.ascontiguousarray(array, dtype=dtype.newbyteorder("<")).tobytes())
    parts.append(struct.pack("<Q", len(names)))
    for name in names:
        raw = name.encode("utf-8")
        parts.append(struct.pack("<Q", len(raw)) + raw)
    return b"".join(parts)


def load(path: str | os.PathLike) -> dict[str, np.ndarray | None] | list[np.ndarray | None]:
    """Read an NDArray list file: a dict name -> array when the file names its arrays
    (as ``mx.nd.save(path, dict)`` writes), else a list.

    Args:
        path: a local file; damage raises :class:`~feedline.exceptions.CorruptRecordError`
            naming the array and the byte offset.

    >>> import os, tempfile
    >>> import numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "list.nd")
    >>> save(path, [np.arange(3, dtype=np.int32)])
    >>> load(path)
    [array([0, 1, 2], dtype=int32)]
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        return loads(f.read(), path=path)


def loads(blob: bytes, *, path: str | None = None) -> dict[str, Any] | list[Any]:
    """Parse the bytes of an NDArray list file, as :func:`load` returns them.

    Args:
        blob: the file's bytes.
        path: the file name to put in errors; it changes nothing else.

    >>> import os, tempfile
    >>> import numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "x.nd")
    >>> save(path, {"x": np.float64(2.5) * np.ones(1)})
    >>> loads(open(path, "rb").read())
    {'x': array([2.5])}
    """
    reader = _Reader(memoryview(blob), path)
    magic, _reserved = reader.unpack("<QQ", "the file header")
    if magic != _LIST_MAGIC:
        raise reader.error(f"not an MXNet NDArray list file (magic {magic:#x}, expected 0x112)", 0)
    (count,) = reader.unpack("<Q", "the array count")
    arrays = [_read_array(reader, i) for i in range(count)]
    (name_count,) = reader.unpack("<Q", "the name count")
    if name_count not in (0, count):
        raise reader.error(f"{name_count} names for {count} arrays", reader.pos - 8)
    names = []
    for _ in range(name_count):
        (length,) = reader.unpack("<Q", "a name's length")
        names.append(bytes(reader.take(length, "a name")).decode("utf-8", "replace"))
    if reader.pos != len(reader.blob):
        raise reader.error(f"{len(reader.blob) - reader.pos} unexpected bytes after the names",
                           reader.pos)
    return dict(zip(names, arrays)) if names else arrays


def _read_array(reader: _Reader, i: int) -> np.ndarray | None:
    start = reader.pos
    magic, stype = reader.unpack("<Ii", f"array {i}'s header")
    if magic not in (_V2_MAGIC, _V3_MAGIC):
        raise reader.error(f"array {i}: unsupported NDArray layout (magic {magic:#x}; only the "
                           "MXNet >= 1.0 layouts 0xf993fac9 and 0xf993faca are read)", start)
    if stype != 0:
        raise reader.error(f"array {i}: sparse NDArrays (storage type {stype}) are not supported",
                           start)
    if magic == _V2_MAGIC:
        (ndim,) = reader.unpack("<I", f"array {i}'s shape")
        if ndim == 0:
            return None
    else:
        (ndim,) = reader.unpack("<i", f"array {i}'s shape")
        if ndim < 0:
            return None
    shape = reader.unpack(f"<{ndim}q", f"array {i}'s shape")
    if any(d < 0 for d in shape):
        raise reader.error(f"array {i}: negative dimension in shape {shape}", start)
    _device, _device_id, flag = reader.unpack("<iii", f"array {i}'s context and type")
    dtype = _DTYPES.get(flag)
    if dtype is None:
        raise reader.error(f"array {i}: unsupported type flag {flag}", start)
    size = math.prod(shape) * dtype.itemsize  # Python ints: a damaged shape cannot overflow
    data = reader.take(size, f"array {i}'s {size} data bytes")
    return np.frombuffer(data, dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="))


class _Reader:
    """A cursor over the file's bytes that raises naming what was cut short."""

    def __init__(self, blob: memoryview, path: str | None) -> None:
        self.blob = blob
        self.path = path
        self.pos = 0

    def error(self, message: str, offset: int) -> CorruptRecordError:
        return CorruptRecordError(message, path=self.path, offset=offset)

    def take(self, n: int, what: str) -> memoryview:
        if self.pos + n > len(self.blob):
            raise self.error(f"the file ends inside {what}", self.pos)
        out = self.blob[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str, what: str) -> tuple:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))
