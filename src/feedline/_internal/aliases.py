"""The short public names of modules that live deeper in the tree.

``feedline.tfrecord`` is ``feedline.formats.tfrecord``: the same module object, reached
by ``import feedline.tfrecord``, ``from feedline.tfrecord import read`` or
``feedline.tfrecord`` as an attribute. :func:`install` adds a finder to ``sys.meta_path``
that answers for the names in :data:`ALIASES` only; the module keeps its real
``__name__`` and ``__spec__``.

>>> import importlib
>>> importlib.import_module("feedline.recordio").__name__
'feedline.formats.recordio'
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

__all__ = ["ALIASES", "install"]

#: short public name -> the module's real name
ALIASES = {
    f"feedline.{name}": f"feedline.formats.{name}"
    for name in (
        "tfrecord", "example", "recordio", "csv", "text", "fixed", "idx", "ndarray_file",
        "sharded", "parquet", "webdataset",
    )
}


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, real: str) -> None:
        self.real = real
        self._spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.real)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import system stamped the alias's spec on the module: give it back its own
        module.__spec__ = self._spec


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: object, target: object = None):
        real = ALIASES.get(fullname)
        if real is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(real))


def install() -> None:
    """Make the names in :data:`ALIASES` importable (idempotent)."""
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.append(_AliasFinder())
