# The public names of ``feedline.pytorch`` as type checkers, IDEs and the API reference
# see them; names not imported by __init__.py load on first use (feedline._internal.lazy).
from feedline.pytorch.convert import PaddedSequence as PaddedSequence
from feedline.pytorch.convert import PaddedSubSequence as PaddedSubSequence
from feedline.pytorch.convert import converter as converter
from feedline.pytorch.convert import to_torch as to_torch
from feedline.pytorch.dataset import TorchIterableDataset as TorchIterableDataset
from feedline.pytorch.dataset import TorchMapDataset as TorchMapDataset
from feedline.pytorch.dataset import as_torch as as_torch
from feedline.pytorch.lightning import FeedlineDataModule as FeedlineDataModule
from feedline.pytorch.rank_join import join as join

__all__: list[str]
