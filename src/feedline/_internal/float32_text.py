"""Decimal text to float32, rounded once (as TensorFlow's parser rounds), from the
float64 values already parsed from the same text.

Parsing to float64 (correctly rounded) and casting to float32 rounds twice; the result
differs from rounding the decimal straight to float32 only where the float64 value
lies exactly on a *midpoint* between two adjacent float32 values (float64 represents
every such midpoint exactly) while the decimal itself does not: the cast then breaks
a tie that the decimal never had. :func:`midpoints` finds those rows with a few
whole-array operations (rare in real data: a float64 value is a candidate only when
its 28 low mantissa bits are zero), and :func:`to_float32` settles each of them
exactly from its text with :mod:`decimal`.

>>> texts = [b"1.00000005960464477550", b"0.5"]
>>> d = np.array([float(t) for t in texts])
>>> d.astype(np.float32).tolist()                # the cast rounds a tie to even: wrong
[1.0, 0.5]
>>> to_float32(d, lambda rows: [texts[i] for i in rows]).tolist()
[1.0000001192092896, 0.5]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal, InvalidOperation

import numpy as np

__all__ = ["midpoints", "to_float32"]

_LOW_BITS = np.uint64((1 << 28) - 1)  # float64 mantissa bits below a float32 midpoint's
_OVERFLOW = 2.0**128  # the float32 "value" above FLT_MAX that rounding to inf stands for


def _cast(d: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):  # a value past float32's range is inf, silently
        return d.astype(np.float32)


def _neighbours(d: np.ndarray, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(g, mid)``: the float32 next to the cast ``f`` on the side of ``d`` (``d != f``,
    finite) and the exact float64 midpoint between the two (``2**128`` stands for inf)."""
    with np.errstate(over="ignore"):  # from FLT_MAX up to inf
        g = np.nextafter(f, np.copysign(np.inf, d - f).astype(np.float32))
    ends = np.stack([f, g]).astype(np.float64)
    over = np.isinf(ends)
    ends[over] = np.copysign(_OVERFLOW, ends[over])
    return g, (ends[0] + ends[1]) * 0.5  # adjacent float32 (or FLT_MAX and 2**128): exact


def midpoints(d: np.ndarray) -> np.ndarray:
    """The indices of the finite values of the float64 array ``d`` that lie exactly on
    a midpoint between two adjacent float32 values (the one between ``FLT_MAX`` and
    ``2**128``, past which float32 rounds to inf, included): where casting to float32
    can round otherwise than the decimal that ``d`` was parsed from.

    Args:
        d: float64 values, any shape (flattened).

    >>> midpoints(np.array([1 + 2.0**-24, 1.0, 1 + 2.0**-23, -(1 + 3 * 2.0**-24), 2.0**-150]))
    array([0, 3, 4])
    """
    flat = np.ascontiguousarray(d, dtype=np.float64).ravel()
    rows = np.flatnonzero((flat.view(np.uint64) & _LOW_BITS) == 0)
    if not rows.size:
        return rows
    values = flat[rows]
    f = _cast(values)
    off = (values != f) & np.isfinite(values)
    rows, values, f = rows[off], values[off], f[off]
    if not rows.size:
        return rows
    return rows[values == _neighbours(values, f)[1]]


def _exact(text: bytes | str, d: float) -> np.float32:
    """The float32 nearest to the decimal ``text``, whose float64 rounding ``d`` lies on
    a float32 midpoint (ties to even); the cast where ``text`` is not a decimal."""
    f = _cast(np.array([d]))
    try:
        x = Decimal(text.decode("ascii") if isinstance(text, bytes) else text)
    except (InvalidOperation, UnicodeDecodeError, ValueError):
        return f[0]
    side = x.copy_abs().compare(Decimal(d).copy_abs())  # copy_abs: exact, no rounding
    if not x.is_finite() or side == 0:
        return f[0]
    g = _neighbours(np.array([d]), f)[0]
    small, big = sorted((f[0], g[0]), key=abs)
    return big if side > 0 else small


def to_float32(d: np.ndarray, texts: Callable[[np.ndarray], Sequence[bytes | str]]
               ) -> np.ndarray:
    """The float32 values of decimal texts, each rounded once, correctly (ties to
    even), given ``d``, their float64 values (correctly rounded, as ``float()`` and
    numpy's string conversion give them).

    Args:
        d: the float64 values, one dimension.
        texts: called (only when some value lies on a float32 midpoint, see
            :func:`midpoints`) with those rows' indices, increasing; answers their
            texts, ``bytes`` or ``str``, in that order, in any syntax ``float()``
            accepts (blanks around, a sign, an exponent; ``inf``/``nan`` never get
            here).

    >>> texts = ["3.40282356779733661637539395e38", "-3.40282356779733661637539396e38"]
    >>> d = np.array([float(t) for t in texts])    # both on the overflow midpoint
    >>> to_float32(d, lambda rows: [texts[i] for i in rows]).tolist()   # below it, above it
    [3.4028234663852886e+38, -inf]
    """
    out = _cast(d)
    rows = midpoints(d)
    if rows.size:
        for i, text in zip(rows.tolist(), texts(rows)):
            out[i] = _exact(text, float(d[i]))
    return out
