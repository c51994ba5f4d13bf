"""``Dataset.interleave``: read several datasets at once, round robin.

For each input item ``x`` (typically a file path) ``fn(x)`` returns a :class:`Dataset`
(typically the records of that file). Up to ``cycle_length`` of them are open at a
time, in input order; the output takes ``block_length`` items from the first open
dataset, then ``block_length`` from the next, and so on around the cycle. When an open
dataset ends, the next input item's dataset takes its place in the cycle (and is read
from at once); when the input is used up, the cycle shrinks. The output order depends
only on the input order and the datasets' contents — deterministic for a given seed.

This is TensorFlow's ``shuffle_batch_join`` case: a shuffle buffer after ``interleave``
mixes records from ``cycle_length`` files. With ``num_parallel_reads=N`` each open
dataset is read ahead by a background thread (buffer of ``N`` items), so file I/O and
record decoding overlap; the order is unchanged.

State: the input's state, and for each open slot the input item and that dataset's
state; input items must therefore be JSON values (paths, numbers).

>>> ds = Dataset.from_iterable([0, 10, 20]).interleave(
...     lambda base: Dataset.range(base, base + 3), cycle_length=2, block_length=2)
>>> ds.to_list()
[0, 1, 10, 11, 2, 20, 21, 12, 22]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from feedline._internal.validate import non_negative_int, optional_positive_int, positive_int
from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.exceptions import StateError, StateNotSupportedError

__all__ = ["InterleaveDataset"]

_JSON_SCALARS = (str, int, float, bool, type(None))


class InterleaveDataset(Dataset):
    """Round-robin reading of ``fn(item)`` for the parent's items; see the module docstring.

    >>> ds = Dataset.range(2).interleave(lambda x: Dataset.from_iterable([x * 10, x * 10 + 1]), cycle_length=2)
    >>> type(ds).__name__, ds.to_list()
    ('InterleaveDataset', [0, 10, 1, 11])
    """

    def __init__(self, parent: Dataset, fn: Callable[[Any], Dataset], *, cycle_length: int,
                 block_length: int = 1, num_parallel_reads: int | None = None) -> None:
        super().__init__()
        self._parents = (parent,)
        self._fn = fn
        self._cycle = positive_int("cycle_length", cycle_length)
        self._block = positive_int("block_length", block_length)
        self._parallel = optional_positive_int("num_parallel_reads", num_parallel_reads)

    @property
    def name(self) -> str:
        return f"interleave({self._cycle}x{self._block})"

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return _InterleaveIterator(self, self._parents[0]._build(ctx), ctx)


class _Slot:
    __slots__ = ("element", "it")

    def __init__(self, element: Any, it: DatasetIterator) -> None:
        self.element = element
        self.it = it


class _InterleaveIterator(DatasetIterator):
    def __init__(self, owner: InterleaveDataset, source: DatasetIterator, ctx: BuildContext) -> None:
        self._owner = owner
        self._source = source
        self._ctx = ctx
        self._slots: list[_Slot] = []
        self._cursor = 0
        self._taken = 0
        self._source_done = False
        self._started = False

    def _open(self, element: Any, state: dict | None = None) -> _Slot:
        ds = self._owner._fn(element)
        if not isinstance(ds, Dataset):
            raise TypeError(f"interleave: fn must return a Dataset, got {type(ds).__name__} "
                            f"for {element!r}")
        it: DatasetIterator = ds._build(self._ctx)
        if self._owner._parallel:
            from feedline.runtime.threads import BackgroundIterator

            it = BackgroundIterator(it, buffer_size=self._owner._parallel,
                                    name=f"interleave-read({element!r})")
        if state is not None:
            it.set_state(state)
        return _Slot(element, it)

    def _next_element(self) -> tuple[bool, Any]:
        if self._source_done:
            return False, None
        try:
            return True, next(self._source)
        except StopIteration:
            self._source_done = True
            return False, None

    def _fill(self) -> None:
        while len(self._slots) < self._owner._cycle:
            ok, element = self._next_element()
            if not ok:
                return
            self._slots.append(self._open(element))

    def __next__(self) -> Any:
        if not self._started:
            self._started = True
            self._fill()
        slots = self._slots
        while slots:
            slot = slots[self._cursor]
            try:
                item = next(slot.it)
            except StopIteration:
                slot.it.close()
                ok, element = self._next_element()
                self._taken = 0
                if ok:
                    slots[self._cursor] = self._open(element)
                else:
                    del slots[self._cursor]
                    if slots:
                        self._cursor %= len(slots)
                    else:
                        self._cursor = 0
                continue
            self._taken += 1
            if self._taken >= self._owner._block:
                self._taken = 0
                self._cursor = (self._cursor + 1) % len(slots)
            return item
        raise StopIteration

    def get_state(self) -> dict[str, Any]:
        slots = []
        for s in self._slots:
            if not isinstance(s.element, _JSON_SCALARS):
                raise StateNotSupportedError(
                    f"interleave can only save its position when input items are JSON values "
                    f"(paths, numbers); got {type(s.element).__name__}"
                )
            slots.append({"element": s.element, "state": s.it.get_state()})
        return {
            "type": "interleave", "source": self._source.get_state(), "slots": slots,
            "cursor": self._cursor, "taken": self._taken, "source_done": self._source_done,
            "started": self._started,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "interleave", ("source", "slots", "cursor", "taken", "source_done",
                                          "started"))
        self._close_slots()
        self._source.set_state(state["source"])
        self._source_done = bool(state["source_done"])
        self._started = bool(state["started"])
        self._slots = [self._open(s["element"], s["state"]) for s in state["slots"]]
        self._cursor = non_negative_int("state['cursor']", state["cursor"])
        self._taken = non_negative_int("state['taken']", state["taken"])
        if self._slots and self._cursor >= len(self._slots):
            raise StateError(f"interleave state cursor {self._cursor} out of range")

    def _close_slots(self) -> None:
        slots, self._slots = self._slots, []
        for s in slots:
            s.it.close()

    def close(self) -> None:
        self._close_slots()
        self._source.close()
