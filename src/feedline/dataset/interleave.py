"""``Dataset.interleave``: read several datasets at once, in tf.data's exact order.

For each input item ``x`` (typically a file path) ``fn(x)`` returns a :class:`Dataset`
(typically the records of that file). The stage keeps ``cycle_length`` slots and a
cursor, exactly as tf.data's ``interleave`` (without ``num_parallel_calls``) does:

* at an empty slot, while the input lasts, it opens ``fn(next input item)`` there and
  reads from it at once;
* it takes ``block_length`` items from the slot under the cursor, then moves the cursor
  to the next slot (wrapping around);
* when the slot's dataset ends (even in the middle of a block) the slot is emptied and
  the cursor moves on: the next input item is opened only when the cursor comes back
  to an empty slot; once the input is used up, empty slots are passed over.

So inputs of lengths 1, 3 and 2 with ``cycle_length=2`` give ``[0, 10, 11, 20, 12, 21]``,
as tf.data does. The order depends only on the input order and the datasets' contents.

This is TensorFlow's ``shuffle_batch_join`` case: a shuffle buffer after ``interleave``
mixes records from ``cycle_length`` files. With ``num_parallel_reads=N`` each open
dataset is read ahead by a background thread (buffer of ``N`` items), so file I/O and
record decoding overlap; the order is unchanged.

State: the input's state, the cursor, the count taken from the current block, and for
each open slot the input item and that dataset's state; input items must therefore be
JSON values (paths, numbers).

>>> ds = Dataset.from_iterable([0, 10, 20]).interleave(
...     lambda base: Dataset.range(base, base + 3), cycle_length=2, block_length=2)
>>> ds.to_list()
[0, 1, 10, 11, 2, 12, 20, 21, 22]
>>> sizes = {0: 1, 10: 3, 20: 2}
>>> Dataset.from_iterable([0, 10, 20]).interleave(
...     lambda b: Dataset.range(b, b + sizes[b]), cycle_length=2).to_list()
[0, 10, 11, 20, 12, 21]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from feedline._internal.state import state_bool
from feedline._internal.validate import non_negative_int, optional_positive_int, positive_int
from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.exceptions import StateError, StateNotSupportedError

__all__ = ["InterleaveDataset"]

_JSON_SCALARS = (str, int, float, bool, type(None))


class InterleaveDataset(Dataset):
    """Round-robin reading of ``fn(item)`` for the parent's items; see the module docstring.

    Args:
        parent: the dataset of inputs (typically paths); they must be JSON values for
            ``get_state()``.
        fn: called with each input; returns a :class:`Dataset` (else ``TypeError``).
        cycle_length: how many datasets are read at once (a positive int).
        block_length: items taken from one dataset before moving on (a positive int).
        num_parallel_reads: ``None`` reads in the consumer's thread; ``N`` reads each
            open dataset ahead in a background thread with a buffer of ``N`` items.

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
    """tf.data's sequential interleave loop: ``cycle_length`` slots, a cursor and a count
    of items taken from the current slot's block."""

    def __init__(self, owner: InterleaveDataset, source: DatasetIterator, ctx: BuildContext) -> None:
        self._owner = owner
        self._source = source
        self._ctx = ctx
        self._cycle = owner._cycle
        self._block = owner._block
        self._slots: list[_Slot | None] = [None] * self._cycle
        self._open_count = 0
        self._cursor = 0
        self._taken = 0
        self._source_done = False

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
            try:
                it.set_state(state)
            except BaseException:
                it.close()
                raise
        return _Slot(element, it)

    def _advance(self) -> None:
        self._taken = 0
        self._cursor = (self._cursor + 1) % self._cycle

    def __next__(self) -> Any:
        slots = self._slots
        while not self._source_done or self._open_count:
            slot = slots[self._cursor]
            if slot is not None:
                try:
                    item = next(slot.it)
                except StopIteration:
                    slot.it.close()
                    slots[self._cursor] = None
                    self._open_count -= 1
                    self._advance()
                    continue
                self._taken += 1
                if self._taken == self._block:
                    self._advance()
                return item
            if self._source_done:
                self._advance()
                continue
            try:
                element = next(self._source)
            except StopIteration:
                self._source_done = True
                continue
            slots[self._cursor] = self._open(element)
            self._open_count += 1
        raise StopIteration

    def get_state(self) -> dict[str, Any]:
        slots: list[dict | None] = []
        for s in self._slots:
            if s is None:
                slots.append(None)
                continue
            if not isinstance(s.element, _JSON_SCALARS):
                raise StateNotSupportedError(
                    f"interleave can only save its position when input items are JSON values "
                    f"(paths, numbers); got {type(s.element).__name__}"
                )
            slots.append({"element": s.element, "state": s.it.get_state()})
        return {
            "type": "interleave", "source": self._source.get_state(), "slots": slots,
            "cursor": self._cursor, "taken": self._taken, "source_done": self._source_done,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "interleave", ("source", "slots", "cursor", "taken", "source_done"))
        if not isinstance(state["slots"], list) or len(state["slots"]) != self._cycle:
            raise StateError(f"interleave state has {len(state['slots'])} slots, this stage "
                             f"has cycle_length={self._cycle}")
        cursor = non_negative_int("state['cursor']", state["cursor"])
        taken = non_negative_int("state['taken']", state["taken"])
        if cursor >= self._cycle or taken >= self._block:
            raise StateError(f"interleave state cursor {cursor} / taken {taken} out of range")
        self._close_slots()
        self._source.set_state(state["source"])
        self._source_done = state_bool(state, "source_done", "interleave")
        for i, s in enumerate(state["slots"]):
            if s is not None:
                self._slots[i] = self._open(s["element"], s["state"])
                self._open_count += 1
        self._cursor = cursor
        self._taken = taken

    def _close_slots(self) -> None:
        slots, self._slots = self._slots, [None] * self._cycle
        self._open_count = 0
        for s in slots:
            if s is not None:
                s.it.close()

    def close(self) -> None:
        self._close_slots()
        self._source.close()
