"""The TFRecord sidecar index file (``<path>.index``).

Re-exported by :mod:`feedline.tfrecord`, whose docstring documents the on-disk format of
``<path>.index``; :func:`feedline.tfrecord.build_index` writes it.
"""

from __future__ import annotations

import os
import struct

import numpy as np

from feedline._internal.atomic import atomic_open
from feedline.exceptions import CorruptRecordError
from feedline.formats.tfrecord.scan import OVERHEAD
from feedline.storage.fs import file_size, open_file

__all__ = ["TFRecordIndex"]

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")

_INDEX_MAGIC = b"FLTFRIDX"
_INDEX_HEADER = struct.Struct("<8sIIQQ")
_COMPRESSION_CODES = {None: 0, "GZIP": 1, "ZLIB": 2}
_CODE_COMPRESSIONS = {v: k for k, v in _COMPRESSION_CODES.items()}


class TFRecordIndex:
    """Offsets and data lengths of the records of one TFRecord file.

    See the module docstring for the on-disk format.

    Args:
        offsets: ``offsets[i]`` is the byte offset of record ``i``'s frame (in the
            uncompressed stream), kept as a uint64 array.
        lengths: ``lengths[i]`` is record ``i``'s data length, kept as a uint64 array; it
            and ``offsets`` must be 1-D and of the same length, else ``ValueError``.
        file_size: the size in bytes of the indexed file as stored (what :meth:`check`
            compares against).
        compression: the indexed file's compression: ``None`` (the default), ``"GZIP"``
            or ``"ZLIB"``.

    >>> import os, tempfile
    >>> import numpy as np
    >>> index = TFRecordIndex(np.array([0, 20], dtype=np.uint64), np.array([4, 7], dtype=np.uint64),
    ...                       file_size=43)
    >>> path = os.path.join(tempfile.mkdtemp(), "x.tfrecord.index")
    >>> index.save(path)
    >>> loaded = TFRecordIndex.load(path)
    >>> loaded.offsets.tolist(), loaded.lengths.tolist(), loaded.file_size, loaded.compression
    ([0, 20], [4, 7], 43, None)
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
        """Write the index atomically (a temporary file renamed into place).

        Args:
            index_path: the local file to write, usually ``<path>.index``.
        """
        with atomic_open(index_path) as f:
            f.write(
                _INDEX_HEADER.pack(
                    _INDEX_MAGIC,
                    1,
                    _COMPRESSION_CODES[self.compression],
                    len(self),
                    self.file_size,
                )
            )
            f.write(self.offsets.astype("<u8").tobytes())
            f.write(self.lengths.astype("<u8").tobytes())

    @classmethod
    def load(
        cls, index_path: str | os.PathLike, *, storage_options: dict | None = None
    ) -> TFRecordIndex:
        """Read an index file; a damaged one raises :class:`CorruptRecordError`.

        Args:
            index_path: a local path or a URL (see :mod:`feedline.storage.fs`).
            storage_options: passed to fsspec for a URL.
        """
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
        """Raise :class:`CorruptRecordError` if the file at ``path`` is not the size the
        index was built for (the index is stale).

        Args:
            path: the indexed TFRecord file, local or a URL.
            storage_options: passed to fsspec for a URL.
        """
        size = file_size(path, storage_options=storage_options)
        if size != self.file_size:
            raise CorruptRecordError(
                f"stale index: built for a file of {self.file_size} bytes, the file has "
                f"{size}; rebuild it with `feedline index`",
                path=os.fspath(path),
            )
