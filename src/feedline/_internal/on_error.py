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

Stages that skip *elements* (``map(..., on_error="skip")``, ``ImageRecordIter``) share
:class:`SkipBudget`: it counts the skips, logs the first few with the element's position
(and file/record when the error names them), and raises once more than ``max_skips``
were skipped, so a broken dataset still fails loudly. :class:`CatchErrors` wraps a
function so that it returns a picklable :class:`Failure` instead of raising (usable in
worker processes and threads alike).

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

import logging
import warnings
from collections.abc import Callable
from typing import Any

from feedline._internal.validate import UNSET, non_negative_int, one_of
from feedline.exceptions import DataError

__all__ = ["POLICIES", "check_on_error", "report", "Failure", "CatchErrors", "SkipBudget",
           "UNSET"]

logger = logging.getLogger(__name__)

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


class Failure:
    """What :class:`CatchErrors` returns in place of a result: the error as text, with
    its ``path``/``index``/``offset`` when it named them. Picklable, so it crosses from a
    worker process; ``error`` keeps the exception itself when it stayed in-process.

    >>> f = CatchErrors(int)("x"); f.describe()
    "ValueError: invalid literal for int() with base 10: 'x'"
    """

    __slots__ = ("kind", "message", "path", "index", "offset", "error")

    def __init__(self, exc: BaseException) -> None:
        self.kind = type(exc).__name__
        self.message = str(exc)
        self.path = getattr(exc, "path", None)
        self.index = getattr(exc, "index", None)
        self.offset = getattr(exc, "offset", None)
        self.error: BaseException | None = exc

    def __getstate__(self) -> tuple:
        return (self.kind, self.message, self.path, self.index, self.offset)

    def __setstate__(self, state: tuple) -> None:
        self.kind, self.message, self.path, self.index, self.offset = state
        self.error = None

    def describe(self) -> str:
        """``"Kind: message"`` (the message of a feedline error names path and record)."""
        return f"{self.kind}: {self.message}"


class CatchErrors:
    """``fn`` made total: ``CatchErrors(fn)(x)`` is ``fn(x)``, or a :class:`Failure` when
    ``fn`` raised an ``Exception`` (``KeyboardInterrupt`` and ``SystemExit`` pass).
    Picklable when ``fn`` is.

    >>> isinstance(CatchErrors(lambda x: 1 / x)(0), Failure), CatchErrors(abs)(-2)
    (True, 2)
    """

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)

    def __call__(self, item: Any) -> Any:
        try:
            return self.fn(item)
        except Exception as exc:  # noqa: BLE001 - turned into a Failure for the skip policy
            return Failure(exc)


class SkipBudget:
    """Counts skipped elements for the stage ``what``; see the module docstring.

    ``skip(failure, position)`` records one skip: the first ``log_first`` are logged
    (``logging.WARNING`` on this module's logger) as ``"<what>: skipped element
    <position>: <error>"``; a skip beyond ``max_skips`` (``None``: no cap) raises
    :class:`~feedline.exceptions.DataError` ``"<what>: <n> elements failed, more than
    max_skips=<m>; the last: element <position>: <error>"`` (from the error itself when
    it is at hand).

    >>> budget = SkipBudget("map(decode)", max_skips=1)
    >>> budget.skip(Failure(ValueError("bad")), 3); budget.count
    1
    >>> budget.skip(Failure(ValueError("worse")), 7)
    Traceback (most recent call last):
    ...
    feedline.exceptions.DataError: map(decode): 2 elements failed, more than max_skips=1; the last: element 7: ValueError: worse
    """

    def __init__(self, what: str, *, max_skips: int | None = None, log_first: int = 5,
                 count: int = 0) -> None:
        self.what = what
        if max_skips is not None:
            non_negative_int("max_skips", max_skips)
        self.max_skips = max_skips
        self.log_first = log_first
        self.count = count

    def skip(self, failure: Failure, position: Any) -> None:
        self.count += 1
        where = f"element {position}: {failure.describe()}"
        if self.max_skips is not None and self.count > self.max_skips:
            err = DataError(
                f"{self.what}: {self.count} elements failed, more than "
                f"max_skips={self.max_skips}; the last: {where}"
            )
            if failure.error is not None:
                raise err from failure.error
            raise err
        if self.count <= self.log_first:
            logger.warning("%s: skipped %s", self.what, where)
            if self.count == self.log_first:
                logger.warning("%s: further skips are counted, not logged", self.what)
