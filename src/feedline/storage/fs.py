"""One filesystem layer for every reader: local paths and fsspec URLs.

Local paths (and ``file://`` URLs) use the operating system directly; anything with
another scheme (``s3://``, ``gs://``, ``memory://`` ...) goes through fsspec, installed
with ``pip install 'feedline[remote]'``. ``storage_options`` are passed to fsspec (for
example ``{"client_kwargs": {"endpoint_url": "http://127.0.0.1:5000"}}`` for an S3
endpoint of your own), except feedline's own keys: ``"cache_dir"`` (and
``"cache_limit"``, ``"cache_block_size"``, ``"read_ahead"``, ``"verify_checksum"``) make
every reader go through the node-local :class:`~feedline.storage.cache.ShardCache`.

**Timeouts and retries.** For S3, feedline sets what the user's options leave unset: a
connect timeout of :data:`CONNECT_TIMEOUT` s, a read timeout of :data:`READ_TIMEOUT` s,
:data:`REQUEST_ATTEMPTS` tries per request (s3fs's), botocore's own retries off. A
request against a store that hangs or is gone therefore fails within
:data:`REMOTE_TIMEOUT` seconds (instead of s3fs's and botocore's nested defaults, which
take minutes). Every network failure (a reset or cut body, a timeout, ``SlowDown``)
reaches the reader as :class:`~feedline.exceptions.RemoteReadError` naming the URL and
the byte offset, whatever its ``on_error``; a missing object stays ``FileNotFoundError``.

>>> import os, tempfile
>>> d = tempfile.mkdtemp(); open(os.path.join(d, "a.txt"), "w").close()
>>> [os.path.basename(p) for p in expand(os.path.join(d, "*.txt"))]
['a.txt']
"""

from __future__ import annotations

import contextlib
import glob as _glob
import io
import os
import sys
from collections.abc import Iterable, Iterator
from typing import IO, Any

from feedline._internal.optional import require
from feedline.exceptions import FeedlineError, IncompleteDownloadError, RemoteReadError

__all__ = ["filesystem", "is_remote", "open_file", "expand", "file_size", "strip_file_scheme", "read_range",
           "RangeFile", "open_ranged", "as_remote_error", "remote_errors", "CONNECT_TIMEOUT",
           "READ_TIMEOUT", "REQUEST_ATTEMPTS", "REMOTE_TIMEOUT"]

_MAGIC = set("*?[")
#: feedline's keys in ``storage_options`` (the cache's), never passed to fsspec
_OWN_KEYS = ("cache_dir", "cache_limit", "cache_block_size", "read_ahead", "verify_checksum")
#: seconds to open a connection to S3 (feedline's default)
CONNECT_TIMEOUT = 5.0
#: seconds a read from S3 may wait for the next bytes (feedline's default)
READ_TIMEOUT = 10.0
#: tries of one S3 request (s3fs's retry loop; botocore's own retries are off)
REQUEST_ATTEMPTS = 3
#: the most seconds one remote request takes to fail with feedline's defaults: every try
#: may spend a connect and a read timeout, plus s3fs's short back-off between tries
REMOTE_TIMEOUT = REQUEST_ATTEMPTS * (CONNECT_TIMEOUT + READ_TIMEOUT) + 1
#: errors that say what they mean already and pass through unchanged
_PASS = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError,
         FileExistsError)


def _network_errors() -> tuple[type[BaseException], ...]:
    """The exception types of the network stacks that are loaded."""
    out: list[type[BaseException]] = [OSError]
    aiohttp = sys.modules.get("aiohttp")
    if aiohttp is not None:
        out.append(aiohttp.ClientError)
    botocore = sys.modules.get("botocore.exceptions")
    if botocore is not None:
        out += [botocore.BotoCoreError, botocore.ClientError]
    return tuple(out)


def as_remote_error(exc: BaseException, path: str, offset: int | None = None) -> BaseException:
    """``exc`` as feedline reports it for a read of ``path`` at ``offset``: a network
    failure (``OSError`` such as s3fs's ``SlowDown``, aiohttp's ``ClientPayloadError``,
    botocore's ``ConnectionClosedError``, a timeout) becomes
    :class:`~feedline.exceptions.RemoteReadError`; feedline's own errors and
    ``FileNotFoundError``/``PermissionError`` come back unchanged, as does anything else.

    Args:
        exc: the exception a read raised.
        path: the file or URL being read, named in the error.
        offset: the byte offset the read began at, named in the error; ``None``: unknown.

    >>> err = as_remote_error(OSError(16, "SlowDown"), "s3://b/a.rec", 512)
    >>> type(err).__name__, str(err)
    ('RemoteReadError', 's3://b/a.rec: at byte 512: OSError: [Errno 16] SlowDown')
    >>> isinstance(as_remote_error(FileNotFoundError("x"), "s3://b/x"), FileNotFoundError)
    True
    """
    if isinstance(exc, (FeedlineError, *_PASS)) or not isinstance(exc, _network_errors()):
        return exc
    return RemoteReadError(f"{type(exc).__name__}: {exc}", path=path, offset=offset)


@contextlib.contextmanager
def remote_errors(path: str, offset: int | None = None) -> Iterator[None]:
    """Raise network failures inside the block as :func:`as_remote_error` names them
    (``from`` the original); other exceptions pass through unchanged.

    Args:
        path: the file or URL being read, named in the error.
        offset: the byte offset the read began at; ``None``: unknown.

    >>> with remote_errors("s3://b/a.rec", 0):
    ...     raise ConnectionResetError("reset by peer")
    Traceback (most recent call last):
    ...
    feedline.exceptions.RemoteReadError: s3://b/a.rec: at byte 0: ConnectionResetError: reset by peer
    """
    try:
        yield
    except Exception as exc:
        new = as_remote_error(exc, path, offset)
        if new is exc:
            raise
        raise new from exc


def _fsspec_options(path: str, storage_options: dict | None) -> dict:
    """``storage_options`` less feedline's keys, with feedline's timeouts and retries
    for S3 where the user set none."""
    so = {k: v for k, v in (storage_options or {}).items() if k not in _OWN_KEYS}
    if path.split("://", 1)[0] in ("s3", "s3a"):
        config = dict(so.get("config_kwargs") or {})
        config.setdefault("connect_timeout", CONNECT_TIMEOUT)
        config.setdefault("read_timeout", READ_TIMEOUT)
        config.setdefault("retries", {"max_attempts": 1, "mode": "standard"})
        so["config_kwargs"] = config
    return so


def _cache(storage_options: dict | None) -> Any:
    if not storage_options or storage_options.get("cache_dir") is None:
        return None
    from feedline.storage.cache import cache_for

    return cache_for(storage_options)


class _RemoteFile:
    """An fsspec file whose reads raise network failures as
    :class:`~feedline.exceptions.RemoteReadError` (with the offset the read began at)."""

    def __init__(self, f: Any, path: str) -> None:
        self._f, self.path = f, path

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)

    def _call(self, name: str, *args: Any) -> Any:
        try:
            at = self._f.tell()
        except Exception:  # noqa: BLE001 - only for the message
            at = None
        with remote_errors(self.path, at):
            return getattr(self._f, name)(*args)

    def read(self, *args: Any) -> Any:
        return self._call("read", *args)

    def readinto(self, *args: Any) -> Any:
        return self._call("readinto", *args)

    def readline(self, *args: Any) -> Any:
        return self._call("readline", *args)

    def seek(self, *args: Any) -> Any:
        return self._call("seek", *args)

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.readline, b"")

    def __enter__(self) -> _RemoteFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self._f.close()


def strip_file_scheme(path: str) -> str:
    """``file:///x`` -> ``/x``; other paths unchanged.

    Args:
        path: a local path or URL.

    >>> strip_file_scheme("file:///data/a.rec"), strip_file_scheme("s3://b/a.rec")
    ('/data/a.rec', 's3://b/a.rec')
    """
    return path[len("file://"):] if path.startswith("file://") else path


def is_remote(path: str | os.PathLike) -> bool:
    """True for URLs with a scheme other than ``file://``.

    Args:
        path: a local path or URL; a path without ``://`` is local.

    >>> is_remote("gs://bucket/x"), is_remote("file:///x"), is_remote("relative/x")
    (True, False, False)
    """
    p = os.fspath(path)
    return "://" in p and not p.startswith("file://")


def filesystem(path: str, storage_options: dict | None):
    """The fsspec filesystem object for the URL ``path`` (needs ``feedline[remote]``;
    without it ``ImportError`` names the extra). For S3, feedline's timeouts and retries
    fill in what the options leave unset.

    Args:
        path: the URL; its scheme picks the filesystem.
        storage_options: fsspec options for a URL, plus feedline's cache keys (see the
            module docstring); ``None``: none.

    >>> filesystem("memory://bucket/a.bin", None).protocol
    'memory'
    """
    fsspec = require("fsspec", extra="remote")
    options = _fsspec_options(path, storage_options)
    fs, _, _ = fsspec.get_fs_token_paths(path, storage_options=options)
    if hasattr(fs, "retries") and "retries" not in options:
        fs.retries = REQUEST_ATTEMPTS
    _KEEP[id(fs)] = fs
    return fs


#: every filesystem object :func:`filesystem` handed out, kept alive for good. A process
#: forked from this one (a DataLoader worker) inherits them; were they collected there,
#: their session finalizers would close the connections through the event loop's epoll
#: instance, which parent and child share, and so unregister the *parent's* sockets: the
#: parent's next request on such a connection then waits a whole read timeout.
_KEEP: dict[int, Any] = {}


def open_file(path: str | os.PathLike, mode: str = "rb", *,
              storage_options: dict | None = None) -> IO[Any]:
    """Open ``path`` (local or URL) in binary ``mode``. With a ``"cache_dir"`` in
    ``storage_options``, a URL opened ``"rb"`` is its local copy in the node's cache
    (:meth:`~feedline.storage.cache.ShardCache.local`), and the next file of the list it
    was expanded from is fetched in the background.

    Args:
        path: a local path, ``file://`` URL or fsspec URL.
        mode: a binary mode such as ``"rb"`` or ``"wb"``; only ``"rb"`` uses the cache,
            and remote files opened for reading raise network failures as
            :class:`~feedline.exceptions.RemoteReadError`.
        storage_options: fsspec options for a URL, plus feedline's cache keys (see the
            module docstring); ``None``: none.

    >>> import fsspec
    >>> fsspec.filesystem("memory").pipe("/openfile-doc/x.bin", b"abc")
    >>> with open_file("memory://openfile-doc/x.bin") as f:
    ...     f.read()
    b'abc'
    """
    p = os.fspath(path)
    if not is_remote(p):
        return open(strip_file_scheme(p), mode)  # noqa: SIM115 - caller closes
    cache = _cache(storage_options) if mode == "rb" else None
    if cache is not None:
        local = cache.local(p)
        cache.prefetch_next(p)
        try:
            return open(local, "rb")  # noqa: SIM115 - caller closes
        except FileNotFoundError:  # evicted by another process in between: fetch it again
            return open(cache.local(p), "rb")  # noqa: SIM115 - caller closes
    with remote_errors(p, 0):
        f = filesystem(p, storage_options).open(p, mode)
    return f if "r" not in mode else _RemoteFile(f, p)  # type: ignore[return-value]


def file_size(path: str | os.PathLike, *, storage_options: dict | None = None) -> int:
    """Size of ``path`` in bytes.

    Args:
        path: a local path or URL; a missing file raises ``FileNotFoundError``.
        storage_options: fsspec options for a URL, plus feedline's cache keys (see the
            module docstring); ``None``: none.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "f")
    >>> with open(path, "wb") as f: _ = f.write(b"12345")
    >>> file_size(path), file_size("file://" + path)
    (5, 5)
    """
    p = os.fspath(path)
    if not is_remote(p):
        return os.path.getsize(strip_file_scheme(p))
    fs = filesystem(p, storage_options)
    with remote_errors(p):
        return int(fs.size(p))


def read_range(path: str | os.PathLike, start: int, end: int, *,
                storage_options: dict | None = None) -> bytes:
    """Bytes ``[start, end)`` of ``path``: one ``pread`` locally, one ranged GET (through
    fsspec's ``cat_file``) for a URL, or the blocks of the node's cache holding them when
    ``storage_options`` has a ``"cache_dir"``. Fewer bytes come back only at the end of
    the file.

    Args:
        path: a local path or URL.
        start: the first byte's offset.
        end: the offset after the last byte; ``end <= start`` gives ``b""`` without a read.
        storage_options: fsspec options for a URL, plus feedline's cache keys (see the
            module docstring); ``None``: none.

    >>> import fsspec
    >>> fsspec.filesystem("memory").pipe("/range-doc/a.bin", b"0123456789")
    >>> read_range("memory://range-doc/a.bin", 2, 5), read_range("memory://range-doc/a.bin", 8, 20)
    (b'234', b'89')
    """
    p = os.fspath(path)
    if end <= start:
        return b""
    if not is_remote(p):
        with open(strip_file_scheme(p), "rb") as f:
            return os.pread(f.fileno(), end - start, start)
    cache = _cache(storage_options)
    if cache is not None:
        return cache.read_range(p, start, end)
    fs = filesystem(p, storage_options)
    with remote_errors(p, start):
        return fs.cat_file(p, start=start, end=end)


class RangeFile(io.RawIOBase):
    """A read-only file over ``path`` whose every ``read`` is one :func:`read_range`
    call: remote reads fetch exactly the bytes asked for (no read-ahead past them), or
    read the node cache's blocks when ``storage_options`` has a ``"cache_dir"``. A remote
    reply shorter than the bytes the object holds there raises
    :class:`~feedline.exceptions.IncompleteDownloadError`.

    Args:
        path: a local path or URL.
        size: the file's size in bytes when known (spares a size request); ``None``
            asks the file system (or the cache's fingerprint).
        storage_options: fsspec options for a URL, plus feedline's cache keys (see the
            module docstring); ``None``: none.

    >>> import tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "r.bin"); open(path, "wb").write(b"0123456789")
    10
    >>> f = RangeFile(path); _ = f.seek(3); f.read(4), f.tell()
    (b'3456', 7)
    """

    def __init__(self, path: str | os.PathLike, *, size: int | None = None,
                 storage_options: dict | None = None) -> None:
        self.path = os.fspath(path)
        self._so = storage_options
        self._cache = _cache(storage_options) if is_remote(self.path) else None
        self._fp = None
        if self._cache is not None:  # one HEAD: the size and the version the blocks are of
            self._fp = self._cache.fingerprint_of(self.path)
            size = self._fp["size"] if size is None else size
        self._size = file_size(self.path, storage_options=storage_options) if size is None else size
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        """Move the read position (no I/O); positions before 0 become 0. Returns it.

        Args:
            offset: bytes relative to ``whence``.
            whence: ``0`` from the start, ``1`` from the current position, ``2`` from
                the end.
        """
        base = (0, self._pos, self._size)[whence]
        self._pos = max(base + offset, 0)
        return self._pos

    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes from the current position, in one :func:`read_range` call.

        Args:
            n: how many bytes; negative or ``None`` reads to the end of the file.
        """
        end = self._size if n is None or n < 0 else min(self._pos + n, self._size)
        if self._cache is not None:
            data = self._cache.read_range(self.path, self._pos, end, fp=self._fp)
        else:
            data = read_range(self.path, self._pos, end, storage_options=self._so)
        if len(data) < end - self._pos and is_remote(self.path):
            raise IncompleteDownloadError(
                f"asked for bytes [{self._pos}, {end}) of a {self._size}-byte object, got "
                f"{len(data)}", path=self.path, offset=self._pos)
        self._pos += len(data)
        return data

    def readinto(self, b) -> int:  # noqa: ANN001 - buffer protocol
        """Read up to ``len(b)`` bytes into ``b``; the number read.

        Args:
            b (bytearray | memoryview): a writable buffer (any object of the buffer
                protocol).
        """
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)


def open_ranged(path: str | os.PathLike, mode: str = "rb", *,
                storage_options: dict | None = None) -> IO[Any]:
    """Open ``path`` for reading: a local file as usual, a URL as a :class:`RangeFile`
    (each read one ranged GET of exactly the bytes asked for).

    Args:
        path: a local path or URL.
        mode: must be ``"rb"``; anything else raises ``ValueError``.
        storage_options: fsspec options for a URL, plus feedline's cache keys (see the
            module docstring); ``None``: none.

    >>> import fsspec
    >>> fsspec.filesystem("memory").pipe("/ranged-doc/a.bin", b"abcdef")
    >>> with open_ranged("memory://ranged-doc/a.bin") as f:
    ...     _ = f.seek(4); f.read()
    b'ef'
    """
    p = os.fspath(path)
    if mode != "rb":
        raise ValueError(f"`mode` must be 'rb', got {mode!r}")
    if not is_remote(p):
        return open(strip_file_scheme(p), "rb")  # noqa: SIM115 - caller closes
    return RangeFile(p, storage_options=storage_options)  # type: ignore[return-value]


def _expand_one(pattern: str, storage_options: dict | None) -> list[str]:
    if is_remote(pattern):
        fs = filesystem(pattern, storage_options)
        scheme = pattern.split("://", 1)[0]
        listed: dict[str, dict] = {}
        with remote_errors(pattern):
            if _MAGIC & set(pattern):
                listed = fs.glob(pattern, detail=True)
            elif fs.isdir(pattern):
                listed = fs.find(pattern, detail=True)
            elif fs.exists(pattern):
                listed = {pattern: {}}
        urls = {(p if "://" in p else f"{scheme}://{p.lstrip('/')}"): info
                for p, info in listed.items() if info.get("type", "file") != "directory"}
        cache = _cache(storage_options)
        if cache is not None:  # the listing's sizes and ETags spare a HEAD per file opened
            cache.listed({url: info for url, info in urls.items() if "size" in info})
        return sorted(urls)
    local = strip_file_scheme(pattern)
    if _MAGIC & set(local):
        return sorted(p for p in _glob.glob(local, recursive=True) if os.path.isfile(p))
    if os.path.isdir(local):
        out: list[str] = []
        for root, _, names in os.walk(local):
            out.extend(os.path.join(root, n) for n in names if not n.startswith("."))
        return sorted(out)
    return [local] if os.path.isfile(local) else []


def expand(patterns: str | os.PathLike | Iterable[str | os.PathLike], *,
           storage_options: dict | None = None) -> list[str]:
    """Expand globs, directories (recursively, hidden files skipped) and plain paths, in
    the order given, each pattern's matches sorted. A pattern that matches nothing raises
    ``FileNotFoundError`` naming it. A local ``-of-N`` shard set left unfinished or not
    matching its manifest is refused (:func:`~feedline.formats.sharded.check_shard_sets`).

    Args:
        patterns: one pattern or several: glob patterns (``**`` recurses), directories,
            plain paths, local or URLs.
        storage_options: fsspec options for a URL, plus feedline's cache keys (see the
            module docstring); ``None``: none.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp(); os.mkdir(os.path.join(d, "sub"))
    >>> for name in ("b.rec", "a.rec", "sub/c.rec", "sub/.hidden"):
    ...     open(os.path.join(d, name), "w").close()
    >>> [os.path.relpath(p, d) for p in expand([os.path.join(d, "*.rec"), os.path.join(d, "sub")])]
    ['a.rec', 'b.rec', 'sub/c.rec']
    """
    if isinstance(patterns, (str, os.PathLike)):
        patterns = [patterns]
    out: list[str] = []
    for pattern in patterns:
        p = os.fspath(pattern)
        found = _expand_one(p, storage_options)
        if not found:
            raise FileNotFoundError(f"no file matches {p!r}")
        out.extend(found)
    from feedline.formats.sharded import check_shard_sets  # refuse a -of-N set left half-written

    check_shard_sets(out)
    cache = _cache(storage_options)
    if cache is not None:  # the cache reads the next file ahead while one is open
        cache.plan(out)
    return out
