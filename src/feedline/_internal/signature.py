"""One parameter list for a function that only constructs a class: the function is
declared to take exactly the class's arguments, so the options are written once (on
the class) and still checked by type checkers and shown by ``help()`` and IDEs.

>>> class Reader:
...     def __init__(self, path: str, *, size: int = 1) -> None:
...         self.path, self.size = path, size
>>> @takes_arguments_of(Reader)
... def open_reader(*args, **kwargs) -> Reader:
...     return Reader(*args, **kwargs)
>>> import inspect
>>> list(inspect.signature(open_reader).parameters), open_reader("x", size=2).size
(['path', 'size'], 2)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

__all__ = ["takes_arguments_of"]

P = ParamSpec("P")
R = TypeVar("R")


def takes_arguments_of(target: Callable[P, Any]) -> Callable[[Callable[..., R]], Callable[P, R]]:
    """Declare that the decorated function takes exactly ``target``'s parameters (a
    class: its constructor's): for type checkers through ``ParamSpec``, at run time
    through ``__signature__`` (with the function's own return annotation)."""

    def declare(fn: Callable[..., R]) -> Callable[P, R]:
        returns = inspect.signature(fn).return_annotation
        fn.__signature__ = inspect.signature(target).replace(  # type: ignore[attr-defined]
            return_annotation=returns)
        return fn

    return declare
