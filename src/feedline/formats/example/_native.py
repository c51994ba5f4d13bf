"""The optional C accelerator of this package, ``feedline.formats.example._wire``.

:func:`extension` returns the configured extension module, or ``None`` where the install
did not build it (``setup.py`` marks it optional). Each of its functions either returns
exactly what the pure-Python path (:mod:`.wire`, :mod:`.codec`, :mod:`.parse`) returns,
or ``None``, meaning "run the Python path": on damaged bytes, on records written in a way
the C decoder leaves to Python, on values the C encoder does not know. Errors are
therefore always the Python path's. Tests force the Python path by replacing
:func:`extension` with a function returning ``None``.

>>> ext = extension()
>>> ext is None or ext.decode_example(b"\\x0a\\x00") == {}
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from feedline._internal.optional import compiled

__all__ = ["extension", "provide"]

_MODULE = "feedline.formats.example._wire"
_UNSET: Any = object()
_configured: Any = _UNSET
_python_side: dict[str, Any] = {}


def provide(bytes_list: type, feature_bytes: Callable[[str, Any, Any], bytes]) -> None:
    """Called by :mod:`.codec` at import: the ``BytesList`` class and the Python encoder
    of one feature, ``feature_bytes(name, value, packed) -> bytes``, which the C encoder
    calls for the values it leaves to Python."""
    _python_side.update(bytes_list=bytes_list, feature_bytes=feature_bytes)


def _configure() -> Any:
    global _configured
    module = compiled(_MODULE)
    if module is not None:
        module.configure(
            np.frombuffer,
            np.dtype(np.int64),
            np.dtype(np.float32),
            _python_side["bytes_list"],
            np.ndarray,
            _python_side["feature_bytes"],
        )
    _configured = module
    return module


def extension() -> Any:
    """The configured C extension, or ``None`` when it was not built (looked up once)."""
    module = _configured
    return _configure() if module is _UNSET else module
