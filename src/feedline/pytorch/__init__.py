"""The PyTorch face (needs ``feedline[torch]``).

* :func:`to_torch` and :func:`converter` turn numpy arrays and the feeder's values into
  tensors (:mod:`feedline.pytorch.convert`);
* :func:`as_torch` / :meth:`feedline.Dataset.as_torch`: a pipeline as a
  ``torch.utils.data`` dataset for ``DataLoader`` and torchdata's
  ``StatefulDataLoader``, split across DataLoader workers and ``torch.distributed``
  ranks, with exact resume (:mod:`feedline.pytorch.dataset`);
* :class:`~feedline.pytorch.lightning.FeedlineDataModule`: a Lightning
  ``LightningDataModule`` over feedline pipelines (:mod:`feedline.pytorch.lightning`,
  needs ``feedline[lightning]``; imported on first use);
* :func:`~feedline.pytorch.rank_join.join`: ranks that end every epoch together under
  ``torch.distributed`` (one small all-reduce per step; ``"pad"`` or
  ``"drop_remainder"``), for a ``DataLoader`` over a stream split by rank.

>>> import numpy as np
>>> from feedline import Dataset
>>> from feedline.pytorch import as_torch, to_torch
>>> to_torch(np.arange(3)).tolist()
[0, 1, 2]
>>> [int(x) for x in as_torch(Dataset.range(3).filter(lambda x: x > 0))]
[1, 2]
"""

from __future__ import annotations

from feedline._internal.lazy import attach_stub
from feedline.pytorch.convert import PaddedSequence as PaddedSequence
from feedline.pytorch.convert import PaddedSubSequence as PaddedSubSequence
from feedline.pytorch.convert import converter as converter
from feedline.pytorch.convert import to_torch as to_torch
from feedline.pytorch.dataset import TorchIterableDataset as TorchIterableDataset
from feedline.pytorch.dataset import TorchMapDataset as TorchMapDataset
from feedline.pytorch.dataset import as_torch as as_torch

# the lazy names are declared once, in __init__.pyi (what type checkers read)
__getattr__, __dir__, _lazy = attach_stub(globals())

__all__ = list(_lazy)
