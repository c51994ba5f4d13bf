"""Option groups: small frozen dataclasses of options that travel together, and the
deprecated flat keywords they replace.

A function that groups options keeps, for one release, the old flat keywords with the
default :data:`~feedline._internal.validate.UNSET` (so "not passed" differs from every
value, ``None`` included) and folds them into the group with :func:`regroup`: each old
keyword passed issues a ``DeprecationWarning`` naming the new spelling; the same option
given both ways with different values is a ``TypeError``.

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True, kw_only=True)
... class Limits:
...     size: int | None = None
>>> regroup("limits", Limits, Limits(size=3), {"size": UNSET})
Limits(size=3)
>>> import warnings
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     regroup("limits", Limits, None, {"size": 5}), str(caught[0].message)
(Limits(size=5), '`size` is deprecated, use `limits=Limits(size=...)`')
>>> regroup("limits", Limits, Limits(size=3), {"size": 5})
Traceback (most recent call last):
...
TypeError: `size` and `limits.size` are one option given twice with different values (5, 3): pass `limits=Limits(size=...)` only
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from typing import Any, TypeVar

from feedline._internal.validate import UNSET

__all__ = ["regroup", "check_group"]

G = TypeVar("G")


def _default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def check_group(name: str, cls: type[G], value: Any) -> G | None:
    """``value`` if it is ``None`` or a ``cls``, else ``TypeError`` naming ``name``.

    >>> check_group("limits", dict, {})
    {}
    >>> check_group("limits", dict, 3)
    Traceback (most recent call last):
    ...
    TypeError: `limits` must be a dict or None, got 3
    """
    if value is not None and not isinstance(value, cls):
        article = "an" if cls.__name__[0] in "AEIOU" else "a"
        raise TypeError(f"`{name}` must be {article} {cls.__name__} or None, got {value!r}")
    return value


def regroup(param: str, cls: type[G], group: G | None, old: Mapping[str, Any], *,
            fields: Mapping[str, str] | None = None, stacklevel: int = 3) -> G:
    """The option group ``param`` (a ``cls`` or ``None``: the defaults) with the deprecated
    flat keywords of ``old`` (name -> value, :data:`~feedline._internal.validate.UNSET`
    when not passed) folded in.

    Args:
        param: the group's parameter name, as the caller's signature spells it.
        cls: the group's dataclass.
        group: the group the caller passed, or ``None``.
        old: each deprecated keyword's name and value
            (:data:`~feedline._internal.validate.UNSET`: not passed).
        fields: the field of ``cls`` an old keyword sets, where the names differ
            (``{"ray_options": "ray"}``); by default the field of the same name.
        stacklevel: the warning's stack level, counted from this function (3: the
            caller of the function that calls this one).

    A passed old keyword issues a ``DeprecationWarning`` (after the group validated its
    value: a bad value raises the group's error first); it conflicts (``TypeError``) with
    a group whose field holds another value than its default and the keyword's.
    """
    check_group(param, cls, group)
    fields = fields or {}
    defaults = {f.name: _default(f) for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    changes: dict[str, Any] = {}
    notes: list[str] = []
    for name, value in old.items():
        if value is UNSET:
            continue
        field = fields.get(name, name)
        spelling = f"`{param}={cls.__name__}({field}=...)`"
        if group is not None:
            current = getattr(group, field)
            if current != defaults[field] and current != value:
                raise TypeError(
                    f"`{name}` and `{param}.{field}` are one option given twice with different "
                    f"values ({value!r}, {current!r}): pass {spelling} only")
        notes.append(f"`{name}` is deprecated, use {spelling}")
        changes[field] = value
    if group is None:
        group = cls(**changes)
    elif changes:
        group = dataclasses.replace(group, **changes)  # type: ignore[type-var]
    for note in notes:  # after the group validated the values: a bad value is an error first
        warnings.warn(note, DeprecationWarning, stacklevel=stacklevel)
    return group
