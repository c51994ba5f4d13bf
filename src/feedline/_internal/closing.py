"""One ``close()`` protocol for everything that holds files, threads or processes.

:class:`Closeable` gives a class the three methods that go with a ``close()`` method:

* ``with obj as x:`` binds ``x`` to ``obj`` itself and calls ``obj.close()`` when the
  block ends, normally or by an exception; the exception is not suppressed.
* ``obj.__del__()`` (the garbage collector) calls ``obj.close()`` too and never raises:
  any ``Exception`` from ``close`` is swallowed, since a finaliser has nowhere to report
  it. This includes a ``close`` called on an object whose ``__init__`` failed half way,
  so ``close`` implementations read their attributes with ``getattr(self, name, None)``.
* ``close()`` itself is what the class defines. It must be idempotent: a second call
  (an explicit ``close()`` followed by ``with`` exit, then the finaliser) does nothing.
  The default has nothing to release.

``Closeable`` defines no ``__slots__`` entries and no ``__init__``, so it mixes into any
class (``class Reader(Closeable, Iterator[bytes])``).

>>> class Handle(Closeable):
...     def __init__(self):
...         self.resource, self.releases = object(), 0
...     def close(self):
...         if self.resource is not None:
...             self.resource = None
...             self.releases += 1
>>> with Handle() as h:
...     pass
>>> h.resource is None, h.releases
(True, 1)
>>> h.close(); h.releases  # idempotent
1
>>> class Broken(Closeable):
...     def close(self):
...         raise OSError("device gone")
>>> Broken().__del__()  # a finaliser never raises
"""

from __future__ import annotations

from typing import TypeVar

__all__ = ["Closeable", "Abortable"]

_C = TypeVar("_C", bound="Closeable")


class Closeable:
    """Mixin: context manager and finaliser around an idempotent ``close()``; see the
    module docstring for the exact semantics."""

    __slots__ = ()

    def close(self) -> None:
        """Release resources; idempotent. The default has nothing to release."""

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never raise from a finaliser
            pass


class Abortable(Closeable):
    """Mixin for writers with ``close()`` (finish) and ``abort()`` (discard): leaving a
    ``with`` block by an exception calls ``abort()``, leaving it normally ``close()``.

    >>> class Draft(Abortable):
    ...     state = "open"
    ...     def close(self):
    ...         self.state = "kept"
    ...     def abort(self):
    ...         self.state = "dropped"
    >>> try:
    ...     with Draft() as d:
    ...         raise KeyError("x")
    ... except KeyError:
    ...     pass
    >>> d.state
    'dropped'
    """

    __slots__ = ()

    def abort(self) -> None:
        """Discard what was written; idempotent. The default calls :meth:`close`."""
        self.close()

    def __exit__(self, *exc_info: object) -> None:
        if exc_info and exc_info[0] is not None:
            self.abort()
        else:
            self.close()
