"""One filesystem layer for every reader: local paths and fsspec URLs.

Local paths (and ``file://`` URLs) use the operating system directly; anything with
another scheme (``s3://``, ``gs://``, ``memory://`` ...) goes through fsspec, installed
with ``pip install 'feedline[remote]'``. ``storage_options`` are passed to fsspec (for
example ``{"client_kwargs": {"endpoint_url": "http://127.0.0.1:5000"}}`` for an S3
endpoint of your own).

>>> import os, tempfile
>>> d = tempfile.mkdtemp(); open(os.path.join(d, "a.txt"), "w").close()
>>> [os.path.basename(p) for p in expand(os.path.join(d, "*.txt"))]
['a.txt']
"""

from __future__ import annotations

import glob as _glob
import io
import os
from collections.abc import Iterable
from typing import IO, Any

from feedline._internal.optional import require

__all__ = ["filesystem", "is_remote", "open_file", "expand", "file_size", "strip_file_scheme", "read_range",
           "RangeFile", "open_ranged"]

_MAGIC = set("*?[")


def strip_file_scheme(path: str) -> str:
    """``file:///x`` -> ``/x``; other paths unchanged.

    >>> strip_file_scheme("file:///data/a.rec"), strip_file_scheme("s3://b/a.rec")
    ('/data/a.rec', 's3://b/a.rec')
    """
    return path[len("file://"):] if path.startswith("file://") else path


def is_remote(path: str | os.PathLike) -> bool:
    """True for URLs with a scheme other than ``file://``.

    >>> is_remote("gs://bucket/x"), is_remote("file:///x"), is_remote("relative/x")
    (True, False, False)
    """
    p = os.fspath(path)
    return "://" in p and not p.startswith("file://")


def filesystem(path: str, storage_options: dict | None):
    """The fsspec filesystem object for the URL ``path`` (needs ``feedline[remote]``).

    >>> filesystem("memory://bucket/a.bin", None).protocol
    'memory'
    """
    fsspec = require("fsspec", extra="remote")
    fs, _, _ = fsspec.get_fs_token_paths(path, storage_options=storage_options or {})
    return fs


def open_file(path: str | os.PathLike, mode: str = "rb", *,
              storage_options: dict | None = None) -> IO[Any]:
    """Open ``path`` (local or URL) in binary ``mode``.

    >>> import fsspec
    >>> fsspec.filesystem("memory").pipe("/openfile-doc/x.bin", b"abc")
    >>> with open_file("memory://openfile-doc/x.bin") as f:
    ...     f.read()
    b'abc'
    """
    p = os.fspath(path)
    if not is_remote(p):
        return open(strip_file_scheme(p), mode)  # noqa: SIM115 - caller closes
    return filesystem(p, storage_options).open(p, mode)


def file_size(path: str | os.PathLike, *, storage_options: dict | None = None) -> int:
    """Size of ``path`` in bytes.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "f")
    >>> with open(path, "wb") as f: _ = f.write(b"12345")
    >>> file_size(path), file_size("file://" + path)
    (5, 5)
    """
    p = os.fspath(path)
    if not is_remote(p):
        return os.path.getsize(strip_file_scheme(p))
    return int(filesystem(p, storage_options).size(p))


def read_range(path: str | os.PathLike, start: int, end: int, *,
                storage_options: dict | None = None) -> bytes:
    """Bytes ``[start, end)`` of ``path``: one ``pread`` locally, one ranged GET (through
    fsspec's ``cat_file``) for a URL. Fewer bytes come back only at the end of the file.

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
    return filesystem(p, storage_options).cat_file(p, start=start, end=end)


class RangeFile(io.RawIOBase):
    """A read-only file over ``path`` whose every ``read`` is one :func:`read_range`
    call: remote reads fetch exactly the bytes asked for (no read-ahead past them).

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
        self._size = file_size(self.path, storage_options=storage_options) if size is None else size
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = (0, self._pos, self._size)[whence]
        self._pos = max(base + offset, 0)
        return self._pos

    def read(self, n: int = -1) -> bytes:
        end = self._size if n is None or n < 0 else min(self._pos + n, self._size)
        data = read_range(self.path, self._pos, end, storage_options=self._so)
        self._pos += len(data)
        return data

    def readinto(self, b) -> int:  # noqa: ANN001 - buffer protocol
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)


def open_ranged(path: str | os.PathLike, mode: str = "rb", *,
                storage_options: dict | None = None) -> IO[Any]:
    """Open ``path`` for reading: a local file as usual, a URL as a :class:`RangeFile`
    (each read one ranged GET of exactly the bytes asked for).

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
        if _MAGIC & set(pattern):
            found = fs.glob(pattern)
        elif fs.isdir(pattern):
            found = [p for p in fs.find(pattern)]
        elif fs.exists(pattern):
            found = [pattern]
        else:
            found = []
        return sorted(p if "://" in p else f"{scheme}://{p.lstrip('/')}" for p in found)
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
    ``FileNotFoundError`` naming it.

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
    return out
