"""feedline keeps a training job fed.

The public namespace is small; names load lazily so that ``import feedline`` stays fast
and does not import torch or image libraries until they are used.

>>> import feedline
>>> feedline.Dataset.range(5).batch(2).to_list()
[[0, 1], [2, 3], [4]]
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    "Dataset": "feedline.dataset",
    "DatasetIterator": "feedline.dataset",
    "batch": "feedline.reader",
    "DataFeeder": "feedline.feeder",
    "to_torch": "feedline.to_torch",
    "SequenceToBatch": "feedline.sequence",
    "files": "feedline.io.files",
    "split": "feedline.io.split",
}

__all__ = ["__version__", *_EXPORTS]


#: submodules reachable as attributes (``feedline.data_type.dense_vector(3)``)
_SUBMODULES = {
    "data_type", "reader", "tfrecord", "example", "recordio", "csv", "text", "fixed", "idx",
    "sharded", "io", "image", "feeder", "sequence", "dataset", "runtime", "train",
}


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        module = importlib.import_module(f"feedline.{name}")
        globals()[name] = module
        return module
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'feedline' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*__all__, *_SUBMODULES])
