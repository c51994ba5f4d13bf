"""``Dataset.prefetch``: run the pipeline ahead of its consumer in a background thread.

Up to ``buffer_size`` items wait in a bounded queue; see
:class:`feedline.runtime.threads.BackgroundIterator` for error propagation, shutdown
and state semantics (the state is the position after the last item received).
``buffer_size="auto"`` starts with a depth of 2, times the first 16 items on both
sides (producer in its thread, consumer between calls), then sets the depth with
:func:`feedline.runtime.autotune.choose_prefetch_depth`: enough ready items to cover
the slowest item seen, at least 2 and at most 64.

>>> Dataset.range(4).prefetch(2).to_list()
[0, 1, 2, 3]
"""

from __future__ import annotations

from feedline._internal.validate import positive_int
from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.iterator import DatasetIterator
from feedline.runtime.threads import BackgroundIterator

__all__ = ["PrefetchDataset"]

_AUTO_START = 2


class PrefetchDataset(Dataset):
    """The parent, produced ahead in a background thread.

    Args:
        parent: the dataset read.
        buffer_size: the most items produced ahead (a positive int, else
            ``ValueError``/``TypeError``), or ``"auto"``: a depth from 2 to 64 set by
            timing the first 16 items.

    >>> ds = Dataset.range(3).prefetch(2)              # read ahead in a background thread
    >>> type(ds).__name__, ds.to_list()
    ('PrefetchDataset', [0, 1, 2])
    """

    def __init__(self, parent: Dataset, buffer_size: int | str) -> None:
        super().__init__()
        self._parents = (parent,)
        if buffer_size == "auto":
            self._size = _AUTO_START
        else:
            self._size = positive_int("buffer_size", buffer_size)
        self._auto = buffer_size == "auto"

    @property
    def name(self) -> str:
        return f"prefetch({'auto' if self._auto else self._size})"

    @property
    def buffer_size(self) -> int | str:
        """The depth given: an int, or ``"auto"``."""
        return "auto" if self._auto else self._size

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return BackgroundIterator(self._parents[0]._build(ctx), buffer_size=self._size,
                                  name=self.name, auto=self._auto)
