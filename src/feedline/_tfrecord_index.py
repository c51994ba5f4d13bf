"""The TFRecord sidecar index and random access through it.

Re-exported by :mod:`feedline.tfrecord`, whose docstring documents the on-disk format of
``<path>.index``; :func:`feedline.tfrecord.build_index` writes it.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from typing import Any

import numpy as np

from feedline._atomic import replace_file
from feedline._closing import Closeable
from feedline._compression import local_path
from feedline._tfrecord_scan import HEADER, OVERHEAD, masked_crc
from feedline.exceptions import CorruptRecordError
from feedline.io.fs import file_size, open_file

__all__ = ["TFRecordIndex", "TFRecordFile"]

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")

_INDEX_MAGIC = b"FLTFRIDX"
_INDEX_HEADER = struct.Struct("<8sIIQQ")
_COMPRESSION_CODES = {None: 0, "GZIP": 1, "ZLIB": 2}
_CODE_COMPRESSIONS = {v: k for k, v in _COMPRESSION_CODES.items()}


class TFRecordIndex:
    """Offsets and data lengths of the records of one TFRecord file.

    ``offsets[i]`` is the byte offset of record ``i``'s frame, ``lengths[i]`` its data
    length (both uint64 arrays); ``file_size`` and ``compression`` describe the indexed
    file. See the module docstring for the on-disk format.
    """

    def __init__(
        self,
        offsets: np.ndarray,
        lengths: np.ndarray,
        *,
        file_size: int,
        compression: str | None = None,
    ) -> None:
        self.offsets = np.asarray(offsets, dtype=np.uint64)
        self.lengths = np.asarray(lengths, dtype=np.uint64)
        if self.offsets.shape != self.lengths.shape or self.offsets.ndim != 1:
            raise ValueError("`offsets` and `lengths` must be 1-D arrays of the same length")
        self.file_size = int(file_size)
        self.compression = compression

    def __len__(self) -> int:
        return len(self.offsets)

    def save(self, index_path: str | os.PathLike) -> None:
        """Write the index atomically (a temporary file renamed into place)."""
        index_path = os.fspath(index_path)
        header = _INDEX_HEADER.pack(
            _INDEX_MAGIC, 1, _COMPRESSION_CODES[self.compression], len(self), self.file_size
        )
        replace_file(  # a unique temporary beside the index (never a fixed, plantable name)
            index_path,
            header + self.offsets.astype("<u8").tobytes() + self.lengths.astype("<u8").tobytes(),
        )

    @classmethod
    def load(
        cls, index_path: str | os.PathLike, *, storage_options: dict | None = None
    ) -> TFRecordIndex:
        """Read an index file (a local path or a URL, see :mod:`feedline.io.fs`); a
        damaged one raises :class:`CorruptRecordError`."""
        index_path = os.fspath(index_path)
        with open_file(index_path, "rb", storage_options=storage_options) as f:
            data = f.read()
        if len(data) < _INDEX_HEADER.size:
            raise CorruptRecordError("not a feedline TFRecord index (too short)", path=index_path)
        magic, version, code, count, file_size = _INDEX_HEADER.unpack_from(data)
        if magic != _INDEX_MAGIC:
            raise CorruptRecordError(
                f"not a feedline TFRecord index (magic {magic!r})", path=index_path, offset=0
            )
        if version != 1 or code not in _CODE_COMPRESSIONS:
            raise CorruptRecordError(
                f"unsupported TFRecord index version {version} / compression code {code}",
                path=index_path,
                offset=8,
            )
        expected = _INDEX_HEADER.size + 16 * count
        if len(data) != expected:
            raise CorruptRecordError(
                f"TFRecord index of {count} records should be {expected} bytes, is {len(data)}",
                path=index_path,
            )
        arrays = np.frombuffer(data, dtype="<u8", offset=_INDEX_HEADER.size)
        offsets, lengths = arrays[:count], arrays[count:]
        # every frame must lie inside the indexed file (no huge reads from a damaged index)
        room = np.uint64(max(file_size - OVERHEAD, 0))
        past = (offsets > room) if file_size >= OVERHEAD else np.ones(count, bool)
        past |= lengths > room - np.minimum(offsets, room)
        if past.any():
            k = int(np.argmax(past))
            raise CorruptRecordError(
                f"damaged TFRecord index: entry {k} (offset {int(offsets[k])}, length "
                f"{int(lengths[k])}) runs past the indexed file's {file_size} bytes; rebuild it "
                "with `feedline index`",
                path=index_path,
                offset=_INDEX_HEADER.size + 8 * k,
            )
        return cls(
            arrays[:count].copy(),
            arrays[count:].copy(),
            file_size=file_size,
            compression=_CODE_COMPRESSIONS[code],
        )

    def check(self, path: str | os.PathLike, *, storage_options: dict | None = None) -> None:
        """Raise :class:`CorruptRecordError` if the file at ``path`` (local or a URL) is
        not the size the index was built for (the index is stale)."""
        size = file_size(path, storage_options=storage_options)
        if size != self.file_size:
            raise CorruptRecordError(
                f"stale index: built for a file of {self.file_size} bytes, the file has "
                f"{size}; rebuild it with `feedline index`",
                path=os.fspath(path),
            )


class TFRecordFile(Closeable):
    """Random access to the records of an uncompressed TFRecord file.

    Uses the sidecar index ``index_path`` (default ``<path>.index``); when there is none
    the file is scanned once to build the index in memory. ``len(f)`` is the number of
    records; ``f[i]`` reads record ``i`` with one ``pread`` (negative indices work; a
    slice or a list of indices returns a list). ``verify`` checks the frame's CRCs.
    Reads are thread-safe; the object pickles (the file is reopened in the new process).

    The file must be local (a path or a ``file://`` URL): positional reads need a file
    descriptor, and a remote URL raises ``ValueError``. Read remote files sequentially
    with :func:`feedline.tfrecord.read` (``storage_options=...``), or copy them first.
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
            from feedline.tfrecord import _scan_index  # the reader lives there

            index = _scan_index(self.path, compression="auto", verify=verify, on_error="raise")
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

