"""Lazy exports declared in a stub: a package's public names load from their submodules
on first use, so ``import feedline`` does not import torch, image libraries or every
format, while type checkers, IDEs and the API reference read the same names statically.

The package's ``__init__.pyi`` is the one list (the scientific-Python convention): each
``from feedline.x import Name as Name`` line declares a lazily loaded name, and each
``from package import sub as sub`` line a submodule reachable as an attribute.
``import`` statements of the ``.py`` file that run eagerly (``from feedline.exceptions
import *``) appear in the stub too and are not made lazy again.

>>> import types
>>> pkg = types.ModuleType("demo_pkg")
>>> pkg.__getattr__, pkg.__dir__ = lazy_exports(pkg.__dict__, {"OrderedDict": "collections"})
>>> pkg.OrderedDict.__name__, "OrderedDict" in pkg.__dict__     # cached after the first use
('OrderedDict', True)
"""

from __future__ import annotations

import ast
import importlib
import pathlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_exports", "stub_exports", "attach_stub"]


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


def stub_exports(stub: str, package: str) -> tuple[dict[str, str], list[str]]:
    """Read the text of a package's ``__init__.pyi``: ``(exports, submodules)`` where
    ``exports`` maps each name imported ``from module import name`` to its module and
    ``submodules`` lists the names imported ``from package import name`` (star imports
    are skipped: the ``.py`` runs them eagerly).

    >>> stub_exports("from feedline.dataset import Dataset as Dataset\\n"
    ...              "from feedline import reader as reader\\n", "feedline")
    ({'Dataset': 'feedline.dataset'}, ['reader'])
    """
    exports: dict[str, str] = {}
    submodules: list[str] = []
    for node in ast.parse(stub).body:
        if not isinstance(node, ast.ImportFrom) or node.level or node.module is None:
            continue
        for alias in node.names:
            name = alias.asname or alias.name
            if alias.name == "*" or name.startswith("_"):
                continue
            if node.module == package:
                submodules.append(name)
            else:
                exports[name] = node.module
    return exports, submodules


def attach_stub(
    namespace: dict[str, Any],
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, lazy names)`` for the package whose globals are
    ``namespace``, from the ``__init__.pyi`` beside its ``__init__.py`` (see
    :func:`stub_exports`); the lazy names are the exports, for ``__all__``."""
    stub = pathlib.Path(namespace["__file__"]).with_suffix(".pyi")
    exports, submodules = stub_exports(stub.read_text(encoding="utf-8"), namespace["__name__"])
    getattr_, dir_ = lazy_exports(namespace, exports, submodules=submodules)
    return getattr_, dir_, list(exports)
