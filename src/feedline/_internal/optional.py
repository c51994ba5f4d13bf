"""Import optional dependencies with an error that names the extra to install.

>>> np = require("numpy", extra="core")
>>> require("no_such_module_xyz", extra="image")
Traceback (most recent call last):
...
ImportError: no_such_module_xyz is needed for this feature: pip install 'feedline[image]'
"""

from __future__ import annotations

import functools
import importlib
import sys
from types import ModuleType

__all__ = ["require", "compiled"]


def require(module: str, *, extra: str) -> ModuleType:
    """Import ``module`` or raise ``ImportError`` naming ``pip install 'feedline[extra]'``.

    A module already imported is returned from ``sys.modules`` at once (hot paths call
    this per batch).
    """
    loaded = sys.modules.get(module)
    # a module another thread is still importing is in sys.modules half-initialised:
    # import_module then waits for that import to finish
    if loaded is not None and not getattr(getattr(loaded, "__spec__", None), "_initializing", False):
        return loaded
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        raise ImportError(
            f"{top} is needed for this feature: pip install 'feedline[{extra}]'"
        ) from exc


@functools.cache
def compiled(module: str) -> ModuleType | None:
    """The optional C extension ``module``, or ``None`` where the install did not build it
    (no compiler or headers: ``setup.py`` marks every extension optional). Looked up once.

    >>> compiled("feedline.no_such_extension") is None
    True
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        return None
