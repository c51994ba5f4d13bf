"""The PyTorch face (needs ``feedline[torch]``).

* :func:`to_torch` and :func:`converter` turn numpy arrays and the feeder's values into
  tensors (:mod:`feedline.pytorch.convert`);
* :func:`as_torch` / :meth:`feedline.Dataset.as_torch`: a pipeline as a
  ``torch.utils.data`` dataset for ``DataLoader`` and torchdata's
  ``StatefulDataLoader``, split across DataLoader workers and ``torch.distributed``
  ranks, with exact resume (:mod:`feedline.pytorch.dataset`);
* :class:`~feedline.pytorch.lightning.FeedlineDataModule`: a Lightning
  ``LightningDataModule`` over feedline pipelines (:mod:`feedline.pytorch.lightning`,
  needs ``feedline[lightning]``; imported on first use).

>>> import numpy as np
>>> from feedline import Dataset
>>> from feedline.pytorch import as_torch, to_torch
>>> to_torch(np.arange(3)).tolist()
[0, 1, 2]
>>> [int(x) for x in as_torch(Dataset.range(3).filter(lambda x: x > 0))]
[1, 2]
"""

from __future__ import annotations

from feedline._internal.lazy import lazy_exports
from feedline.pytorch.convert import PaddedSequence, PaddedSubSequence, converter, to_torch
from feedline.pytorch.dataset import TorchIterableDataset, TorchMapDataset, as_torch

__all__ = [
    "to_torch", "converter", "PaddedSequence", "PaddedSubSequence",
    "as_torch", "TorchMapDataset", "TorchIterableDataset", "FeedlineDataModule",
]

__getattr__, __dir__ = lazy_exports(
    globals(), {"FeedlineDataModule": "feedline.pytorch.lightning"}
)
