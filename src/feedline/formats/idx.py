"""The implementation of :mod:`feedline.idx`, whose page documents it: import the
public names from ``feedline.idx``."""

from __future__ import annotations

import gzip
import io
import os
import struct
import zlib
from typing import IO, Any

import numpy as np

from feedline._internal.atomic import replace_file
from feedline.exceptions import CorruptRecordError
from feedline.storage.fs import open_file

__all__ = ["read_idx", "write_idx", "decode_idx", "encode_idx", "IDX_TYPES"]

IDX_TYPES: dict[int, np.dtype] = {
    0x08: np.dtype("u1"),
    0x09: np.dtype("i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
"""IDX type code -> the big-endian numpy dtype stored in the file."""

_CODES = {(dt.kind, dt.itemsize): code for code, dt in IDX_TYPES.items()}
_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 20


def _corrupt(problem: str, path: str | None, offset: int) -> CorruptRecordError:
    return CorruptRecordError(problem, path=path, offset=offset)


def _read_upto(f: IO[bytes] | gzip.GzipFile, n: int) -> bytes:
    """Read at most ``n`` bytes in bounded chunks (``n`` may be absurdly large when it
    comes from a damaged header; never allocate it up front)."""
    pieces = []
    got = 0
    while got < n:
        data = f.read(min(_CHUNK, n - got))
        if not data:
            break
        pieces.append(data)
        got += len(data)
    return b"".join(pieces)


def _parse_header(head: bytes, path: str | None) -> tuple[np.dtype, tuple[int, ...], int]:
    if len(head) < 4:
        raise _corrupt(f"truncated header: {len(head)} of 4 magic bytes", path, 0)
    if head[0] or head[1]:
        raise _corrupt(
            f"bad magic {head[:4].hex()}: an IDX file starts with two zero bytes", path, 0
        )
    code, ndim = head[2], head[3]
    if code not in IDX_TYPES:
        known = ", ".join(f"0x{c:02X}" for c in IDX_TYPES)
        raise _corrupt(f"unknown IDX type code 0x{code:02X} (known: {known})", path, 2)
    header_size = 4 + 4 * ndim
    if len(head) < header_size:
        raise _corrupt(
            f"truncated header: {ndim} dimensions need {header_size} bytes, the file has "
            f"{len(head)}",
            path,
            len(head),
        )
    shape = struct.unpack(f">{ndim}I", head[4:header_size])
    return IDX_TYPES[code], shape, header_size


def _decode_stream(f: IO[bytes] | gzip.GzipFile, path: str | None) -> np.ndarray:
    head = _read_upto(f, 4)
    ndim = head[3] if len(head) == 4 else 0
    head += _read_upto(f, 4 * ndim)
    dtype, shape, header_size = _parse_header(head, path)
    expected = int(np.prod(shape, dtype=object)) * dtype.itemsize
    data = _read_upto(f, expected + 1)
    if len(data) < expected:
        raise _corrupt(
            f"truncated data: shape {shape} of {dtype.name} needs {expected} bytes, the "
            f"file has {len(data)}",
            path,
            header_size + len(data),
        )
    if len(data) > expected:
        raise _corrupt(
            f"unexpected bytes after the {expected} bytes of data for shape {shape}",
            path,
            header_size + expected,
        )
    arr = np.frombuffer(data, dtype=dtype).reshape(shape)
    return arr.astype(dtype.newbyteorder("="), copy=True)


def decode_idx(data: bytes, *, path: str | None = None) -> np.ndarray:
    """Decode IDX bytes (gzipped or not) to a native-endian numpy array.

    Args:
        data: the file's bytes, bytes-like; a bad header, truncated or extra data, or a
            damaged gzip stream raises :class:`~feedline.exceptions.CorruptRecordError`
            naming the byte offset.
        path: the file name to put in errors; it changes nothing else.

    >>> decode_idx(bytes.fromhex("00000801" "00000002" "0709"))
    array([7, 9], dtype=uint8)
    """
    return _decode_any(io.BytesIO(bytes(data)), path)


def _decode_any(f: IO[bytes], path: str | None) -> np.ndarray:
    magic = f.read(2)
    f.seek(0)
    if magic != _GZIP_MAGIC:
        return _decode_stream(f, path)
    try:
        with gzip.GzipFile(fileobj=f, mode="rb") as gz:
            return _decode_stream(gz, path)
    except (OSError, EOFError, zlib.error) as exc:
        raise CorruptRecordError(f"damaged gzip stream: {exc}", path=path) from exc


def read_idx(path: str | os.PathLike, *, storage_options: dict | None = None) -> np.ndarray:
    """Read the IDX file at ``path`` (gzipped or not) into a native-endian array.

    Args:
        path: a local path or an fsspec URL (``s3://``, ``gs://``, ``memory://``,
            ``file://``). Damage raises :class:`~feedline.exceptions.CorruptRecordError`.
        storage_options: passed to fsspec for a URL.

    >>> import os, tempfile
    >>> import numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "labels.idx1-ubyte.gz")
    >>> write_idx(path, np.array([7, 2, 1], dtype=np.uint8))
    >>> read_idx(path)
    array([7, 2, 1], dtype=uint8)
    """
    path = os.fspath(path)
    with open_file(path, "rb", storage_options=storage_options) as f:
        return _decode_any(f, path)


def encode_idx(array: Any) -> bytes:
    """The IDX bytes (uncompressed) for ``array``.

    Args:
        array: anything ``np.asarray`` takes, of dtype uint8, int8, int16, int32, float32
            or float64 (any byte order; another dtype raises ``TypeError``), with at most
            255 dimensions each below 2**32 (else ``ValueError``).

    >>> import numpy as np
    >>> encode_idx(np.array([[1, 2], [3, 4]], dtype=np.uint8))   # magic, 2 dims, data
    b'\\x00\\x00\\x08\\x02\\x00\\x00\\x00\\x02\\x00\\x00\\x00\\x02\\x01\\x02\\x03\\x04'
    """
    arr = np.asarray(array)
    code = _CODES.get((arr.dtype.kind, arr.dtype.itemsize))
    if code is None:
        raise TypeError(
            f"`array` dtype {arr.dtype} has no IDX type code; use uint8, int8, int16, "
            "int32, float32 or float64"
        )
    if arr.ndim > 255:
        raise ValueError(f"`array` must have at most 255 dimensions, got {arr.ndim}")
    if any(d >= 1 << 32 for d in arr.shape):
        raise ValueError(f"`array` dimensions must be below 2**32, got shape {arr.shape}")
    header = bytes([0, 0, code, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape)
    return header + np.ascontiguousarray(arr, dtype=IDX_TYPES[code]).tobytes()


def write_idx(
    path: str | os.PathLike, array: Any, *, compress: bool | None = None
) -> None:
    """Write ``array`` as an IDX file. The gzip stream is written with mtime 0, so equal
    arrays give equal files.

    Args:
        path: the local file to write; it is replaced atomically, so a failed write leaves
            no partial file.
        array: the data, as :func:`encode_idx` takes it.
        compress: true gzips the file, false does not; ``None`` (the default) gzips when
            ``path`` ends with ``.gz``.

    >>> import os, tempfile
    >>> import numpy as np
    >>> d = tempfile.mkdtemp()
    >>> images = np.arange(12, dtype=">i4").reshape(3, 2, 2)
    >>> write_idx(os.path.join(d, "a.idx3-ubyte.gz"), images)
    >>> write_idx(os.path.join(d, "b.idx3-ubyte.gz"), images)
    >>> open(os.path.join(d, "a.idx3-ubyte.gz"), "rb").read() == open(os.path.join(d, "b.idx3-ubyte.gz"), "rb").read()
    True
    >>> bool((read_idx(os.path.join(d, "a.idx3-ubyte.gz")) == images).all())
    True
    """
    path = os.fspath(path)
    data = encode_idx(array)
    if compress is None:
        compress = path.endswith(".gz")
    if compress:
        buf = io.BytesIO()
        with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, filename="") as gz:
            gz.write(data)
        data = buf.getvalue()
    # a unique temporary renamed into place: a failed write (full disk) leaves no partial file
    replace_file(path, data)
