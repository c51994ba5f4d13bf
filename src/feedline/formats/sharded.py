"""Write records spread over ``N`` shard files, all-or-nothing.

``ShardedWriter(prefix, num_shards, format=...)`` opens ``num_shards`` files named
``<prefix>-00000-of-00008<suffix>`` … (five digits or more, TensorFlow's convention),
sends each record to one of them — round robin, or by ``key`` — and on success renames
them into place. Until then every shard lives under a hidden temporary name
(``.<name>.tmp-<random>`` in the same directory), so an interrupted job (an exception in
the ``with`` block, a crash, a killed process) never leaves a file with a final name
that looks complete; leaving the ``with`` block by an exception deletes the temporary
files. Shards that received no record are still written (empty), so that the
``-of-N`` in their names stays true.

``format="tfrecord"`` writes through :class:`feedline.tfrecord.TFRecordWriter`
(``compression`` is passed on); ``format="recordio"`` writes MXNet RecordIO through
:class:`feedline.recordio.IndexedRecordIO`, each ``.rec`` with its ``.idx`` (the index
is renamed first, so a final-named ``.rec`` always has its index). An ``.idx`` key is
the record's ``key`` when one is given (an int or a str; open the shard with
``IndexedRecordIO(..., key_type=str)`` for str keys), else its number in write order
(0, 1, 2, … over all shards).

``prefix`` may also be a format string with ``{index}`` and ``{num_shards}`` fields
(``"out/train-{index:03d}.rec"``), or an existing directory (files are then named
``<dir>/data-00000-of-00008<suffix>``).

>>> import os, tempfile
>>> from feedline import recordio
>>> d = tempfile.mkdtemp()
>>> with ShardedWriter(os.path.join(d, "train"), 2, format="recordio") as w:
...     for i in range(5):
...         _ = w.write(b"record %d" % i)
>>> sorted(os.listdir(d))
['train-00000-of-00002.idx', 'train-00000-of-00002.rec', 'train-00001-of-00002.idx', 'train-00001-of-00002.rec']
>>> list(recordio.read(os.path.join(d, "train-00001-of-00002.rec")))
[b'record 1', b'record 3']
"""

from __future__ import annotations

import os
import uuid
import zlib
from typing import Any

from feedline._internal.validate import one_of, positive_int

__all__ = ["ShardedWriter", "shard_paths"]

_FORMATS = ("tfrecord", "recordio")


def shard_paths(
    prefix: str | os.PathLike, num_shards: int, *, suffix: str = "", name: str = "data"
) -> list[str]:
    """The final file names :class:`ShardedWriter` uses (see the module docstring).

    >>> shard_paths("out/train", 3, suffix=".rec")
    ['out/train-00000-of-00003.rec', 'out/train-00001-of-00003.rec', 'out/train-00002-of-00003.rec']
    >>> shard_paths("out/part-{index}.tfrecord", 2)
    ['out/part-0.tfrecord', 'out/part-1.tfrecord']
    """
    positive_int("num_shards", num_shards)
    prefix = os.fspath(prefix)
    if "{" in prefix:
        paths = [prefix.format(index=i, num_shards=num_shards) for i in range(num_shards)]
        if len(set(paths)) != num_shards:
            raise ValueError(f"`prefix` pattern {prefix!r} does not give {num_shards} distinct names")
        return paths
    if os.path.isdir(prefix) or prefix.endswith(os.sep):
        prefix = os.path.join(prefix, name)
    width = max(5, len(str(num_shards)))
    return [f"{prefix}-{i:0{width}d}-of-{num_shards:0{width}d}{suffix}" for i in range(num_shards)]


def _idx_path(rec_path: str) -> str:
    root, ext = os.path.splitext(rec_path)
    return root + ".idx" if ext == ".rec" else rec_path + ".idx"


def _temp_path(final: str, token: str) -> str:
    directory, base = os.path.split(final)
    return os.path.join(directory, f".{base}.tmp-{token}")


class ShardedWriter:
    """Spread records over ``num_shards`` files; rename them into place on success.

    ``write(record, *, key=None, shard=None)`` returns the shard index used: ``shard``
    if given, else ``key``'s shard (``key % num_shards`` for an int, CRC-32 of the
    UTF-8 bytes for a str or bytes, so the same key always lands in the same shard),
    else the next shard round robin. ``close()`` commits (renames); ``abort()`` deletes
    the temporary files; as a context manager it commits on success and aborts on an
    exception. ``paths`` are the final names, ``counts`` the records per shard.
    """

    def __init__(
        self,
        prefix: str | os.PathLike,
        num_shards: int,
        *,
        format: str = "tfrecord",
        suffix: str | None = None,
        name: str = "data",
        compression: str | None = None,
        fsync: bool = False,
    ) -> None:
        self.num_shards = positive_int("num_shards", num_shards)
        self.format = one_of("format", format, _FORMATS)
        if format == "recordio" and compression is not None:
            raise ValueError(f"`compression` is only for format 'tfrecord', got {compression!r}")
        if suffix is None:
            suffix = ".rec" if format == "recordio" else ""
        self.paths = shard_paths(prefix, num_shards, suffix=suffix, name=name)
        self.counts = [0] * num_shards
        self._fsync = fsync
        self._next = 0
        self._written = 0
        self._state = "open"
        token = uuid.uuid4().hex[:12]
        # (final path, temporary path) pairs, renamed in this order on commit
        self._renames: list[tuple[str, str]] = []
        self._writers: list[Any] = []
        try:
            for final in self.paths:
                directory = os.path.dirname(final)
                if directory:
                    os.makedirs(directory, exist_ok=True)
                tmp = _temp_path(final, token)
                if format == "recordio":
                    from feedline.formats.recordio import IndexedRecordIO

                    tmp_idx = _temp_path(_idx_path(final), token)
                    self._renames.append((_idx_path(final), tmp_idx))
                    self._renames.append((final, tmp))
                    self._writers.append(IndexedRecordIO(tmp_idx, tmp, "w", key_type=str))
                else:
                    from feedline.formats.tfrecord import TFRecordWriter

                    self._renames.append((final, tmp))
                    self._writers.append(TFRecordWriter(tmp, compression=compression))
        except BaseException:
            self.abort()
            raise

    def shard_for(self, key: Any) -> int:
        """The shard a record with ``key`` goes to."""
        if isinstance(key, bool):
            key = int(key)
        if isinstance(key, int):
            return key % self.num_shards
        if isinstance(key, str):
            key = key.encode("utf-8")
        if isinstance(key, (bytes, bytearray, memoryview)):
            return zlib.crc32(key) % self.num_shards
        raise TypeError(f"`key` must be an int, str or bytes, got {type(key).__name__}")

    def write(self, record: bytes, *, key: Any = None, shard: int | None = None) -> int:
        """Write ``record`` to one shard and return that shard's index."""
        if self._state != "open":
            raise ValueError(f"write to a ShardedWriter that is {self._state}")
        if shard is not None:
            if isinstance(shard, bool) or not isinstance(shard, int) or not 0 <= shard < self.num_shards:
                raise ValueError(
                    f"`shard` must be an int in [0, {self.num_shards}), got {shard!r}"
                )
        elif key is not None:
            shard = self.shard_for(key)
        else:
            shard = self._next
            self._next = (self._next + 1) % self.num_shards
        writer = self._writers[shard]
        if self.format == "recordio":
            if key is not None and (isinstance(key, bool) or not isinstance(key, (int, str))):
                raise TypeError(
                    "`key` must be an int or str for format 'recordio' (it is written to "
                    f"the .idx), got {type(key).__name__}"
                )
            writer.write_idx(self._written if key is None else key, record)
        else:
            writer.write(record)
        self.counts[shard] += 1
        self._written += 1
        return shard

    def close(self) -> None:
        """Finish every shard and rename it to its final name (idempotent)."""
        if self._state != "open":
            return
        try:
            for writer in self._writers:
                writer.close()
            if self._fsync:
                for _, tmp in self._renames:
                    fd = os.open(tmp, os.O_RDONLY)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)
            for final, tmp in self._renames:
                os.replace(tmp, final)
        except BaseException:
            self.abort()
            raise
        self._state = "closed"

    def abort(self) -> None:
        """Close and delete the temporary files; no final-named file is created."""
        if self._state == "closed":
            return
        self._state = "aborted"
        for writer in self._writers:
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - cleaning up after a failure already raised
                pass
        for _, tmp in self._renames:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass

    def __enter__(self) -> ShardedWriter:
        return self

    def __exit__(self, exc_type: Any, *exc_info: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __del__(self) -> None:
        # never commit from the garbage collector: an unclosed writer is an interrupted one
        try:
            if getattr(self, "_state", "closed") == "open":
                self.abort()
        except Exception:  # noqa: BLE001 - never raise from a finaliser
            pass
