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
import os
from collections.abc import Iterable
from typing import IO, Any

from feedline._optional import require

__all__ = ["is_remote", "open_file", "expand", "file_size", "strip_file_scheme"]

_MAGIC = set("*?[")


def strip_file_scheme(path: str) -> str:
    """``file:///x`` -> ``/x``; other paths unchanged."""
    return path[len("file://"):] if path.startswith("file://") else path


def is_remote(path: str | os.PathLike) -> bool:
    """True for URLs with a scheme other than ``file://``."""
    p = os.fspath(path)
    return "://" in p and not p.startswith("file://")


def _fs(path: str, storage_options: dict | None):
    fsspec = require("fsspec", extra="remote")
    fs, _, _ = fsspec.get_fs_token_paths(path, storage_options=storage_options or {})
    return fs


def open_file(path: str | os.PathLike, mode: str = "rb", *,
              storage_options: dict | None = None) -> IO[Any]:
    """Open ``path`` (local or URL) in binary ``mode``."""
    p = os.fspath(path)
    if not is_remote(p):
        return open(strip_file_scheme(p), mode)  # noqa: SIM115 - caller closes
    return _fs(p, storage_options).open(p, mode)


def file_size(path: str | os.PathLike, *, storage_options: dict | None = None) -> int:
    """Size of ``path`` in bytes."""
    p = os.fspath(path)
    if not is_remote(p):
        return os.path.getsize(strip_file_scheme(p))
    return int(_fs(p, storage_options).size(p))


def _expand_one(pattern: str, storage_options: dict | None) -> list[str]:
    if is_remote(pattern):
        fs = _fs(pattern, storage_options)
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
        out = []
        for root, _, names in os.walk(local):
            out.extend(os.path.join(root, n) for n in names if not n.startswith("."))
        return sorted(out)
    return [local] if os.path.isfile(local) else []


def expand(patterns: str | os.PathLike | Iterable[str | os.PathLike], *,
           storage_options: dict | None = None) -> list[str]:
    """Expand globs, directories (recursively, hidden files skipped) and plain paths, in
    the order given, each pattern's matches sorted. A pattern that matches nothing raises
    ``FileNotFoundError`` naming it."""
    if isinstance(patterns, (str, os.PathLike)):
        patterns = [patterns]
    out: list[str] = []
    for pattern in patterns:
        p = os.fspath(pattern)
        found = _expand_one(p, storage_options)
        if not found:
            raise FileNotFoundError(f"no file matches {p!r}")
        out.extend(found)
    from feedline.sharded import check_shard_sets  # refuse a -of-N set left half-written

    check_shard_sets(out)
    return out
