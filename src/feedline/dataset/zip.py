"""``Dataset.zip``: tuples of one item from each dataset, ending with the shortest.

With ``strict=True`` the datasets must end together: one that ends while another still
has items raises :class:`~feedline.exceptions.ComposeNotAligned` naming which.

State: ``{"children": [state of each]}``.

>>> Dataset.range(3).zip(Dataset.from_iterable(["a", "b"])).to_list()
[(0, 'a'), (1, 'b')]
"""

from __future__ import annotations

from typing import Any

from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.concat import check_datasets
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.exceptions import ComposeNotAligned, StateError

__all__ = ["ZipDataset"]


class ZipDataset(Dataset):
    """``(a[i], b[i], ...)`` for each position present in every dataset.

    Args:
        datasets: the datasets zipped (an element that is not a :class:`Dataset` raises
            ``TypeError``).
        strict: ``True`` raises :class:`~feedline.exceptions.ComposeNotAligned` naming
            which dataset ended while another still has items; ``False`` ends with the
            shortest.

    >>> ds = Dataset.range(3).zip(Dataset.from_iterable(["a", "b"]))
    >>> type(ds).__name__, ds.to_list()
    ('ZipDataset', [(0, 'a'), (1, 'b')])
    """

    def __init__(self, datasets: tuple[Dataset, ...], *, strict: bool = False) -> None:
        super().__init__()
        self._parents = check_datasets(datasets, "zip")
        self._strict = bool(strict)

    @property
    def name(self) -> str:
        return f"zip({len(self._parents)})"

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        children = []
        try:
            for d in self._parents:
                children.append(d._build(ctx))
        except BaseException:
            for c in children:
                c.close()
            raise
        return _ZipIterator(children, self._strict)


class _ZipIterator(DatasetIterator):
    def __init__(self, children: list[DatasetIterator], strict: bool) -> None:
        self._children = children
        self._strict = strict
        self._count = 0

    def __next__(self) -> tuple:
        if not self._strict:
            return tuple([next(c) for c in self._children])
        out = []
        for i, c in enumerate(self._children):
            try:
                out.append(next(c))
            except StopIteration:
                self._check_all_ended(i)
                raise
        self._count += 1
        return tuple(out)

    def _check_all_ended(self, ended: int) -> None:
        for j, c in enumerate(self._children):
            if j == ended:
                continue
            if j < ended:
                longer = True  # it already gave an item for this position
            else:
                try:
                    next(c)
                    longer = True
                except StopIteration:
                    longer = False
            if longer:
                raise ComposeNotAligned(
                    f"input {ended} ended after {self._count} items but input {j} has more; "
                    "the inputs must have the same length"
                )

    def get_state(self) -> dict[str, Any]:
        return {"type": "zip", "children": [c.get_state() for c in self._children]}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "zip", ("children",))
        if len(state["children"]) != len(self._children):
            raise StateError(
                f"zip state has {len(state['children'])} children, this zip has {len(self._children)}"
            )
        for c, s in zip(self._children, state["children"]):
            c.set_state(s)

    def close(self) -> None:
        for c in self._children:
            c.close()
