"""Where bytes come from: file lists and byte-range splits of record files.

Names load lazily, so importing a submodule (``feedline.io.files``) does not import the
others.

>>> from feedline.io import InputSplit
>>> InputSplit.__name__
'InputSplit'
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> submodule that defines it
_EXPORTS = {
    "InputSplit": "feedline.io.input_split",
    "InputSplitIterator": "feedline.io.input_split",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'feedline.io' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
