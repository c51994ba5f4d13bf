"""Argument checks shared by every public constructor.

Messages read "`batch_size` must be a positive int, got 0".

>>> positive_int("batch_size", 4)
4
>>> positive_int("batch_size", 0)
Traceback (most recent call last):
...
ValueError: `batch_size` must be a positive int, got 0
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

__all__ = [
    "UNSET",
    "renamed_option",
    "positive_int",
    "non_negative_int",
    "optional_positive_int",
    "one_of",
    "callable_arg",
    "probability",
    "optional_positive_number",
    "check_float",
    "non_negative_float",
    "positive_int_arg",
    "non_negative_int_arg",
    "record_index",
    "check_bool",
]


#: default of an option whose "not given" must differ from every value, ``None`` included
#: (``map(..., replacement=)``)
UNSET: Any = type("Unset", (), {"__repr__": lambda self: "<unset>"})()


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def positive_int(name: str, value: Any) -> int:
    """Return ``value`` if it is an int > 0, else raise ``ValueError``/``TypeError``."""
    if not _is_int(value):
        raise TypeError(f"`{name}` must be a positive int, got {value!r}")
    if value <= 0:
        raise ValueError(f"`{name}` must be a positive int, got {value!r}")
    return value


def non_negative_int(name: str, value: Any) -> int:
    """Return ``value`` if it is an int >= 0, else raise ``ValueError``/``TypeError``."""
    if not _is_int(value):
        raise TypeError(f"`{name}` must be a non-negative int, got {value!r}")
    if value < 0:
        raise ValueError(f"`{name}` must be a non-negative int, got {value!r}")
    return value


def optional_positive_int(name: str, value: Any) -> int | None:
    """Like :func:`positive_int` but ``None`` passes through."""
    return None if value is None else positive_int(name, value)


def one_of(name: str, value: Any, choices: tuple) -> Any:
    """Return ``value`` if it is one of ``choices``, else raise ``ValueError``."""
    if value not in choices:
        options = ", ".join(repr(c) for c in choices)
        raise ValueError(f"`{name}` must be one of {options}, got {value!r}")
    return value


def callable_arg(name: str, value: Any) -> Callable:
    """Return ``value`` if it is callable, else raise ``TypeError``."""
    if not callable(value):
        raise TypeError(f"`{name}` must be callable, got {type(value).__name__} {value!r}")
    return value


def probability(name: str, value: Any) -> float:
    """Return ``value`` as a float if it lies in [0, 1], else raise ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"`{name}` must be a number in [0, 1], got {value!r}")
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"`{name}` must be a number in [0, 1], got {value!r}")
    return float(value)


def check_float(name: str, value: Any, *, low: float = 0.0, high: float | None = None,
                low_open: bool = False, high_open: bool = True, text: str | None = None) -> float:
    """``value`` as a float if it lies in the interval, else ``ValueError``/``TypeError``.

    Args:
        name: the option's name, quoted in backticks in the error message.
        value: the value to check; an int or float (not a bool), else ``TypeError``.
            NaN and values outside the interval raise ``ValueError``.
        low: the interval's lower bound.
        high: the interval's upper bound; ``None`` leaves it unbounded above.
        low_open: exclude ``low`` itself (``> low`` instead of ``>= low``).
        high_open: exclude ``high`` itself (the default); ``False`` accepts ``high``.
        text: what the message says the value must be; ``None`` words the interval
            ("a number >= 0", "a number in [0, 1)").

    >>> check_float("rate", 0.5)
    0.5
    >>> check_float("rate", -1)
    Traceback (most recent call last):
    ...
    ValueError: `rate` must be a number >= 0, got -1
    """
    if text is None:
        text = f"a number {'>' if low_open else '>='} {low:g}"
        if high is not None:
            text = f"a number in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"`{name}` must be {text}, got {value!r}")
    v = float(value)
    bad = v < low or (low_open and v == low) or v != v
    if high is not None:
        bad = bad or v > high or (high_open and v == high)
    if bad:
        raise ValueError(f"`{name}` must be {text}, got {value!r}")
    return v


def non_negative_float(name: str, value: Any) -> float:
    """``value`` as a float if it is a finite number ``>= 0``.

    >>> non_negative_float("pad", 2)
    2.0
    >>> non_negative_float("pad", float("inf"))
    Traceback (most recent call last):
    ...
    ValueError: `pad` must be a non-negative number, got inf
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"`{name}` must be a non-negative number, got {value!r}")
    if not (0 <= value < float("inf")):
        raise ValueError(f"`{name}` must be a non-negative number, got {value!r}")
    return float(value)


def _int_arg(text: str, low: int, what: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be {what}, got {value}")
    return value


def positive_int_arg(text: str) -> int:
    """An ``argparse`` type: a command-line value that must be a positive int.

    >>> positive_int_arg("3")
    3
    """
    return _int_arg(text, 1, "a positive int")


def non_negative_int_arg(text: str) -> int:
    """An ``argparse`` type: a command-line value that must be an int ``>= 0``.

    >>> non_negative_int_arg("0")
    0
    """
    return _int_arg(text, 0, "a non-negative int")


def optional_positive_number(name: str, value: Any) -> float | None:
    """``None`` or a positive finite int/float, returned as float.

    >>> optional_positive_number("timeout", 2)
    2.0
    >>> optional_positive_number("timeout", 0)
    Traceback (most recent call last):
    ...
    ValueError: `timeout` must be a positive number of seconds or None, got 0
    """
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"`{name}` must be a positive number of seconds or None, got {value!r}")
    return float(value)


def record_index(name: str, value: Any, n: int, *, what: str = "record") -> int:
    """``value`` as an index into ``n`` records, a negative one counting from the end;
    TypeError unless an int (numpy ints too, not bools), IndexError out of range.

    >>> record_index("index", -1, 5)
    4
    >>> record_index("index", 5, 5)
    Traceback (most recent call last):
    ...
    IndexError: record 5 out of range for 5 records
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"`{name}` must be an int, got {value!r}")
    index = int(value)
    if index < 0:
        index += n
    if not 0 <= index < n:
        raise IndexError(f"{what} {index} out of range for {n} records")
    return index


def check_bool(name: str, value: Any) -> bool:
    """``value`` if it is a bool, else TypeError.

    >>> check_bool("pad", 1)
    Traceback (most recent call last):
    ...
    TypeError: `pad` must be a bool, got 1
    """
    if not isinstance(value, bool):
        raise TypeError(f"`{name}` must be a bool, got {value!r}")
    return value


def renamed_option(old: str, new: str, old_value: Any, new_value: Any, default: Any) -> Any:
    """The value of option ``new`` where a caller may still pass its old name ``old``
    (``old_value`` is :data:`UNSET` when not passed; a ``new_value`` that is
    :data:`UNSET` or equals ``default`` counts as not passed): the old name issues a
    ``DeprecationWarning`` for one release; both names with different values is a
    ``TypeError``.

    >>> renamed_option("workers", "num_workers", UNSET, 2, 0)
    2
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     renamed_option("workers", "num_workers", 3, UNSET, 0), caught[0].category.__name__
    (3, 'DeprecationWarning')
    """
    if old_value is UNSET:
        return default if new_value is UNSET else new_value
    if new_value is not UNSET and new_value != default:
        raise TypeError(f"pass `{new}` only; `{old}` is its deprecated old name")
    import warnings

    warnings.warn(f"`{old}` is deprecated, use `{new}` (the same meaning)", DeprecationWarning,
                  stacklevel=3)
    return old_value
