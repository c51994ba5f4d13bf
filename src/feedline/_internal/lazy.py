"""Lazy exports: a package's public names load from their submodules on first use, so
``import feedline`` does not import torch, image libraries or every format.

>>> import types
>>> pkg = types.ModuleType("demo_pkg")
>>> pkg.__getattr__, pkg.__dir__ = lazy_exports(pkg.__dict__, {"OrderedDict": "collections"})
>>> pkg.OrderedDict.__name__, "OrderedDict" in pkg.__dict__     # cached after the first use
('OrderedDict', True)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    namespace: dict[str, Any], exports: Mapping[str, str], *, submodules: Iterable[str] = ()
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return the ``__getattr__`` and ``__dir__`` of a package whose globals are
    ``namespace``: ``exports`` maps a public name to the module defining it (the value is
    imported on first access, then cached in ``namespace``), and each name in
    ``submodules`` is a submodule of the package reachable as an attribute."""
    package = namespace["__name__"]
    subs = frozenset(submodules)

    def __getattr__(name: str) -> Any:
        if name in subs:
            value = importlib.import_module(f"{package}.{name}")
        else:
            home = exports.get(name)
            if home is None:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            value = getattr(importlib.import_module(home), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace.get("__all__", ())) | set(exports) | subs)

    return __getattr__, __dir__
