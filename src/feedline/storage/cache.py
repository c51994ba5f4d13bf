"""A local cache of remote shards: ``cache_dir=``, ``cache_limit=`` bytes, LRU eviction.

:class:`ShardCache` keeps whole copies of remote files (``s3://...``) in a local
directory, so a second epoch (or a second process) reads them from local disk. Each URL
maps to one entry ``<sha1 of the URL, 16 hex digits>-<basename>``. Several processes
(and threads) may share one directory:

* a download happens under an exclusive lock file (``.<entry>.lock``, ``flock``), so one
  process downloads while the others wait and then use its copy;
* it is written to a temporary file (``.<entry>.tmp-...``) and renamed into place, so a
  reader never sees a partial entry;
* every use sets the entry's modification time to now; when the entries' total size
  exceeds ``limit`` after a download, the least recently used entries are deleted
  (under ``.evict.lock``) until it fits again, never the entry just fetched. A file that
  is open keeps its data on POSIX systems even when its entry is evicted.

Local paths bypass the cache (:meth:`ShardCache.local` returns them unchanged).

>>> import os, tempfile, fsspec
>>> fs = fsspec.filesystem("memory"); fs.pipe("/cache-doc/a.bin", b"abc")
>>> cache = ShardCache(tempfile.mkdtemp(), limit=10)
>>> path = cache.local("memory://cache-doc/a.bin")
>>> open(path, "rb").read(), cache.misses, cache.hits
(b'abc', 1, 0)
>>> cache.local("memory://cache-doc/a.bin") == path, cache.hits
(True, 1)
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import tempfile
import threading
from collections.abc import Iterator

from feedline._internal.validate import optional_positive_int
from feedline.storage.fs import is_remote, open_file

__all__ = ["ShardCache", "DownloadCancelled"]

log = logging.getLogger(__name__)


class DownloadCancelled(Exception):
    """A download abandoned because its ``stop`` event was set."""


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


class ShardCache:
    """Local copies of remote files in ``cache_dir``; see the module docstring.

    ``limit``: the most bytes the entries may hold together (``None``: no limit).
    ``hits`` and ``misses`` count this object's lookups that found an entry or had to
    download one; ``evicted`` counts the entries it deleted.

    >>> import os, tempfile, fsspec
    >>> fs = fsspec.filesystem("memory")
    >>> fs.pipe("/shardcache-doc/a.bin", b"12345"); fs.pipe("/shardcache-doc/b.bin", b"67890")
    >>> cache = ShardCache(tempfile.mkdtemp(), limit=8)
    >>> a = cache.local("memory://shardcache-doc/a.bin")
    >>> b = cache.local("memory://shardcache-doc/b.bin")   # 10 bytes > limit: a is evicted
    >>> open(b, "rb").read(), os.path.exists(a), cache.misses, cache.evicted
    (b'67890', False, 2, 1)
    >>> cache.local("/local/file.rec")                      # local paths bypass the cache
    '/local/file.rec'
    """

    def __init__(self, cache_dir: str | os.PathLike, *, limit: int | None = None,
                 storage_options: dict | None = None) -> None:
        self.cache_dir = os.fspath(cache_dir)
        self.limit = optional_positive_int("cache_limit", limit)
        self.storage_options = storage_options
        os.makedirs(self.cache_dir, exist_ok=True)
        self.hits = self.misses = self.evicted = 0
        self._count_lock = threading.Lock()

    def __getstate__(self) -> dict:  # picklable into worker processes (the lock is not)
        state = self.__dict__.copy()
        del state["_count_lock"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._count_lock = threading.Lock()

    def entry(self, url: str) -> str:
        """The path ``url``'s copy has (or would have) in the cache.

        >>> import tempfile
        >>> os.path.basename(ShardCache(tempfile.mkdtemp()).entry("s3://b/train-01.tar"))
        '168ce557d03da539-train-01.tar'
        """
        digest = hashlib.sha1(url.encode("utf-8")).hexdigest()[:16]
        base = os.path.basename(url.rstrip("/")) or "file"
        return os.path.join(self.cache_dir, f"{digest}-{base}")

    def local(self, url: str | os.PathLike, *, stop: threading.Event | None = None) -> str:
        """A local path holding ``url``'s bytes: the path itself when it is local, else
        its cache entry, downloaded first if missing. Setting ``stop`` (from another
        thread) abandons a download in progress: its temporary file is removed and
        :class:`DownloadCancelled` is raised."""
        url = os.fspath(url)
        if not is_remote(url):
            return url
        dest = self.entry(url)
        if self._touch(dest):
            with self._count_lock:
                self.hits += 1
            return dest
        name = os.path.basename(dest)
        with _locked(os.path.join(self.cache_dir, f".{name}.lock")):
            if self._touch(dest):  # another process fetched it while we waited
                with self._count_lock:
                    self.hits += 1
                return dest
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.tmp-", dir=self.cache_dir)
            try:
                with os.fdopen(fd, "wb") as out, open_file(
                        url, "rb", storage_options=self.storage_options) as src:
                    while True:
                        if stop is not None and stop.is_set():
                            raise DownloadCancelled(f"download of {url} cancelled")
                        block = src.read(1 << 20)
                        if not block:
                            break
                        out.write(block)
                os.replace(tmp, dest)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
            with self._count_lock:
                self.misses += 1
            log.debug("cached %s as %s", url, dest)
        if self.limit is not None:
            self.evict(keep=dest)
        return dest

    @staticmethod
    def _touch(path: str) -> bool:
        try:
            os.utime(path)
            return True
        except FileNotFoundError:
            return False

    def entries(self) -> list[tuple[str, int, float]]:
        """``(path, size, last use)`` of every entry, least recently used first."""
        out = []
        for name in os.listdir(self.cache_dir):
            if name.startswith("."):
                continue
            path = os.path.join(self.cache_dir, name)
            try:
                st = os.stat(path)
            except FileNotFoundError:
                continue
            out.append((path, st.st_size, st.st_mtime))
        out.sort(key=lambda e: (e[2], e[0]))
        return out

    def evict(self, *, keep: str | None = None) -> int:
        """Delete least recently used entries until the total fits ``limit`` (``keep``
        is never deleted); return how many were deleted.

        >>> import tempfile, time
        >>> cache = ShardCache(tempfile.mkdtemp(), limit=5)
        >>> for i, name in enumerate(["old", "new"]):
        ...     path = os.path.join(cache.cache_dir, name)
        ...     open(path, "wb").write(b"1234"); os.utime(path, (i, i))
        4
        4
        >>> cache.evict(), [os.path.basename(p) for p, _, _ in cache.entries()]
        (1, ['new'])
        """
        if self.limit is None:
            return 0
        removed = 0
        with _locked(os.path.join(self.cache_dir, ".evict.lock")):
            entries = self.entries()
            total = sum(size for _, size, _ in entries)
            for path, size, _ in entries:
                if total <= self.limit:
                    break
                if path == keep:
                    continue
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                    removed += 1
                    log.debug("evicted %s (%d bytes)", path, size)
                total -= size
        with self._count_lock:
            self.evicted += removed
        return removed
