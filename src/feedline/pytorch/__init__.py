"""feedline inside the PyTorch ecosystem (needs ``feedline[torch]``).

* :func:`as_torch` / :meth:`feedline.Dataset.as_torch`: a pipeline as a
  ``torch.utils.data`` dataset for ``DataLoader`` and torchdata's
  ``StatefulDataLoader``, split across DataLoader workers and ``torch.distributed``
  ranks, with exact resume (:mod:`feedline.pytorch.dataset`);
* :class:`~feedline.pytorch.lightning.FeedlineDataModule`: a Lightning
  ``LightningDataModule`` over feedline pipelines (:mod:`feedline.pytorch.lightning`,
  needs ``feedline[lightning]``; imported on first use).

>>> from feedline import Dataset
>>> from feedline.pytorch import as_torch
>>> [int(x) for x in as_torch(Dataset.range(3).filter(lambda x: x > 0))]
[1, 2]
"""

from __future__ import annotations

from typing import Any

from feedline.pytorch.dataset import TorchIterableDataset, TorchMapDataset, as_torch

__all__ = ["as_torch", "TorchMapDataset", "TorchIterableDataset", "FeedlineDataModule"]


def __getattr__(name: str) -> Any:
    if name == "FeedlineDataModule":
        from feedline.pytorch.lightning import FeedlineDataModule

        return FeedlineDataModule
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
