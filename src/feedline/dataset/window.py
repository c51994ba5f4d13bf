"""``Dataset.window``: overlapping or strided windows of consecutive items (tf.data's
``window``).

Window ``k`` holds the items at positions ``k*shift + j*stride`` for ``j = 0 ..
size - 1``, and is yielded as a random-access :class:`~feedline.dataset.base.Dataset` of
those items (tf.data yields a dataset per window too; ``.flat_map(lambda w:
w.batch(size))`` turns windows into batches). Exactly tf.data's loop:

* the stage fills a buffer up to ``(size - 1) * stride + 1`` items;
* the window is every ``stride``-th buffered item;
* it then drops ``shift`` items from the buffer (reading and dropping more input when
  ``shift`` is larger than the buffer).

At the end of the input the last windows are shorter, down to one item, unless
``drop_remainder=True`` drops every window that is not full. ``shift`` defaults to
``size``.

State: the input's position at or before the oldest buffered item and the number of
items read; a restore reads the buffered items again (the input must be resumable).

>>> [w.to_list() for w in Dataset.range(7).window(3, shift=2)]
[[0, 1, 2], [2, 3, 4], [4, 5, 6], [6]]
>>> [w.to_list() for w in Dataset.range(7).window(2, shift=3, stride=2, drop_remainder=True)]
[[0, 2], [3, 5]]
"""

from __future__ import annotations

from collections import deque
from itertools import islice
from typing import Any

from feedline._internal.state import state_bool
from feedline.dataset._replay import Replayer
from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.cardinality import INFINITE, UNKNOWN, cardinality
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.exceptions import StateError

__all__ = ["WindowDataset"]


class WindowDataset(Dataset):
    """Windows of the parent's items as datasets; see the module docstring.

    Args:
        parent: the dataset read.
        size: items per window (a positive int; :meth:`Dataset.window` checks the ints).
        shift: positions between the starts of two windows.
        stride: positions between two items of a window.
        drop_remainder: drop every window that is not full.

    >>> ds = Dataset.range(4).window(2)
    >>> type(ds).__name__, [w.to_list() for w in ds], len(ds)
    ('WindowDataset', [[0, 1], [2, 3]], 2)
    """

    def __init__(self, parent: Dataset, size: int, shift: int, stride: int,
                 drop_remainder: bool) -> None:
        super().__init__()
        self._parents = (parent,)
        self._size, self._shift, self._stride = size, shift, stride
        self._drop_remainder = drop_remainder

    @property
    def name(self) -> str:
        return f"window({self._size}, shift={self._shift}, stride={self._stride})"

    def _cardinality(self) -> int:
        n = cardinality(self._parents[0])
        if n in (INFINITE, UNKNOWN):
            return n
        if self._drop_remainder:
            span = (self._size - 1) * self._stride + 1
            return 0 if n < span else (n - span) // self._shift + 1
        return -(-n // self._shift)

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return _WindowIterator(self, self._parents[0]._build(ctx))


class _WindowIterator(DatasetIterator):
    def __init__(self, owner: WindowDataset, parent: DatasetIterator) -> None:
        self._owner = owner
        self._span = (owner._size - 1) * owner._stride + 1
        self._buffer: deque = deque()
        self._exhausted = False
        self._rp = Replayer(parent, every=max(256, self._span),
                            oldest=lambda: self._rp.read - len(self._buffer))

    def __next__(self) -> Dataset:
        owner, buf, rp = self._owner, self._buffer, self._rp
        while not self._exhausted and len(buf) < self._span:
            try:
                buf.append(rp.next())
            except StopIteration:
                self._exhausted = True
        if not buf or (owner._drop_remainder and len(buf) < self._span):
            raise StopIteration
        window = list(islice(buf, 0, None, owner._stride))
        if owner._shift >= len(buf):
            for _ in range(owner._shift - len(buf)):
                if self._exhausted:
                    break
                try:
                    rp.next()
                except StopIteration:
                    self._exhausted = True
            buf.clear()
        else:
            for _ in range(owner._shift):
                buf.popleft()
        return Dataset.from_iterable(window)

    def get_state(self) -> dict[str, Any]:
        held = len(self._buffer)
        return {"type": "window", "input": self._rp.get_state(self._rp.read - held),
                "held": held, "exhausted": self._exhausted}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "window", ("input", "held", "exhausted"))
        held = state["held"]
        if not isinstance(held, int) or not 0 <= held <= self._span:
            raise StateError(f"window state holds {held!r} items, at most {self._span} fit")
        first = int(state["input"]["read"]) - held
        self._buffer = deque(item for number, item in self._rp.replay(state["input"])
                             if number >= first)
        self._exhausted = state_bool(state, "exhausted", "window")

    def close(self) -> None:
        self._buffer.clear()
        self._rp.parent.close()
