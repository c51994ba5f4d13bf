"""Random access to an uncompressed local TFRecord file through its sidecar index.

>>> import os, tempfile
>>> from feedline.tfrecord import write
>>> path = os.path.join(tempfile.mkdtemp(), "ra.tfrecord")
>>> write(path, [b"a", b"bb", b"ccc"])
3
>>> with TFRecordFile(path) as f:
...     len(f), f[1], f[-1]
(3, b'bb', b'ccc')
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from typing import Any

import numpy as np

from feedline._internal.closing import Closeable
from feedline.exceptions import CorruptRecordError
from feedline.formats.tfrecord.index import TFRecordIndex
from feedline.formats.tfrecord.reader import scan_index
from feedline.formats.tfrecord.scan import HEADER, OVERHEAD, masked_crc
from feedline.storage.compression import local_path

__all__ = ["TFRecordFile"]

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


class TFRecordFile(Closeable):
    """Random access to the records of an uncompressed TFRecord file.

    ``len(f)`` is the number of records; ``f[i]`` reads record ``i`` with one ``pread``
    (negative indices work; a slice or a list of indices returns a list). Reads are
    thread-safe; the object pickles (the file is reopened in the new process).

    Args:
        path: a local file (a path or a ``file://`` URL): positional reads need a file
            descriptor, and a remote URL raises ``ValueError``. Read remote files
            sequentially with :func:`feedline.tfrecord.read` (``storage_options=...``), or
            copy them first. A compressed file raises ``ValueError``.
        index_path: the sidecar index; ``None`` (the default) means ``<path>.index``. When
            that file does not exist the file is scanned once to build the index in
            memory; a damaged or stale one raises
            :class:`~feedline.exceptions.CorruptRecordError`.
        verify: true (the default) checks both CRCs of each frame read (and of the scan);
            false checks neither.

    >>> import os, tempfile
    >>> from feedline.tfrecord import write
    >>> path = os.path.join(tempfile.mkdtemp(), "r.tfrecord")
    >>> _ = write(path, [b"zero", b"one", b"two"])
    >>> f = TFRecordFile(path)
    >>> len(f), f[1], f[-1], f[[2, 0]]
    (3, b'one', b'two', [b'two', b'zero'])
    >>> f.close()
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        index_path: str | os.PathLike | None = None,
        verify: bool = True,
    ) -> None:
        self.path = local_path(path, "TFRecordFile", "feedline.tfrecord.read")
        self.verify = bool(verify)
        self.index_path = self.path + ".index" if index_path is None else os.fspath(index_path)
        if os.path.exists(self.index_path):
            index = TFRecordIndex.load(self.index_path)
            index.check(self.path)
        else:

            index = scan_index(self.path, compression="auto", verify=verify, on_error="raise")
        if index.compression is not None:
            raise ValueError(
                f"{self.path}: random access needs an uncompressed TFRecord file, this one "
                f"is {index.compression}"
            )
        self.index = index
        self._offsets = index.offsets.astype(np.int64)
        self._lengths = index.lengths.astype(np.int64)
        self._fd: int | None = None

    def __len__(self) -> int:
        return len(self._offsets)

    def _file(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY)
        return self._fd

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self._read(k) for k in range(*i.indices(len(self)))]
        if isinstance(i, (list, tuple, np.ndarray)):
            return [self[int(k)] for k in i]
        if not isinstance(i, (int, np.integer)) or isinstance(i, bool):
            raise TypeError(f"TFRecordFile indices must be int or slice, got {i!r}")
        n = len(self)
        k = int(i) + n if i < 0 else int(i)
        if not 0 <= k < n:
            raise IndexError(f"record index {int(i)} out of range for {n} records")
        return self._read(k)

    def _read(self, k: int) -> bytes:
        offset = int(self._offsets[k])
        length = int(self._lengths[k])
        frame = os.pread(self._file(), length + OVERHEAD, offset)
        if len(frame) < length + OVERHEAD:
            raise CorruptRecordError(
                f"truncated record: {len(frame)} of {length + OVERHEAD} bytes",
                path=self.path,
                index=k,
                offset=offset,
            )
        found = _U64.unpack_from(frame)[0]
        if found != length:
            raise CorruptRecordError(
                f"the index says {length} bytes, the frame says {found}; rebuild the index",
                path=self.path,
                index=k,
                offset=offset,
            )
        if self.verify:
            if masked_crc(frame[:8]) != _U32.unpack_from(frame, 8)[0]:
                raise CorruptRecordError(
                    "corrupted record: length CRC mismatch",
                    path=self.path,
                    index=k,
                    offset=offset,
                )
        data = frame[HEADER : HEADER + length]
        if self.verify and masked_crc(data) != _U32.unpack_from(frame, HEADER + length)[0]:
            raise CorruptRecordError(
                f"corrupted record: data CRC mismatch (data of {length} bytes at byte "
                f"{offset + HEADER})",
                path=self.path,
                index=k,
                offset=offset,
            )
        return data

    def __iter__(self) -> Iterator[bytes]:
        for k in range(len(self)):
            yield self._read(k)

    def close(self) -> None:
        fd, self._fd = getattr(self, "_fd", None), None
        if fd is not None:
            os.close(fd)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_fd"] = None
        return state

