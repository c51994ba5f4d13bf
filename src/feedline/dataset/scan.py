"""``Dataset.scan``: a running state through the items (tf.data's ``scan``).

``scan_func(state, item)`` returns ``(new_state, output)``; the stage yields each
``output`` and carries ``new_state`` to the next item, starting from
``initial_state``. One output per item.

State: the input's position and the scan state, saved as JSON when it is made of JSON
values, tuples, dicts, bytes and numpy arrays or scalars; for any other scan state the
position is the number of items read, and a restore reads the input again from the
start of the iteration to rebuild it (the input must then be resumable and
``scan_func`` deterministic).

>>> Dataset.range(5).scan(0, lambda total, x: (total + x, total + x)).to_list()
[0, 1, 3, 6, 10]
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from feedline.dataset._replay import Replayer, decode_value, encode_value
from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.cardinality import cardinality
from feedline.dataset.iterator import DatasetIterator, check_state

__all__ = ["ScanDataset"]


class ScanDataset(Dataset):
    """Outputs of ``scan_func`` carried through the parent's items; see the module
    docstring.

    Args:
        parent: the dataset read.
        initial_state: the state passed with the first item.
        scan_func: called as ``scan_func(state, item)``; returns ``(new_state, output)``.

    >>> ds = Dataset.from_iterable(["a", "b", "c"]).scan("", lambda s, c: (s + c, s + c))
    >>> type(ds).__name__, ds.to_list()
    ('ScanDataset', ['a', 'ab', 'abc'])
    """

    def __init__(self, parent: Dataset, initial_state: Any,
                 scan_func: Callable[[Any, Any], tuple[Any, Any]]) -> None:
        super().__init__()
        self._parents = (parent,)
        self._initial = initial_state
        self._fn = scan_func

    @property
    def name(self) -> str:
        return f"scan({getattr(self._fn, '__name__', 'scan_func')})"

    def _cardinality(self) -> int:
        return cardinality(self._parents[0])

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return _ScanIterator(self, self._parents[0]._build(ctx))


class _ScanIterator(DatasetIterator):
    def __init__(self, owner: ScanDataset, parent: DatasetIterator) -> None:
        self._fn = owner._fn
        self._initial = owner._initial
        self._state = owner._initial
        self._rp = Replayer(parent, every=sys.maxsize, oldest=lambda: 0)

    def __next__(self) -> Any:
        result = self._fn(self._state, self._rp.next())
        try:
            self._state, output = result
        except (TypeError, ValueError):
            raise TypeError(f"scan_func must return (new_state, output), got "
                            f"{type(result).__name__}") from None
        return output

    def get_state(self) -> dict[str, Any]:
        try:
            saved = encode_value(self._state)
        except TypeError:
            return {"type": "scan", "input": self._rp.get_state(0), "scan_state": None,
                    "replay": True}
        return {"type": "scan", "input": self._rp.get_state(self._rp.read),
                "scan_state": saved, "replay": False}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "scan", ("input", "scan_state", "replay"))
        if not state["replay"]:
            self._state = decode_value(state["scan_state"])
            self._rp.seek(state["input"])
            return
        self._state = self._initial
        for _, item in self._rp.replay(state["input"]):
            self._state = self._fn(self._state, item)[0]

    def close(self) -> None:
        self._rp.parent.close()
