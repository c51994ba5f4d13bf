"""One node-local cache of remote objects for every reader: ``cache_dir=``, a size bound,
LRU eviction, read-ahead, and one download routine that never trusts a short download.

:class:`ShardCache` keeps copies of remote files (``s3://...``) in a local directory, so
a second epoch (or a second process on the same node) reads them from local disk. It
holds two kinds of entries:

* a **whole object** (:meth:`ShardCache.local`): ``<sha1 of the URL, 16 hex
  digits>-<basename>``, used by the streaming readers (TFRecord and its ``.index``,
  RecordIO and its ``.idx``, text, CSV, WebDataset tars ...);
* **blocks** of an object (:meth:`ShardCache.read_range`): ``<entry>.<fingerprint>.b<k>``,
  ``block_size`` bytes each, used by the readers that read byte ranges (InputSplit
  parts, Parquet row groups, Arrow record batches), so a rank fetches only the blocks
  its ranges touch.

Every use first asks the store for the object's size and ETag (or modification time): a
copy made from another version of the object is stale and fetched again. That is one
``HEAD`` per open, never a data ``GET``.

Several processes (ranks, DataLoader workers) and threads may share one directory, and
each byte is fetched once per node:

* a download happens under an exclusive lock file per object (``.<entry>.lock``,
  ``flock``, released by the kernel even when its process is killed); the others wait
  and then use its copy;
* :func:`download` writes to a temporary file (``.<entry>.tmp-...``) and checks what came
  back before anything is renamed into place: the byte count of every ranged ``GET``, its
  ``Content-Range``, the object's ETag (S3 ``If-Match``) and, where the ETag is a plain
  MD5, the checksum of a whole object. A short, empty, cut or mismatched reply is retried
  (at most ``ATTEMPTS`` times) and then raises
  :class:`~feedline.exceptions.IncompleteDownloadError`; nothing partial is ever renamed
  into the cache. A whole entry's fingerprint (``.<entry>.meta``) is written only after
  its data, so a process killed half-way leaves at most a temporary file, which the next
  :class:`ShardCache` on that directory deletes;
* every use sets the entry's modification time to now; when the entries' total size
  exceeds ``limit`` after a download, the least recently used entries are deleted
  (under ``.evict.lock``) until it fits again, never the entry just fetched. A file that
  is open keeps its data on POSIX systems even when its entry is evicted.

Readers use the cache when their ``storage_options`` carry feedline's keys
``"cache_dir"`` (and optionally ``"cache_limit"`` bytes, ``"cache_block_size"``,
``"read_ahead"`` (default ``True``), ``"verify_checksum"`` (default ``True``)); those
keys are never passed to fsspec. :func:`cache_for` returns the process's cache for such
options. Local paths bypass the cache (:meth:`ShardCache.local` returns them unchanged).

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
import errno
import fcntl
import hashlib
import json
import logging
import os
import re
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

from feedline._internal.validate import optional_positive_int, positive_int
from feedline.exceptions import IncompleteDownloadError
from feedline.storage.fs import as_remote_error, filesystem, is_remote, remote_errors

__all__ = ["ShardCache", "DownloadCancelled", "cache_for", "with_cache", "download",
           "fingerprint", "CACHE_KEYS", "ATTEMPTS", "DEFAULT_BLOCK_SIZE"]

log = logging.getLogger(__name__)

#: feedline's own keys in ``storage_options`` (never passed to fsspec)
CACHE_KEYS = ("cache_dir", "cache_limit", "cache_block_size", "read_ahead", "verify_checksum")
#: tries of one ranged GET whose reply is short, cut or mismatched before giving up
ATTEMPTS = 3
#: bytes per block entry of :meth:`ShardCache.read_range`
DEFAULT_BLOCK_SIZE = 4 << 20
#: bytes per ranged GET of a whole-object download
_CHUNK = 16 << 20
_MD5 = re.compile(r"^[0-9a-f]{32}$")


class DownloadCancelled(Exception):
    """A download abandoned because its ``stop`` event was set."""


class _Changed(Exception):
    """The object changed while it was being downloaded (its ETag no longer matches)."""


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def fingerprint(info: dict) -> dict:
    """What identifies one version of a remote object, from fsspec's ``info()``: its size
    and its ETag (or MD5), or where the store gives none its modification time, as
    JSON-able values. (A listing and a ``HEAD`` state the time at different precisions,
    so it is not compared where an ETag decides.)

    Args:
        info: the info dict fsspec returns for the object; it must have ``"size"``
            (else ``KeyError``).

    >>> fingerprint({"size": 3, "ETag": '"abc"', "LastModified": "2026-01-01"})
    {'size': 3, 'etag': '"abc"', 'mtime': None}
    >>> fingerprint({"size": 3, "created": 1700000000.5})
    {'size': 3, 'etag': None, 'mtime': '1700000000.5'}
    """
    etag = info.get("ETag", info.get("etag", info.get("md5Hash")))
    mtime = None
    for key in ("LastModified", "mtime", "updated", "last_modified", "created"):
        if etag is None and info.get(key) is not None:
            mtime = str(info[key])
            break
    return {"size": int(info["size"]), "etag": None if etag is None else str(etag),
            "mtime": mtime}


# --------------------------------------------------------------------------- download


async def _s3_get(fs: Any, url: str, start: int, end: int, etag: str | None) -> tuple:
    bucket, key, version = fs.split_path(url)
    kw: dict[str, Any] = {"Range": f"bytes={start}-{end - 1}"}
    if etag:
        kw["IfMatch"] = etag
    if version:
        kw["VersionId"] = version
    resp = await fs._call_s3("get_object", Bucket=bucket, Key=key, **kw)
    try:
        body = await resp["Body"].read()
    finally:
        resp["Body"].close()
    return body, resp.get("ContentRange"), resp.get("ETag")


def _fetch(fs: Any, url: str, start: int, end: int, fp: dict) -> bytes:
    """One ranged GET of bytes ``[start, end)``, checked; raises
    :class:`IncompleteDownloadError` (or :class:`_Changed`) on a bad reply."""
    if hasattr(fs, "_call_s3") and hasattr(fs, "split_path"):  # S3: If-Match, Content-Range
        from fsspec.asyn import sync

        try:
            data, crange, etag = sync(fs.loop, _s3_get, fs, url, start, end, fp["etag"])
        except OSError as exc:
            if exc.errno == errno.EINVAL and "recondition" in str(exc):  # 412
                raise _Changed(str(exc)) from exc
            raise
        if fp["etag"] and etag and etag != fp["etag"]:
            raise _Changed(f"ETag {etag} is not {fp['etag']}")
        want = f"bytes {start}-{end - 1}/{fp['size']}"
        if crange is not None and crange != want:
            raise IncompleteDownloadError(
                f"asked for bytes [{start}, {end}), the reply's Content-Range is {crange!r}",
                path=url, offset=start)
    else:
        data = fs.cat_file(url, start=start, end=end)
    if len(data) != end - start:
        raise IncompleteDownloadError(
            f"asked for bytes [{start}, {end}) ({end - start} bytes), got {len(data)}",
            path=url, offset=start)
    return data


def _checked(fs: Any, url: str, start: int, end: int, fp: dict) -> bytes:
    """:func:`_fetch` with up to :data:`ATTEMPTS` tries for a reply that is short, cut or
    mismatched. Errors the store's client already retried (timeouts, refused
    connections, throttling) are not tried again here, so the time to fail stays
    bounded (:data:`feedline.storage.fs.REMOTE_TIMEOUT`)."""
    last: BaseException | None = None
    for _ in range(ATTEMPTS):
        try:
            return _fetch(fs, url, start, end, fp)
        except _Changed:
            raise
        except IncompleteDownloadError as exc:
            last = exc
        except Exception as exc:  # noqa: BLE001 - sorted below
            new = as_remote_error(exc, url, start)
            if new is exc:
                raise
            if not _retryable_body_error(exc):
                raise new from exc
            last = IncompleteDownloadError(f"the reply to a GET of bytes [{start}, {end}) "
                                           f"was cut or damaged ({type(exc).__name__}: {exc})",
                                           path=url, offset=start)
            last.__cause__ = exc
    assert last is not None
    raise last


def _retryable_body_error(exc: BaseException) -> bool:
    """A reply body cut short or failing the client's checksum (the client's own retries
    cover the request, not the body)."""
    return type(exc).__name__ in ("ClientPayloadError", "ServerDisconnectedError",
                                  "ConnectionClosedError", "IncompleteRead", "ClientOSError",
                                  "ConnectionResetError", "FlexibleChecksumError")


def download(fs: Any, url: str, out: Any, fp: dict, *, start: int = 0, end: int | None = None,
             stop: threading.Event | None = None, verify_checksum: bool = True) -> int:
    """Write bytes ``[start, end)`` of ``url`` (the whole object by default) into the open
    binary file ``out``, in ranged GETs each checked (length, ``Content-Range``, ETag);
    a whole object whose ETag is a plain MD5 is checked against it too. Returns the bytes
    written. Raises :class:`IncompleteDownloadError` for what cannot be made whole in
    :data:`ATTEMPTS` tries, :class:`DownloadCancelled` when ``stop`` is set.

    Args:
        fs: the fsspec filesystem of ``url`` (S3 replies are checked for
            ``Content-Range`` and ETag with ``If-Match``; other stores for length).
        url: the object's URL.
        out: an open binary file the bytes are written to, in order.
        fp: the object's :func:`fingerprint`: its ``"size"`` bounds ``end`` and its
            ``"etag"`` must still match.
        start: the first byte's offset.
        end: the offset after the last byte, at most the object's size; ``None``: the end.
        stop: checked before each ranged GET (16 MiB each); when set, the download stops
            with :class:`DownloadCancelled`.
        verify_checksum: check a whole object against an ETag that is a plain MD5.

    >>> import io, fsspec
    >>> fs = fsspec.filesystem("memory"); fs.pipe("/download-doc/a", b"0123456789")
    >>> out = io.BytesIO()
    >>> download(fs, "memory://download-doc/a", out, {"size": 10, "etag": None}, start=2, end=6)
    4
    >>> out.getvalue()
    b'2345'
    """
    size = fp["size"]
    end = size if end is None else min(end, size)
    md5 = None
    whole = start == 0 and end == size
    etag = (fp.get("etag") or "").strip('"')
    if whole and verify_checksum and _MD5.match(etag):
        md5 = hashlib.md5(usedforsecurity=False)
    pos = start
    while pos < end:
        if stop is not None and stop.is_set():
            raise DownloadCancelled(f"download of {url} cancelled")
        hi = min(pos + _CHUNK, end)
        data = _checked(fs, url, pos, hi, fp)
        out.write(data)
        if md5 is not None:
            md5.update(data)
        pos = hi
    if md5 is not None and md5.hexdigest() != etag:
        raise IncompleteDownloadError(
            f"checksum mismatch: the {size} bytes downloaded have MD5 {md5.hexdigest()}, "
            f"the object's ETag is {etag}", path=url, offset=0)
    return end - start


# --------------------------------------------------------------------------- the cache


class ShardCache:
    """Local copies of remote files in ``cache_dir``; see the module docstring.

    ``hits`` and ``misses`` count this object's lookups that found an entry or had to
    download one; ``evicted`` the entries it deleted; ``fetched_bytes`` the bytes it
    downloaded. Making one deletes the temporary files of dead downloads (:meth:`sweep`).

    Args:
        cache_dir: the directory holding the entries, created if missing; several
            processes may share it.
        limit: the most bytes the entries may hold together (``None``: no limit); not a
            positive int raises ``TypeError``/``ValueError`` naming ``cache_limit``.
        storage_options: fsspec options for the store; feedline's cache keys in it are
            dropped.
        block_size: bytes per block entry of :meth:`read_range`; must be a positive int
            (the error names ``cache_block_size``).
        read_ahead: after a block is fetched, fetch the next one in the background, and
            let :meth:`prefetch_next` fetch the next planned object (readers call it for
            the next shard).
        verify_checksum: check each whole object downloaded against an ETag that is a
            plain MD5.

    >>> import os, tempfile, fsspec
    >>> fs = fsspec.filesystem("memory")
    >>> fs.pipe("/shardcache-doc/a.bin", b"12345"); fs.pipe("/shardcache-doc/b.bin", b"67890")
    >>> cache = ShardCache(tempfile.mkdtemp(), limit=8)
    >>> a = cache.local("memory://shardcache-doc/a.bin")
    >>> b = cache.local("memory://shardcache-doc/b.bin")   # 10 bytes > limit: a is evicted
    >>> open(b, "rb").read(), os.path.exists(a), cache.misses, cache.evicted
    (b'67890', False, 2, 1)
    >>> cache.read_range("memory://shardcache-doc/a.bin", 1, 3)
    b'23'
    >>> cache.local("/local/file.rec")                      # local paths bypass the cache
    '/local/file.rec'
    """

    def __init__(self, cache_dir: str | os.PathLike, *, limit: int | None = None,
                 storage_options: dict | None = None, block_size: int = DEFAULT_BLOCK_SIZE,
                 read_ahead: bool = True, verify_checksum: bool = True) -> None:
        self.cache_dir = os.fspath(cache_dir)
        self.limit = optional_positive_int("cache_limit", limit)
        self.block_size = positive_int("cache_block_size", block_size)
        self.storage_options = {k: v for k, v in (storage_options or {}).items()
                                if k not in CACHE_KEYS}
        self.read_ahead = bool(read_ahead)
        self.verify_checksum = bool(verify_checksum)
        os.makedirs(self.cache_dir, exist_ok=True)
        self.hits = self.misses = self.evicted = self.fetched_bytes = 0
        self._init_runtime()
        self.sweep()

    def _init_runtime(self) -> None:
        self._count_lock = threading.Lock()
        self._ahead: dict[tuple, threading.Thread] = {}
        self._next: dict[str, str] = {}
        self._known: dict[str, dict] = {}

    def __getstate__(self) -> dict:  # picklable into worker processes (locks, threads not)
        state = self.__dict__.copy()
        for key in ("_count_lock", "_ahead", "_next", "_known"):
            del state[key]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    # ------------------------------------------------------------------ names
    def entry(self, url: str) -> str:
        """The path ``url``'s whole copy has (or would have) in the cache.

        Args:
            url: the remote object's URL.

        >>> import tempfile
        >>> os.path.basename(ShardCache(tempfile.mkdtemp()).entry("s3://b/train-01.tar"))
        '168ce557d03da539-train-01.tar'
        """
        digest = hashlib.sha1(url.encode("utf-8")).hexdigest()[:16]
        base = os.path.basename(url.rstrip("/")) or "file"
        return os.path.join(self.cache_dir, f"{digest}-{base}")

    def _hidden(self, entry: str, suffix: str) -> str:
        return os.path.join(self.cache_dir, f".{os.path.basename(entry)}{suffix}")

    def _block_path(self, url: str, fp: dict, k: int) -> str:
        tag = hashlib.sha1(json.dumps(fp, sort_keys=True).encode()).hexdigest()[:8]
        return f"{self.entry(url)}.{tag}.b{k}"

    # ------------------------------------------------------------------ remote facts
    def _fs(self, url: str) -> Any:
        return filesystem(url, self.storage_options)

    def info(self, url: str) -> dict:
        """The :func:`fingerprint` of ``url`` as the store reports it now (one ``HEAD``);
        ``FileNotFoundError`` when it is missing.

        Args:
            url: the remote object's URL.
        """
        fs = self._fs(url)
        with remote_errors(url):
            try:
                info = fs.info(url, refresh=True)
            except TypeError:  # a filesystem without ``refresh``
                info = fs.info(url)
        return fingerprint(info)

    # ------------------------------------------------------------------ whole objects
    def _valid(self, dest: str, fp: dict) -> bool:
        """``dest`` holds the version ``fp`` describes (its fingerprint matches and its
        size is right); touched when it does."""
        try:
            with open(self._hidden(dest, ".meta")) as f:
                meta = json.load(f)
            if meta != fp or os.stat(dest).st_size != fp["size"]:
                return False
            os.utime(dest)
        except (OSError, ValueError):
            return False
        return True

    def local(self, url: str | os.PathLike, *, stop: threading.Event | None = None,
              fp: dict | None = None) -> str:
        """A local path holding ``url``'s bytes: the path itself when it is local, else
        its cache entry, downloaded first if it is missing or stale (``fp``: the
        fingerprint, when the caller already has it). Setting ``stop`` (from another
        thread) abandons a download in progress: its temporary file is removed and
        :class:`DownloadCancelled` is raised.

        Args:
            url: a local path (returned unchanged) or a remote URL.
            stop: an event that, set from another thread, cancels the download.
            fp: the object's fingerprint when the caller already has it (spares a
                ``HEAD``); ``None`` uses a listing's or asks the store.
        """
        url = os.fspath(url)
        if not is_remote(url):
            return url
        dest = self.entry(url)
        for attempt in range(2):
            if attempt:
                fp = self.info(url)
            elif fp is None:
                fp = self.fingerprint_of(url, consume=stop is None)
            if self._valid(dest, fp):
                self._count(hits=1)
                return dest
            try:
                fetched = self._fetch_whole(url, dest, fp, stop)
            except _Changed:
                if attempt:
                    raise IncompleteDownloadError(
                        "the object changed twice while it was being downloaded",
                        path=url, offset=0) from None
                continue
            break
        if fetched and self.limit is not None:
            self.evict(keep=dest)
        return dest

    def _fetch_whole(self, url: str, dest: str, fp: dict, stop: threading.Event | None) -> bool:
        with _locked(self._hidden(dest, ".lock")):
            if self._valid(dest, fp):  # another process fetched it while we waited
                self._count(hits=1)
                return False
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._hidden(dest, ".meta"))  # the old copy is no longer valid
            self._write(url, dest, fp, 0, fp["size"], stop)
            with open(self._hidden(dest, ".meta.tmp"), "w") as f:
                json.dump(fp, f)
            os.replace(self._hidden(dest, ".meta.tmp"), self._hidden(dest, ".meta"))
            self._count(misses=1)
            log.debug("cached %s as %s", url, dest)
        return True

    def _write(self, url: str, dest: str, fp: dict, start: int, end: int,
               stop: threading.Event | None) -> None:
        """Download ``[start, end)`` of ``url`` into a temporary file, then rename it to
        ``dest`` (the caller holds the object's lock)."""
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(self.entry(url))}.tmp-",
                                   dir=self.cache_dir)
        try:
            with os.fdopen(fd, "wb") as out:
                n = download(self._fs(url), url, out, fp, start=start, end=end, stop=stop,
                             verify_checksum=self.verify_checksum)
            os.replace(tmp, dest)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self._count(fetched=n)

    def _count(self, *, hits: int = 0, misses: int = 0, fetched: int = 0) -> None:
        with self._count_lock:
            self.hits += hits
            self.misses += misses
            self.fetched_bytes += fetched

    # ------------------------------------------------------------------ byte ranges
    def read_range(self, url: str, start: int, end: int, *, fp: dict | None = None) -> bytes:
        """Bytes ``[start, end)`` of ``url`` (fewer only at the object's end), from its
        whole entry when there is a valid one, else from block entries fetched as
        needed. With ``read_ahead``, the block after the last one read is fetched in
        the background.

        Args:
            url: the remote object's URL.
            start: the first byte's offset.
            end: the offset after the last byte; ``end <= start`` gives ``b""``.
            fp: the object's fingerprint when the caller already has it; ``None`` uses a
                listing's or asks the store.
        """
        fp = self.fingerprint_of(url) if fp is None else fp
        end = min(end, fp["size"])
        if end <= start:
            return b""
        whole = self.entry(url)
        if self._valid(whole, fp):
            with contextlib.suppress(FileNotFoundError):  # else evicted since: use blocks
                with open(whole, "rb") as f:
                    data = os.pread(f.fileno(), end - start, start)
                self._count(hits=1)
                return data
        bs = self.block_size
        first, last = start // bs, (end - 1) // bs
        parts = []
        for k in range(first, last + 1):
            lo, hi = max(start, k * bs) - k * bs, min(end, (k + 1) * bs) - k * bs
            for attempt in range(2):
                try:
                    with open(self._block(url, fp, k), "rb") as f:
                        parts.append(os.pread(f.fileno(), hi - lo, lo))
                    break
                except FileNotFoundError:  # evicted by another process in between
                    if attempt:
                        raise
        if self.read_ahead and (last + 1) * bs < fp["size"]:
            self._in_background(("block", url, last + 1), self._block, url, fp, last + 1)
        return b"".join(parts)

    def _block(self, url: str, fp: dict, k: int) -> str:
        """The path of block ``k`` of ``url`` (version ``fp``), fetched if missing."""
        path = self._block_path(url, fp, k)
        want = min(self.block_size, fp["size"] - k * self.block_size)
        if self._present(path, want):
            self._count(hits=1)
            return path
        with _locked(self._hidden(self.entry(url), ".lock")):
            if self._present(path, want):
                self._count(hits=1)
                return path
            try:
                self._write(url, path, fp, k * self.block_size, k * self.block_size + want, None)
            except _Changed as exc:
                raise IncompleteDownloadError(f"the object changed while it was read ({exc})",
                                              path=url, offset=k * self.block_size) from None
            self._count(misses=1)
        if self.limit is not None:
            self.evict(keep=path)
        return path

    @staticmethod
    def _present(path: str, size: int) -> bool:
        try:
            if os.stat(path).st_size != size:
                return False
            os.utime(path)
        except OSError:
            return False
        return True

    # ------------------------------------------------------------------ read-ahead
    def plan(self, urls: list[str]) -> None:
        """Remember the order of ``urls``: :meth:`prefetch_next` then fetches the object
        after the one being opened.

        Args:
            urls: the files in reading order; local paths are left out.
        """
        remote = [u for u in urls if is_remote(u)]
        self._next.update(zip(remote, remote[1:]))

    def listed(self, infos: dict[str, dict]) -> None:
        """Take the fingerprints of a listing (``url -> fsspec info``): the next open of
        each of these URLs uses its fingerprint instead of asking the store (one LIST
        validates a whole epoch's files instead of one HEAD per file).

        Args:
            infos: fsspec info dicts by URL; one without a usable ``"size"`` is ignored.
        """
        for url, info in infos.items():
            with contextlib.suppress(KeyError, TypeError, ValueError):
                self._known[url] = fingerprint(info)

    def fingerprint_of(self, url: str, *, consume: bool = True) -> dict:
        """The fingerprint a listing gave for ``url``, else the store's now (one ``HEAD``).

        Args:
            url: the remote object's URL.
            consume: forget the listing's fingerprint once used, so the next call asks
                the store.
        """
        with self._count_lock:
            fp = self._known.pop(url, None) if consume else self._known.get(url)
        return self.info(url) if fp is None else fp

    def prefetch_next(self, url: str) -> None:
        """Fetch the object planned after ``url`` (see :meth:`plan`) in the background;
        nothing when none is planned or ``read_ahead`` is off.

        Args:
            url: the URL being opened.
        """
        nxt = self._next.get(url)
        if nxt is not None and self.read_ahead:
            self.prefetch(nxt)

    def prefetch(self, url: str) -> None:
        """Fetch ``url`` into the cache in a background thread (errors are left for the
        reader that opens it to meet). Nothing when that fetch is already running.

        Args:
            url: the remote object's URL.
        """
        def fetch() -> None:
            self.local(url, fp=self.fingerprint_of(url, consume=False))

        self._in_background(("whole", url), fetch)

    def _in_background(self, key: tuple, fn: Any, *args: Any) -> None:
        with self._count_lock:
            running = self._ahead.get(key)
            if running is not None and running.is_alive():
                return

            def work() -> None:
                try:
                    fn(*args)
                except Exception as exc:  # noqa: BLE001 - the reader meets it when it reads
                    log.debug("read-ahead of %s failed: %s", key, exc)
                finally:
                    with self._count_lock:
                        self._ahead.pop(key, None)

            thread = threading.Thread(target=work, name="feedline-cache-ahead", daemon=True)
            self._ahead[key] = thread
        thread.start()

    def wait(self) -> None:
        """Wait for the background fetches started by this object to finish."""
        while True:
            with self._count_lock:
                threads = list(self._ahead.values())
            if not threads:
                return
            for t in threads:
                t.join()

    # ------------------------------------------------------------------ housekeeping
    def sweep(self) -> int:
        """Delete temporary files left by downloads whose process died (their object's
        lock is free); return how many were deleted."""
        removed = 0
        for name in os.listdir(self.cache_dir):
            if not name.startswith(".") or ".tmp-" not in name:
                continue
            lock = os.path.join(self.cache_dir, name.split(".tmp-", 1)[0] + ".lock")
            try:
                fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue  # a live download holds it
            try:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(self.cache_dir, name))
                    removed += 1
            finally:
                os.close(fd)
        return removed

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
        is never deleted); return how many were deleted. Nothing without a ``limit``.

        Args:
            keep: the path of an entry that is never deleted (the one just fetched);
                ``None``: none.

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
                    os.unlink(self._hidden(path, ".meta"))  # first: never a meta without data
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                    removed += 1
                    log.debug("evicted %s (%d bytes)", path, size)
                total -= size
        with self._count_lock:
            self.evicted += removed
        return removed


# --------------------------------------------------------------------------- per process

_CACHES: dict[tuple, ShardCache] = {}
_CACHES_LOCK = threading.Lock()


def cache_for(storage_options: dict | None) -> ShardCache | None:
    """The :class:`ShardCache` that readers given ``storage_options`` share in this
    process, or ``None`` when the options carry no ``"cache_dir"``.

    Args:
        storage_options: the reader's options; ``"cache_dir"``, ``"cache_limit"``,
            ``"cache_block_size"``, ``"read_ahead"`` and ``"verify_checksum"`` configure the
            cache, the rest go to fsspec. Equal options share one cache per process.

    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> cache_for({"cache_dir": d, "cache_limit": 1 << 30}) is cache_for({"cache_dir": d, "cache_limit": 1 << 30})
    True
    >>> cache_for({"anon": True}) is None
    True
    """
    if not storage_options or storage_options.get("cache_dir") is None:
        return None
    key = (os.getpid(), repr(sorted((k, repr(v)) for k, v in storage_options.items())))
    with _CACHES_LOCK:
        cache = _CACHES.get(key)
        if cache is None:
            so = storage_options
            cache = _CACHES[key] = ShardCache(
                so["cache_dir"], limit=so.get("cache_limit"), storage_options=so,
                block_size=so.get("cache_block_size", DEFAULT_BLOCK_SIZE),
                read_ahead=so.get("read_ahead", True),
                verify_checksum=so.get("verify_checksum", True))
        return cache


def with_cache(storage_options: dict | None, cache_dir: str | os.PathLike | None,
               cache_limit: int | None = None) -> dict | None:
    """``storage_options`` with a reader's ``cache_dir=`` and ``cache_limit=`` keywords
    added as the cache's keys (unchanged when ``cache_dir`` is ``None``).

    Args:
        storage_options: the reader's options; copied, never changed.
        cache_dir: the cache directory, or ``None`` for no cache.
        cache_limit: the cache's size bound in bytes, a positive int or ``None`` (no
            bound); given without ``cache_dir`` it raises ``ValueError``.

    >>> with_cache({"anon": True}, "/tmp/c", 1 << 30)
    {'anon': True, 'cache_dir': '/tmp/c', 'cache_limit': 1073741824}
    >>> with_cache(None, None) is None
    True
    """
    if cache_dir is None:
        if cache_limit is not None:
            raise ValueError("`cache_limit` needs `cache_dir`")
        return storage_options
    optional_positive_int("cache_limit", cache_limit)
    out = dict(storage_options or {})
    out["cache_dir"] = os.fspath(cache_dir)
    if cache_limit is not None:
        out["cache_limit"] = cache_limit
    return out
