"""Write a whole file atomically: readers see the old file or the new one, never a part.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "a.txt")
>>> replace_file(path, b"hello"); open(path, "rb").read(), len(os.listdir(os.path.dirname(path)))
(b'hello', 1)
"""

from __future__ import annotations

import os
import tempfile

__all__ = ["replace_file"]


def replace_file(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, then rename it onto ``path``.

    On any error the temporary file is removed and ``path`` is left as it was.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
