"""The ``on_error`` policy of the record readers: what happens to damaged data.

Every reader that can meet damaged data (TFRecord, RecordIO, fixed-length records, CSV,
InputSplit) takes ``on_error``, one of :data:`POLICIES`:

* ``"raise"`` (the default everywhere): raise the error (a
  :class:`~feedline.exceptions.DataError` naming the path, record and byte offset);
* ``"skip"``: leave the damaged stretch out without a word; the reader counts it in its
  ``skipped`` counter;
* ``"warn"``: like ``"skip"``, and also issue a ``RuntimeWarning`` reading
  ``"skipping damaged data: <the error>"``.

:func:`check_on_error` validates the argument at construction; :func:`report` applies
the policy where the damage is found (the caller then skips past it unless it raised).

>>> check_on_error("warn")
'warn'
>>> check_on_error("ignore")
Traceback (most recent call last):
...
ValueError: `on_error` must be one of 'raise', 'skip', 'warn', got 'ignore'
>>> import warnings
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     report(ValueError("bad frame"), "warn")
>>> caught[0].category.__name__, str(caught[0].message)
('RuntimeWarning', 'skipping damaged data: bad frame')
>>> report(ValueError("bad frame"), "skip")
>>> report(ValueError("bad frame"), "raise")
Traceback (most recent call last):
...
ValueError: bad frame
"""

from __future__ import annotations

import warnings
from typing import Any

from feedline._internal.validate import one_of

__all__ = ["POLICIES", "check_on_error", "report"]

POLICIES = ("raise", "skip", "warn")
"""The accepted values of ``on_error``."""


def check_on_error(value: Any) -> str:
    """Return ``value`` if it is one of :data:`POLICIES`, else raise ``ValueError``
    ("`on_error` must be one of 'raise', 'skip', 'warn', got ...")."""
    return one_of("on_error", value, POLICIES)


def report(
    err: BaseException,
    policy: str,
    *,
    cause: BaseException | None = None,
    stacklevel: int = 2,
) -> None:
    """Apply ``policy`` to ``err``: raise it (``from cause`` when given) under
    ``"raise"``, warn under ``"warn"``, do nothing under ``"skip"``.

    ``stacklevel`` is counted as :func:`warnings.warn` counts it from the caller's frame
    (1: the line calling ``report``; the default 2: the caller's caller).
    """
    if policy == "raise":
        if cause is not None:
            raise err from cause
        raise err
    if policy == "warn":
        warnings.warn(f"skipping damaged data: {err}", RuntimeWarning, stacklevel=stacklevel + 1)
