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
from feedline._internal.lazy import attach_stub as _attach_stub
from feedline.exceptions import *  # noqa: F403 - every error class at the top level

__version__ = "0.1.0"

# the lazy names and submodules are declared once, in __init__.pyi (what type checkers read)
__getattr__, __dir__, _lazy = _attach_stub(globals())

__all__ = ["__version__", *_lazy, *_exceptions.__all__]

# diagnostics go to the "feedline" logger hierarchy; the application decides where
logging.getLogger("feedline").addHandler(logging.NullHandler())
