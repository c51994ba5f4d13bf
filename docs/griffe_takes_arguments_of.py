"""A griffe extension for the reference: a function decorated with
``@takes_arguments_of(SomeClass)`` (``feedline._internal.signature``) takes exactly
``SomeClass``'s constructor parameters, which it declares at run time through
``__signature__``. Read statically, its signature is ``(*args, **kwargs)``, so the
reference would show that and reject the ``Args:`` rows of the real parameters; this
extension gives such a function the class's ``__init__`` parameters (``self`` left out)
when the class is defined in the same module (its ``__init__`` its own or inherited), as it
is for ``read_csv``, ``read_lines`` and ``read_fixed``.
"""

from __future__ import annotations

import ast
from typing import Any

from griffe import Extension, Function, Parameters

_DECORATOR = "takes_arguments_of"


class TakesArgumentsOf(Extension):
    """Copy the target class's constructor parameters onto the decorated function."""

    def on_function_instance(self, *, node: ast.AST | Any, func: Function, **kwargs: Any) -> None:
        for decorator in func.decorators:
            text = str(decorator.value)
            name, _, rest = text.partition("(")
            if name.rsplit(".", 1)[-1] != _DECORATOR or not rest.endswith(")"):
                continue
            target = func.parent.members.get(rest[:-1].strip()) if func.parent else None
            init = _constructor(target) if target is not None else None
            if init is None:
                continue
            func.parameters = Parameters(*[p for p in init.parameters if p.name != "self"])


def _constructor(cls: Any) -> Function | None:
    """``cls.__init__``: its own, else the first one found in its bases that are defined
    in the same module (depth first, in the order the bases are listed)."""
    init = cls.members.get("__init__")
    if isinstance(init, Function):
        return init
    for base in getattr(cls, "bases", ()):
        parent = cls.parent.members.get(str(base).split("[", 1)[0]) if cls.parent else None
        if parent is not None and parent is not cls and getattr(parent, "is_class", False):
            found = _constructor(parent)
            if found is not None:
                return found
    return None
