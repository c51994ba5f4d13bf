"""Files written whole or not at all: readers see the old file or the new one, never a part.

Every file feedline writes goes through here: the bytes go to a temporary file with a
unique name beside the target (created exclusively, so a planted file or symlink is never
followed), which is renamed onto the target only when everything was written. The new
file gets the usual mode under the process's umask (``0o666 & ~umask``), as ``open()``
would give it, not the ``0o600`` of a bare temporary file.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "a.txt")
>>> replace_file(path, b"hello"); open(path, "rb").read(), len(os.listdir(os.path.dirname(path)))
(b'hello', 1)
>>> with atomic_open(path) as f:
...     _ = f.write(b"new")
>>> open(path, "rb").read()
b'new'
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Iterator
from typing import BinaryIO

__all__ = ["atomic_open", "replace_file", "temporary_path", "file_mode", "TEMP_SUFFIX"]

#: what every temporary name ends with (``.NAME.<random>.tmp``)
TEMP_SUFFIX = ".tmp"

_umask_lock = threading.Lock()


def file_mode() -> int:
    """The mode ``open()`` gives a new file under the current umask: ``0o666 & ~umask``."""
    with _umask_lock:
        mask = os.umask(0o022)
        os.umask(mask)
    return 0o666 & ~mask


def temporary_path(path: str | os.PathLike) -> tuple[int, str]:
    """Create a new empty temporary file beside ``path`` with a unique name
    (``.NAME.<random>.tmp``) and the umask mode; return its open descriptor and path."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(
        prefix=f".{os.path.basename(path)}.", suffix=TEMP_SUFFIX, dir=directory
    )
    try:
        os.fchmod(fd, file_mode())
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    return fd, tmp


def _fsync_directory(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # platforms without directory descriptors
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, *, durable: bool = False) -> Iterator[BinaryIO]:
    """A binary file to write; on a clean exit it replaces ``path`` at once.

    On any error (an exception inside the block, a full disk) the temporary file is
    removed and ``path`` is left as it was. ``durable=True`` also ``fsync``\\ s the file
    and its directory, so the new content survives a power cut (checkpoints).
    """
    path = os.fspath(path)
    fd, tmp = temporary_path(path)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if durable:
        _fsync_directory(os.path.dirname(os.path.abspath(path)))


def replace_file(path: str | os.PathLike, data: bytes, *, durable: bool = False) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_open`)."""
    with atomic_open(path, durable=durable) as f:
        f.write(data)
