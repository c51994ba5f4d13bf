"""The pipeline engine: :class:`Dataset` and the iterator protocol.

>>> from feedline.dataset import Dataset
>>> Dataset.range(3).to_list()
[0, 1, 2]
"""

from feedline.dataset.base import Dataset, PipelineIterator, RandomAccessDataset
from feedline.dataset.iterator import DatasetIterator

__all__ = ["Dataset", "DatasetIterator", "PipelineIterator", "RandomAccessDataset"]
