"""feedline keeps a training job fed.

The public namespace is small; names load lazily so that ``import feedline`` stays fast
and does not import torch or image libraries until they are used. Every error class of
:mod:`feedline.exceptions` is importable from here too (``feedline.CorruptRecordError``).
Diagnostics go to the ``feedline`` logger hierarchy (one logger per module).

>>> import feedline
>>> feedline.Dataset.range(5).batch(2).to_list()
[[0, 1], [2, 3], [4]]
"""

from __future__ import annotations

import logging

from feedline import exceptions as _exceptions
from feedline._internal import aliases as _aliases
from feedline._internal.lazy import lazy_exports as _lazy_exports
from feedline.exceptions import *  # noqa: F403 - every error class at the top level

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    "Dataset": "feedline.dataset",
    "DatasetIterator": "feedline.dataset",
    "batch": "feedline.reader",
    "DataFeeder": "feedline.feeder",
    "to_torch": "feedline.pytorch.convert",
    "SequenceToBatch": "feedline.sequence",
    "files": "feedline.io.files",
    "split": "feedline.io.split",
}

__all__ = ["__version__", *_EXPORTS, *_exceptions.__all__]


#: submodules reachable as attributes (``feedline.data_type.dense_vector(3)``)
_SUBMODULES = {
    "data_type", "reader", "tfrecord", "example", "recordio", "csv", "text", "fixed", "idx",
    "ndarray_file", "sharded", "io", "image", "feeder", "sequence", "dataset", "runtime",
    "train", "storage", "formats", "pytorch", "exceptions", "parquet", "webdataset",
}

_aliases.install()

# diagnostics go to the "feedline" logger hierarchy; the application decides where
logging.getLogger("feedline").addHandler(logging.NullHandler())


__getattr__, __dir__ = _lazy_exports(globals(), _EXPORTS, submodules=_SUBMODULES)
