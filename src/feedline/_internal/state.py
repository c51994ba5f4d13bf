"""Validation of resume states (``set_state``), before any value is used.

A state comes from outside the process (a checkpoint file), so every stage checks the
fields it reads against the pipeline it restores: types, ranges (a position never past the
end), names that must stay inside their directory. A value that does not fit raises
:class:`~feedline.exceptions.InvalidStateError` (a ``StateError`` and a ``ValueError``)
naming the stage, the field and the value; :func:`restore` is the boundary that turns any
other error a stage's ``set_state`` lets out into one.

>>> state_int({"next": 3}, "next", "index", high=10)
3
>>> state_int({"next": 10**12}, "next", "index", high=10)
Traceback (most recent call last):
...
feedline.exceptions.InvalidStateError: state of stage 'index': `next` must be an int from 0 to 10, got 1000000000000
>>> confined_name({"part": "../../x"}, "part", "file_cache")
Traceback (most recent call last):
...
feedline.exceptions.InvalidStateError: state of stage 'file_cache': `part` must be a plain file name, got '../../x'
"""

from __future__ import annotations

import os
from typing import Any

from feedline.exceptions import FeedlineError, InvalidStateError

__all__ = ["state_int", "state_bool", "state_list", "confined_name", "restore"]


def _bad(kind: str, key: str, must: str, value: Any) -> InvalidStateError:
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return InvalidStateError(f"state of stage {kind!r}: `{key}` must be {must}, got {shown}")


def state_int(state: dict, key: str, kind: str, *, low: int = 0,
              high: int | None = None) -> int:
    """``state[key]`` as an int in ``[low, high]`` (``high`` ``None``: no upper bound)."""
    value = state.get(key)
    if (isinstance(value, bool) or not isinstance(value, int)
            or value < low or (high is not None and value > high)):
        must = f"an int from {low} to {high}" if high is not None else f"an int >= {low}"
        raise _bad(kind, key, must, value)
    return int(value)


def state_bool(state: dict, key: str, kind: str) -> bool:
    """``state[key]``, which must be ``True`` or ``False``."""
    value = state.get(key)
    if not isinstance(value, bool):
        raise _bad(kind, key, "True or False", value)
    return value


def state_list(state: dict, key: str, kind: str, *, max_len: int | None = None) -> list:
    """``state[key]``, which must be a list (of at most ``max_len`` items)."""
    value = state.get(key)
    if not isinstance(value, list) or (max_len is not None and len(value) > max_len):
        must = "a list" if max_len is None else f"a list of at most {max_len} items"
        raise _bad(kind, key, must, value)
    return value


def confined_name(state: dict, key: str, kind: str, *, optional: bool = False) -> str | None:
    """``state[key]`` as a plain file name (no directory part, not ``.``/``..``), so that
    joined to the directory it belongs to it can only name an entry of that directory;
    ``None`` is allowed with ``optional``."""
    value = state.get(key)
    if value is None and optional:
        return None
    if (not isinstance(value, str) or not value or value in (".", "..") or "\0" in value
            or os.path.basename(value) != value or (os.altsep and os.altsep in value)):
        raise _bad(kind, key, "a plain file name", value)
    return value


def restore(it: Any, state: Any) -> None:
    """``it.set_state(state)``; an error that is not a feedline error (a ``TypeError``,
    ``KeyError``, ``IndexError`` or ``OSError`` from a malformed value) becomes an
    :class:`~feedline.exceptions.InvalidStateError` chained to it.

    >>> class Strict:
    ...     def set_state(self, state): state["stages"]["n"] + 1
    >>> restore(Strict(), {"stages": {"n": "7"}})
    Traceback (most recent call last):
    ...
    feedline.exceptions.InvalidStateError: state does not fit this pipeline: TypeError: can only concatenate str (not "int") to str
    """
    try:
        it.set_state(state)
    except FeedlineError:
        raise
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, OSError,
            OverflowError, RecursionError) as exc:
        raise InvalidStateError(
            f"state does not fit this pipeline: {type(exc).__name__}: {exc}") from exc
