"""Reading from file objects whose ``read(n)`` may return fewer bytes than asked.

>>> import io
>>> read_full(io.BytesIO(b"abcdef"), 4), read_full(io.BytesIO(b"ab"), 4)
(b'abcd', b'ab')
"""

from __future__ import annotations

from typing import Any

__all__ = ["read_full"]


def read_full(f: Any, n: int) -> bytes:
    """Read ``n`` bytes from ``f``, calling ``read`` again after a short read; fewer
    than ``n`` bytes only at the end of the file (``b""`` there, also when ``read``
    returns ``None``)."""
    data = f.read(n)
    if data is None or len(data) == n or not data:
        return data or b""
    pieces = [data]
    got = len(data)
    while got < n:
        more = f.read(n - got)
        if not more:
            break
        pieces.append(more)
        got += len(more)
    return b"".join(pieces)
