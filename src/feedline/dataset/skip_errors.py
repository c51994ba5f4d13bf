"""Error tolerance of ``map``: ``on_error="skip"`` / ``"replace"`` and ``max_skips``.

``ds.map(fn, on_error="skip")`` runs ``fn`` through
:class:`~feedline._internal.on_error.CatchErrors` (in this thread, in ``num_workers=N`` processes or
in ``backend="thread"`` threads alike), so an element whose ``fn`` raises becomes a
:class:`~feedline._internal.on_error.Failure`; this stage, in the consumer's thread, drops it and
hands it to a :class:`~feedline._internal.on_error.SkipBudget`: the skip is counted (``skipped``,
shown by ``it.stats()``), the first five are logged with the element's position in the
map's input (its position in the output for ``ordered=False``) and the file/record the
error names, and a skip beyond ``max_skips`` raises
:class:`~feedline.exceptions.DataError`. ``KeyboardInterrupt`` and errors of the runtime
itself (a dead worker) are never skipped.

**Rank balance.** Under ``shard(..., policy="pad")`` every rank reads the same number of
elements, but skipping drops some, so one rank could end a batch short and stall
``torch.distributed``. ``on_error="replace"`` keeps the counts equal: a failed element is
replaced by ``replacement`` (a fixed, well-formed element that the loss ignores, e.g. an
image of zeros with label ``-1`` and ``CrossEntropyLoss(ignore_index=-1)``) and counted
and capped like a skip. Alternatively keep ``"skip"`` and cut every rank to a common
number of batches known in advance with ``take``.

The state is ``{"parent": the map's state, "seen": elements read from the map,
"skipped": skips so far}``, so the count and the ``max_skips`` budget carry across a
resume.

>>> import logging; logging.disable(logging.WARNING)
>>> ds = Dataset.from_iterable(["1", "x", "3"]).map(int, on_error="skip")
>>> it = ds.iterator(stats=True); list(it), it.stats().stages[-1].skipped
([1, 3], 1)
>>> from feedline import ErrorOptions
>>> Dataset.from_iterable(["1", "x"]).map(int, on_error="replace",
...                                       errors=ErrorOptions(replacement=-1)).to_list()
[1, -1]
>>> logging.disable(logging.NOTSET)
"""

from __future__ import annotations

from typing import Any

from feedline._internal.on_error import CatchErrors, Failure, SkipBudget
from feedline._internal.validate import UNSET, non_negative_int, one_of
from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.iterator import DatasetIterator, check_state

__all__ = ["MAP_POLICIES", "SkipErrorsDataset", "tolerant_map"]

MAP_POLICIES = ("raise", "skip", "replace")
"""The accepted values of ``map(..., on_error=)``."""



def tolerant_map(parent: Dataset, fn: Any, build_map: Any, *, on_error: str,
                 max_skips: int | None, replacement: Any, name: str) -> Dataset:
    """``build_map(CatchErrors(fn))`` followed by the skipping stage; with
    ``on_error="raise"`` just ``build_map(fn)``.

    Args:
        parent: the map's input (the stage is built by ``build_map``).
        fn: the mapped function.
        build_map: a function of the (wrapped) mapped function returning the map stage.
        on_error: ``"raise"``, ``"skip"`` or ``"replace"`` (else ``ValueError``).
        max_skips: raise :class:`~feedline.exceptions.DataError` once more than this many
            elements failed (an int >= 0; ``None``: no limit; with ``"raise"``:
            ``ValueError``).
        replacement: the element ``"replace"`` yields for a failed one (required by
            ``"replace"``, refused by the other policies with ``ValueError``).
        name: the stage's name in logs and statistics.

    >>> from feedline import ErrorOptions
    >>> ds = Dataset.range(3).map(lambda x: 1 // (x - 1), on_error="replace",
    ...                           errors=ErrorOptions(replacement=None))
    >>> ds.to_list()
    [-1, None, 1]
    """
    one_of("on_error", on_error, MAP_POLICIES)
    if max_skips is not None:
        non_negative_int("max_skips", max_skips)
    if on_error == "raise":
        if max_skips is not None:
            raise ValueError("`max_skips` needs on_error='skip' or 'replace'")
        if replacement is not UNSET:
            raise ValueError("`replacement` needs on_error='replace'")
        return build_map(fn)
    if on_error == "replace" and replacement is UNSET:
        raise ValueError("on_error='replace' needs a `replacement` element")
    if on_error == "skip" and replacement is not UNSET:
        raise ValueError("`replacement` needs on_error='replace'")
    return SkipErrorsDataset(build_map(CatchErrors(fn)), on_error=on_error,
                             max_skips=max_skips, replacement=replacement, name=name)


class SkipErrorsDataset(Dataset):
    """Drops (or replaces) the :class:`~feedline._internal.on_error.Failure` items of its parent;
    see the module docstring.

    Args:
        parent: the map stage whose items may be failures.
        on_error: ``"skip"`` drops a failed element, ``"replace"`` yields ``replacement``.
        max_skips: raise :class:`~feedline.exceptions.DataError` once more than this many
            elements failed (``None``: no limit).
        replacement: the element yielded for a failed one with ``"replace"``.
        name: the map's name in logs and statistics.

    >>> ds = Dataset.range(4).map(lambda x: 10 // (2 - x), on_error="skip")
    >>> type(ds).__name__, ds.to_list()
    ('SkipErrorsDataset', [5, 10, -10])
    """

    def __init__(self, parent: Dataset, *, on_error: str, max_skips: int | None,
                 replacement: Any, name: str) -> None:
        super().__init__()
        self._parents = (parent,)
        self._replace = on_error == "replace"
        self._replacement = replacement
        self._max_skips = max_skips
        self._label = name

    @property
    def name(self) -> str:
        return f"{'replace' if self._replace else 'skip'}_errors({self._label})"

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return _SkipErrorsIterator(self, self._parents[0]._build(ctx))


class _SkipErrorsIterator(DatasetIterator):
    def __init__(self, ds: SkipErrorsDataset, parent: DatasetIterator) -> None:
        self._ds = ds
        self._parent = parent
        self._budget = SkipBudget(ds._label, max_skips=ds._max_skips)
        self._seen = 0

    @property
    def skipped(self) -> int:
        """Elements skipped (or replaced) so far, those before a resume included."""
        return self._budget.count

    def __next__(self) -> Any:
        while True:
            item = next(self._parent)
            position = self._seen
            self._seen += 1
            if type(item) is not Failure:
                return item
            self._budget.skip(item, position)
            if self._ds._replace:
                return self._ds._replacement

    def get_state(self) -> dict[str, Any]:
        return {"type": "skip_errors", "parent": self._parent.get_state(),
                "seen": self._seen, "skipped": self._budget.count}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "skip_errors", ("parent", "seen", "skipped"))
        self._parent.set_state(state["parent"])
        self._seen = non_negative_int("state['seen']", state["seen"])
        self._budget.count = non_negative_int("state['skipped']", state["skipped"])

    def close(self) -> None:
        self._parent.close()
