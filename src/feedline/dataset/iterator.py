"""The iterator protocol every pipeline stage implements.

A :class:`DatasetIterator` is a Python iterator that can also report where it is and
jump back there:

* ``get_state()`` returns a small JSON-serialisable ``dict`` describing the position:
  the items already produced are exactly the ones that will *not* be produced again.
* ``set_state(state)`` moves a fresh iterator of the same pipeline to that position, so
  that it yields exactly the items the uninterrupted iterator would have yielded next.
* ``close()`` releases threads, processes, files; it is idempotent and also runs when the
  iterator is garbage collected or used as a context manager.

A stage that cannot capture its position raises
:class:`~feedline.exceptions.StateNotSupportedError` from ``get_state`` — never a state
that would restore to the wrong data.

>>> class Count(DatasetIterator):
...     def __init__(self, n):
...         self.i, self.n = 0, n
...     def __next__(self):
...         if self.i >= self.n:
...             raise StopIteration
...         self.i += 1
...         return self.i - 1
...     def get_state(self):
...         return {"i": self.i}
...     def set_state(self, state):
...         self.i = state["i"]
>>> it = Count(5); next(it); s = it.get_state(); next(it)
0
1
>>> it2 = Count(5); it2.set_state(s); list(it2)
[1, 2, 3, 4]
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar

from feedline._internal.closing import Closeable
from feedline.exceptions import StateError

__all__ = ["DatasetIterator", "TransformIterator", "check_state"]

T = TypeVar("T")


class DatasetIterator(Closeable, Iterator[T]):
    """Base class of stage iterators; see the module docstring for the contract.

    ``close()``, the context manager and the finaliser come from
    :class:`~feedline._internal.closing.Closeable`.

    >>> class Countdown(DatasetIterator):
    ...     def __init__(self, n): self.n = n
    ...     def __next__(self):
    ...         if self.n == 0: raise StopIteration
    ...         self.n -= 1
    ...         return self.n
    ...     def get_state(self): return {"type": "countdown", "n": self.n}
    ...     def set_state(self, state): self.n = state["n"]
    >>> it = Countdown(3); next(it)
    2
    >>> again = Countdown(3); again.set_state(it.get_state()); list(again)
    [1, 0]
    >>> Dataset.from_source(lambda: Countdown(2)).to_list()
    [1, 0]
    """

    def __iter__(self) -> DatasetIterator[T]:
        return self

    def __next__(self) -> T:  # pragma: no cover - abstract
        raise NotImplementedError

    def get_state(self) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def set_state(self, state: dict[str, Any]) -> None:  # pragma: no cover - abstract
        """Move this (fresh) iterator to the position ``state`` describes.

        Args:
            state: a ``get_state()`` of an iterator of the same pipeline; a state made by
                another stage raises :class:`~feedline.exceptions.StateError`.
        """
        raise NotImplementedError

    def _fast(self) -> Iterator[T]:
        """An iterator yielding exactly what ``__next__`` would, sharing this iterator's
        position, but cheaper per item (often a C-level ``map``/``filter``/``islice``).

        Downstream stages pull through it; they must fetch it again after
        ``set_state``. The default is ``self``.
        """
        return self


class TransformIterator(DatasetIterator[T]):
    """A stateless per-item stage: ``transform(source)`` (e.g. ``lambda s: map(fn, s)`` or
    ``lambda s: filter(pred, s)``) applied to the parent's fast path, lazily. Its state is
    the parent's, since it holds no item of its own.

    Args:
        parent: the parent stage's iterator.
        transform: a function of an iterator returning the transformed iterator.

    >>> from feedline import Dataset
    >>> it = TransformIterator(Dataset.range(4).iterator(), lambda s: map(str, s))
    >>> list(it)
    ['0', '1', '2', '3']
    """

    def __init__(self, parent: DatasetIterator, transform: Any) -> None:
        self._parent = parent
        self._transform = transform
        self._it: Iterator[T] | None = None

    def _fast(self) -> Iterator[T]:
        if self._it is None:
            self._it = self._transform(self._parent._fast())
        return self._it

    def __next__(self) -> T:
        return next(self._it if self._it is not None else self._fast())

    def get_state(self) -> dict[str, Any]:
        return self._parent.get_state()

    def set_state(self, state: dict[str, Any]) -> None:
        """Move the parent to ``state``; the transform restarts from there.

        Args:
            state: the parent's state (this stage's state is the parent's).
        """
        self._parent.set_state(state)
        self._it = None

    def close(self) -> None:
        self._parent.close()


def check_state(state: Any, kind: str, keys: tuple[str, ...]) -> dict[str, Any]:
    """Validate that ``state`` is a dict made by the stage ``kind`` with ``keys``.

    Args:
        state: the state to check; not a dict, another ``"type"`` or a missing key
            raises :class:`~feedline.exceptions.StateError`.
        kind: the stage's ``"type"`` value.
        keys: the keys the state must hold.

    Returns:
        ``state`` itself.

    >>> check_state({"type": "take", "count": 1}, "take", ("count",))
    {'type': 'take', 'count': 1}
    >>> check_state({"type": "map"}, "take", ("count",))
    Traceback (most recent call last):
    ...
    feedline.exceptions.StateError: state was made by stage 'map', not by 'take'
    """
    if not isinstance(state, dict):
        raise StateError(f"state for stage {kind!r} must be a dict, got {type(state).__name__}")
    made_by = state.get("type")
    if made_by != kind:
        raise StateError(f"state was made by stage {made_by!r}, not by {kind!r}")
    missing = [k for k in keys if k not in state]
    if missing:
        raise StateError(f"state for stage {kind!r} lacks {', '.join(missing)}")
    return state
