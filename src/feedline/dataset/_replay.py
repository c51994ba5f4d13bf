"""Helpers for stages that hold items between outputs (window, group_by_window, unbatch,
scan, unique): re-reading held items after a restore, and JSON encoding of small values.

A stage's state never contains its items. :class:`Replayer` reads the parent item by
item, numbering the items (``0, 1, ...``), and keeps a parent state taken every
``every`` reads. ``get_state(oldest)`` returns the latest kept parent state at or before
item ``oldest`` (the oldest item the stage still holds) and the number of items read;
after ``set_state`` the stage re-reads those items with :meth:`Replayer.replay` and keeps
the ones it held. The parent must therefore be deterministic and resumable.

>>> from feedline.dataset import Dataset
>>> rp = Replayer(Dataset.range(10).iterator(), every=4)
>>> [rp.next() for _ in range(6)]
[0, 1, 2, 3, 4, 5]
>>> state = rp.get_state(oldest=5)          # the stage still holds item 5
>>> again = Replayer(Dataset.range(10).iterator(), every=4)
>>> list(again.replay(state))               # (number, item) from the kept state on
[(4, 4), (5, 5)]
>>> again.next()
6
>>> decode_value(encode_value((1, b"x", [2.5]))) == (1, b"x", [2.5])
True
"""

from __future__ import annotations

import base64
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from feedline._internal.state import state_int
from feedline.dataset.iterator import DatasetIterator
from feedline.exceptions import StateError, StateNotSupportedError

__all__ = ["Replayer", "encode_value", "decode_value"]


class Replayer:
    """Numbered reads from ``parent`` with parent states kept every ``every`` reads;
    see the module docstring. ``oldest`` (optional) returns the number of the oldest item
    the stage holds, so that older kept states are dropped as reading goes on."""

    __slots__ = ("parent", "read", "_every", "_snaps", "_error", "_oldest")

    def __init__(self, parent: DatasetIterator, *, every: int = 256,
                 oldest: Callable[[], int] | None = None) -> None:
        self.parent = parent
        self.read = 0
        self._every = every
        self._snaps: deque[tuple[int, dict]] | None = deque()
        self._error: BaseException | None = None
        self._oldest = oldest

    def next(self) -> Any:
        """The parent's next item (``StopIteration`` at its end); numbered ``self.read``."""
        snaps = self._snaps
        if snaps is not None and self.read % self._every == 0 and (
                not snaps or snaps[-1][0] != self.read):
            self._snapshot(snaps)
        item = next(self.parent)
        self.read += 1
        return item

    def _snapshot(self, snaps: deque) -> None:
        try:
            snaps.append((self.read, self.parent.get_state()))
        except StateNotSupportedError as exc:
            self._snaps, self._error = None, exc
            return
        if self._oldest is not None:
            self._prune(snaps, self._oldest())

    @staticmethod
    def _prune(snaps: deque, oldest: int) -> None:
        while len(snaps) > 1 and snaps[1][0] <= oldest:
            snaps.popleft()

    def get_state(self, oldest: int) -> dict[str, Any]:
        """A state from which items ``oldest .. read - 1`` can be read again."""
        if oldest >= self.read:
            return {"start": self.read, "parent": self.parent.get_state(), "read": self.read}
        if self._snaps is None:
            raise StateNotSupportedError(
                f"this stage cannot report its position because its input cannot: {self._error}"
            ) from self._error
        self._prune(self._snaps, oldest)
        start, parent_state = self._snaps[0]
        if start > oldest:  # pragma: no cover - a kept state always precedes held items
            raise StateError(f"no input state kept before item {oldest}")
        return {"start": start, "parent": parent_state, "read": self.read}

    def seek(self, state: dict[str, Any]) -> None:
        """Move the parent to ``state``, one taken with nothing held (``oldest >= read``)."""
        if isinstance(state, dict) and state.get("start") != state.get("read"):
            raise StateError("this input position holds items to re-read; use replay()")
        for _ in self.replay(state):  # pragma: no cover - start == read: nothing to re-read
            pass

    def replay(self, state: dict[str, Any]) -> Iterator[tuple[int, Any]]:
        """Move the parent to ``state`` (from :meth:`get_state`) and yield ``(number,
        item)`` for the items read between that state and the save."""
        if not isinstance(state, dict) or not {"start", "parent", "read"} <= state.keys():
            raise StateError(f"malformed input position in state: {state!r}")
        start = state_int(state, "start", "input")
        target = state_int(state, "read", "input", low=start)
        self.parent.set_state(state["parent"])
        self.read = start
        self._snaps = deque([(start, state["parent"])])
        self._error = None
        while self.read < target:
            number = self.read
            try:
                item = self.next()
            except StopIteration:
                raise StateError(
                    f"the input ended after {number} items while restoring a position at "
                    f"{target}: it is not the input the state was saved with") from None
            yield number, item


def encode_value(value: Any) -> Any:
    """``value`` as JSON data: JSON scalars, lists, tuples, dicts, bytes, numpy scalars and
    arrays; ``TypeError`` for anything else.

    >>> encode_value({"n": (1, 2)})
    {'t': 'dict', 'v': [['n', {'t': 'tuple', 'v': [1, 2]}]]}
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [encode_value(v) for v in value]
    if isinstance(value, tuple):
        return {"t": "tuple", "v": [encode_value(v) for v in value]}
    if isinstance(value, dict):
        return {"t": "dict", "v": [[encode_value(k), encode_value(v)] for k, v in value.items()]}
    if isinstance(value, (bytes, bytearray)):
        return {"t": "bytes", "v": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, (np.ndarray, np.generic)) and value.dtype.kind in "biufcSU":
        arr = np.asarray(value)
        return {"t": "ndarray" if isinstance(value, np.ndarray) else "numpy",
                "dtype": arr.dtype.str, "shape": list(arr.shape),
                "v": base64.b64encode(np.ascontiguousarray(arr).tobytes()).decode("ascii")}
    raise TypeError(f"cannot save a {type(value).__name__} in a JSON state")


def decode_value(data: Any) -> Any:
    """The value :func:`encode_value` encoded.

    >>> decode_value(encode_value(np.arange(3)))
    array([0, 1, 2])
    """
    if isinstance(data, list):
        return [decode_value(v) for v in data]
    if not isinstance(data, dict):
        return data
    kind = data.get("t")
    if kind == "tuple":
        return tuple(decode_value(v) for v in data["v"])
    if kind == "dict":
        return {_hashable(decode_value(k)): decode_value(v) for k, v in data["v"]}
    if kind == "bytes":
        return base64.b64decode(data["v"])
    if kind in ("ndarray", "numpy"):
        arr = np.frombuffer(base64.b64decode(data["v"]), dtype=np.dtype(data["dtype"]))
        arr = arr.reshape(data["shape"]).copy()
        return arr if kind == "ndarray" else arr[()]
    raise StateError(f"malformed value in state: {data!r}")


def _hashable(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key

