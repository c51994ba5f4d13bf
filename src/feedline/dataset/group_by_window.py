"""``Dataset.group_by_window``: group items by key, reduce each full group (tf.data's
``group_by_window``).

``key_func(item)`` gives the item's key (an int in tf.data; any hashable value here).
Items gather in one group per key; when a group holds its window size (``window_size``,
or ``window_size_func(key)``, asked once per key) it is *flushed*:
``reduce_func(key, window)`` is called with the group as a random-access
:class:`~feedline.dataset.base.Dataset` and every item of the dataset (or iterable) it
returns is yielded, before any more input is read. When the input ends, the groups
left are flushed one at a time, in ascending key order (tf.data keeps its groups in an
ordered map), each before the next is reduced.

State: the input's position at or before the oldest held item, the positions of the
held items and of the group being flushed, and how many of its results were yielded. A
restore reads the held items again and calls ``key_func`` and ``reduce_func`` again, so
the input and both functions must be deterministic.

>>> ds = Dataset.range(10).group_by_window(
...     key_func=lambda x: x % 2, reduce_func=lambda key, w: w.batch(3), window_size=3)
>>> ds.to_list()
[[0, 2, 4], [1, 3, 5], [6, 8], [7, 9]]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from feedline.dataset._replay import Replayer
from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.exceptions import StateError

__all__ = ["GroupByWindowDataset"]


class GroupByWindowDataset(Dataset):
    """Reduced windows of same-key items; see the module docstring.

    Args:
        parent: the dataset read.
        key_func: an item's key (any hashable value).
        reduce_func: called as ``reduce_func(key, window)`` with a full group as a
            random-access dataset; the items of what it returns are yielded.
        window_size_func: the group size of a key (asked once per key).

    >>> ds = Dataset.from_iterable(list("abcab")).group_by_window(
    ...     key_func=ord, reduce_func=lambda k, w: [w.to_list()], window_size=2)
    >>> type(ds).__name__, ds.to_list()
    ('GroupByWindowDataset', [['a', 'a'], ['b', 'b'], ['c']])
    """

    def __init__(self, parent: Dataset, key_func: Callable[[Any], Any],
                 reduce_func: Callable[[Any, Dataset], Any],
                 window_size_func: Callable[[Any], int]) -> None:
        super().__init__()
        self._parents = (parent,)
        self._key_func = key_func
        self._reduce_func = reduce_func
        self._window_size_func = window_size_func

    @property
    def name(self) -> str:
        return f"group_by_window({getattr(self._key_func, '__name__', 'key_func')})"

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return _GroupByWindowIterator(self, self._parents[0]._build(ctx))


def _first_key(keys: Any) -> Any:
    try:
        return min(keys)
    except TypeError:  # keys that do not order: the oldest group first
        return next(iter(keys))


class _GroupByWindowIterator(DatasetIterator):
    def __init__(self, owner: GroupByWindowDataset, parent: DatasetIterator) -> None:
        self._owner = owner
        self._groups: dict[Any, list[tuple[int, Any]]] = {}
        self._sizes: dict[Any, int] = {}
        self._current: Iterator | None = None
        self._current_positions: list[int] = []
        self._emitted = 0
        self._exhausted = False
        self._rp = Replayer(parent, oldest=self._oldest)

    def _oldest(self) -> int:
        firsts = [g[0][0] for g in self._groups.values()]
        if self._current_positions:
            firsts.append(self._current_positions[0])
        return min(firsts, default=self._rp.read)

    def _size(self, key: Any) -> int:
        size = self._sizes.get(key)
        if size is None:
            size = self._owner._window_size_func(key)
            if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
                raise ValueError(f"group_by_window: the window size of key {key!r} must be a "
                                 f"positive int, got {size!r}")
            self._sizes[key] = size
        return size

    def _flush(self, key: Any) -> None:
        group = self._groups.pop(key)
        self._current_positions = [number for number, _ in group]
        self._emitted = 0
        window = Dataset.from_iterable([item for _, item in group])
        self._current = iter(self._owner._reduce_func(key, window))

    def __next__(self) -> Any:
        groups, key_func, rp = self._groups, self._owner._key_func, self._rp
        while True:
            if self._current is not None:
                try:
                    item = next(self._current)
                except StopIteration:
                    self._current = None
                    self._current_positions = []
                else:
                    self._emitted += 1
                    return item
            while not self._exhausted:
                number = rp.read
                try:
                    item = rp.next()
                except StopIteration:
                    self._exhausted = True
                    break
                key = key_func(item)
                group = groups.get(key)
                if group is None:
                    group = groups[key] = []
                group.append((number, item))
                if len(group) >= self._size(key):
                    self._flush(key)
                    break
            if self._current is None:
                if not groups:
                    raise StopIteration
                self._flush(_first_key(groups))

    def get_state(self) -> dict[str, Any]:
        held = sorted(number for g in self._groups.values() for number, _ in g)
        return {"type": "group_by_window", "input": self._rp.get_state(self._oldest()),
                "held": held, "flushing": list(self._current_positions),
                "emitted": self._emitted, "exhausted": self._exhausted}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "group_by_window",
                    ("input", "held", "flushing", "emitted", "exhausted"))
        held, flushing = set(state["held"]), list(state["flushing"])
        wanted = set(flushing)
        self._groups, self._current, self._current_positions = {}, None, []
        window: list[Any] = []
        key_func = self._owner._key_func
        for number, item in self._rp.replay(state["input"]):
            if number in held:
                self._groups.setdefault(key_func(item), []).append((number, item))
            elif number in wanted:
                window.append(item)
        if len(window) != len(flushing):
            raise StateError("group_by_window state names items its input does not have")
        self._exhausted = bool(state["exhausted"])
        if flushing:
            key = key_func(window[0])
            self._current_positions = flushing
            self._current = iter(self._owner._reduce_func(key, Dataset.from_iterable(window)))
            emitted = int(state["emitted"])
            for _ in range(emitted):
                try:
                    next(self._current)
                except StopIteration:
                    raise StateError("group_by_window: reduce_func gave fewer items on "
                                     "restore than before; it must be deterministic") from None
            self._emitted = emitted

    def close(self) -> None:
        self._groups.clear()
        self._current = None
        self._rp.parent.close()
