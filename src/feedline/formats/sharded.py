"""The implementation of :mod:`feedline.sharded`, whose page documents it: import the
public names from ``feedline.sharded``."""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
import zlib
from collections.abc import Iterable
from typing import Any

from feedline._internal.atomic import replace_file
from feedline._internal.pid import left_by_dead_writers
from feedline._internal.validate import one_of, positive_int
from feedline.exceptions import IncompleteShardSetError

__all__ = ["ShardedWriter", "shard_paths", "check_shard_sets", "manifest_path"]

logger = logging.getLogger(__name__)

_SET_NAME = re.compile(r"^(?P<prefix>.*)-(?P<index>\d{5,})-of-(?P<num>\d{5,})(?P<suffix>.*)$")
_TMP_NAME = re.compile(r"\.tmp-(?P<pid>\d+)-[0-9a-f]+$")

_FORMATS = ("tfrecord", "recordio")


def shard_paths(
    prefix: str | os.PathLike, num_shards: int, *, suffix: str = "", name: str = "data"
) -> list[str]:
    """The final file names :class:`ShardedWriter` uses (see the module docstring).

    Args:
        prefix: the names' start: ``<prefix>-00000-of-0000N<suffix>`` (five digits or
            more); a format string with ``{index}`` and ``{num_shards}`` fields (that
            must give distinct names, else ``ValueError``); or an existing directory (or
            one ending with a separator), in which files are named after ``name``.
        num_shards: how many files, a positive int.
        suffix: appended to each ``-of-N`` name (default ``""``); not used with a format
            string.
        name: the file name prefix inside a directory ``prefix`` (default ``"data"``).

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


def manifest_path(shard_path: str | os.PathLike) -> str | None:
    """The manifest of the ``-of-N`` set ``shard_path`` belongs to.

    Args:
        shard_path: a shard's path; ``None`` is returned for a name that is not
            ``<prefix>-<index>-of-<N><suffix>``.

    >>> manifest_path("out/train-00001-of-00004.rec")
    'out/.train-of-00004.manifest.json'
    >>> manifest_path("out/part-1.rec") is None
    True
    """
    directory, base = os.path.split(os.fspath(shard_path))
    m = _SET_NAME.match(base)
    if m is None:
        return None
    return os.path.join(directory, f".{m['prefix']}-of-{m['num']}.manifest.json")


def _remove_stale_temporaries(final: str) -> None:
    """Delete ``.<name>.tmp-<pid>-<random>`` files beside ``final`` left by dead writers."""
    directory, base = os.path.split(final)
    for name in left_by_dead_writers(directory, f".{base}.tmp-", _TMP_NAME):
        try:
            os.unlink(os.path.join(directory, name))
            logger.info("removed %s, left by a writer that died", name)
        except FileNotFoundError:
            pass


def _load_manifest(path: str) -> dict | None:
    try:
        with open(path, "rb") as f:
            raw = f.read(1 << 24)
    except FileNotFoundError:
        return None
    try:
        manifest = json.loads(raw)
        if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
            raise ValueError("no `files` table")
    except ValueError as exc:
        raise IncompleteShardSetError(f"damaged shard-set manifest: {exc}", path=path) from exc
    return manifest


def check_shard_sets(paths: Iterable[str | os.PathLike]) -> None:
    """Raise :class:`~feedline.exceptions.IncompleteShardSetError` if any of ``paths``
    belongs to a ``-of-N`` set that :class:`ShardedWriter` did not finish, or whose files
    no longer match its manifest (a listed file missing or of another size).

    Args:
        paths: the files about to be read. Files that are not part of a set with a
            manifest are not checked; remote URLs are skipped.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> with ShardedWriter(os.path.join(d, "t"), 2) as w:
    ...     _ = w.write(b"x")
    >>> check_shard_sets([os.path.join(d, "t-00000-of-00002")])   # complete: no error
    >>> os.remove(os.path.join(d, "t-00001-of-00002"))
    >>> check_shard_sets([os.path.join(d, "t-00000-of-00002")])
    Traceback (most recent call last):
    ...
    feedline.exceptions.IncompleteShardSetError: ...: incomplete shard set: t-00001-of-00002 is missing (1 of 2 files present); rewrite the set
    """
    groups: dict[str, list[str]] = {}
    for p in paths:
        p = os.fspath(p)
        if "://" in p:
            continue
        mpath = manifest_path(p)
        if mpath is not None:
            groups.setdefault(mpath, []).append(p)
    for mpath, members in groups.items():
        manifest = _load_manifest(mpath)
        if manifest is None:
            continue
        listed = manifest["files"]
        if not any(os.path.basename(p) in listed for p in members):
            continue  # another set with the same prefix and N overwrote the manifest
        directory = os.path.dirname(mpath)
        if not manifest.get("complete"):
            present = sum(os.path.exists(os.path.join(directory, n)) for n in listed)
            raise IncompleteShardSetError(
                f"incomplete shard set: its writer did not finish ({present} of {len(listed)} "
                "files in place); rewrite the set (a new ShardedWriter cleans up)",
                path=mpath,
            )
        for name, size in listed.items():
            full = os.path.join(directory, name)
            try:
                actual = os.path.getsize(full)
            except FileNotFoundError:
                present = sum(os.path.exists(os.path.join(directory, n)) for n in listed)
                raise IncompleteShardSetError(
                    f"incomplete shard set: {name} is missing ({present} of {len(listed)} "
                    "files present); rewrite the set",
                    path=mpath,
                ) from None
            if actual != size:
                raise IncompleteShardSetError(
                    f"shard set changed since it was written: {name} has {actual} bytes, the "
                    f"manifest says {size}; rewrite the set",
                    path=mpath,
                )


class ShardedWriter:
    """Spread records over ``num_shards`` files; rename them into place on success.

    ``close()`` commits (renames); ``abort()`` deletes the temporary files; as a context
    manager it commits on success and aborts on an exception. ``paths`` are the final
    names, ``counts`` the records per shard.

    Args:
        prefix: where the shards go, as :func:`shard_paths` takes it: a name prefix, a
            format string with ``{index}``/``{num_shards}``, or a directory.
        num_shards: how many files, a positive int (else ``ValueError``/``TypeError``).
        format: ``"tfrecord"`` (the default) or ``"recordio"`` (each ``.rec`` with its
            ``.idx``); anything else raises ``ValueError``.
        suffix: appended to each file name; ``None`` (the default) means ``".rec"`` for
            RecordIO and ``""`` for TFRecord.
        name: the file name prefix when ``prefix`` is a directory (default ``"data"``).
        compression: for TFRecord, ``None`` (the default), ``"GZIP"`` or ``"ZLIB"``; with
            RecordIO anything but ``None`` raises ``ValueError``.
        fsync: true makes ``close()`` fsync every file and the manifest's directory before
            returning; false (the default) leaves that to the operating system.

    >>> import os, tempfile
    >>> from feedline.tfrecord import read
    >>> d = tempfile.mkdtemp()
    >>> with ShardedWriter(os.path.join(d, "train"), 2, suffix=".tfrecord") as w:
    ...     rounds = [w.write(b"r%d" % i) for i in range(3)]
    ...     keyed = w.write(b"k", key=5), w.write(b"s", shard=0)
    >>> rounds, keyed, w.counts
    ([0, 1, 0], (1, 0), [3, 2])
    >>> [os.path.basename(p) for p in w.paths]
    ['train-00000-of-00002.tfrecord', 'train-00001-of-00002.tfrecord']
    >>> list(read(w.paths[0])), list(read(w.paths[1]))
    ([b'r0', b'r2', b's'], [b'r1', b'k'])
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
        token = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self._manifest = manifest_path(self.paths[0]) if "{" not in os.fspath(prefix) else None
        # (final path, temporary path) pairs, renamed in this order on commit
        self._renames: list[tuple[str, str]] = []
        self._writers: list[Any] = []
        try:
            for final in self.paths:
                directory = os.path.dirname(final)
                if directory:
                    os.makedirs(directory, exist_ok=True)
                _remove_stale_temporaries(final)
                tmp = _temp_path(final, token)
                if format == "recordio":
                    _remove_stale_temporaries(_idx_path(final))
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
        """The shard a record with ``key`` goes to.

        Args:
            key: an int (``key % num_shards``), or a str or bytes (CRC-32 of the UTF-8
                bytes, modulo ``num_shards``), so the same key always lands in the same
                shard; another type raises ``TypeError``.
        """
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
        """Write ``record`` to one shard and return that shard's index.

        Args:
            record: the record's bytes.
            key: picks the shard by :meth:`shard_for` when ``shard`` is not given; for
                RecordIO it is also the ``.idx`` key (an int or a str, else
                ``TypeError``). ``None`` (the default): round robin, and for RecordIO
                the record's number in write order as its key.
            shard: the shard index, an int in ``[0, num_shards)`` (else ``ValueError``);
                it takes precedence over ``key``. ``None`` (the default) lets ``key`` or
                round robin decide.

        Raises:
            ValueError: the writer is closed, aborted or handed over.
        """
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

    def hand_over(self) -> list[tuple[str, str | None]]:
        """Let writers elsewhere (Ray tasks on a shared file system) write the shards:
        close this writer's own (still empty) files and return each shard's temporary
        names, ``(records, index)`` in shard order (``index`` is ``None`` for TFRecord).
        Replace each file whole, set :attr:`counts`; ``close()`` then commits what they
        wrote as usual (the manifest takes the sizes from the files), ``abort()`` deletes
        them. ``write`` is refused afterwards.

        >>> import os, tempfile
        >>> d = tempfile.mkdtemp()
        >>> w = ShardedWriter(os.path.join(d, "t"), 2, suffix=".tfrecord")
        >>> temps = w.hand_over()
        >>> for shard, (records, _) in enumerate(temps):
        ...     _ = open(records, "wb").write(b"from elsewhere %d" % shard)
        >>> w.counts = [1, 1]
        >>> w.close()
        >>> open(w.paths[1], "rb").read()
        b'from elsewhere 1'
        """
        if self._state != "open" or self._written:
            raise ValueError(f"hand_over needs a ShardedWriter that is open and unwritten, this is {self._state}")
        for writer in self._writers:
            writer.close()
        self._state = "handed over"
        temporary = dict(self._renames)
        return [(temporary[p], temporary.get(_idx_path(p)) if self.format == "recordio" else None)
                for p in self.paths]

    def close(self) -> None:
        """Finish every shard and rename it to its final name (idempotent)."""
        if self._state not in ("open", "handed over"):
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
            files = {os.path.basename(final): os.path.getsize(tmp) for final, tmp in self._renames}
            if self._manifest is not None:  # 1. pending: readers refuse a half-renamed set
                self._write_manifest(files, complete=False)
            for final, tmp in self._renames:  # 2. the shards, one by one
                os.replace(tmp, final)
            if self._manifest is not None:  # 3. complete, written last
                self._write_manifest(files, complete=True)
        except BaseException:
            self.abort()
            raise
        self._state = "closed"

    def _write_manifest(self, files: dict[str, int], *, complete: bool) -> None:
        assert self._manifest is not None  # callers check that the set has a manifest
        body = {
            "version": 1,
            "complete": complete,
            "format": self.format,
            "num_shards": self.num_shards,
            "records": self.counts,
            "files": files,
        }
        replace_file(self._manifest, json.dumps(body, indent=1).encode() + b"\n")
        if self._fsync:
            fd = os.open(os.path.dirname(os.path.abspath(self._manifest)), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

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
            if getattr(self, "_state", "closed") in ("open", "handed over"):
                self.abort()
        except Exception:  # noqa: BLE001 - never raise from a finaliser
            pass
