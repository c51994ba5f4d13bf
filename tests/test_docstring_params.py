"""One docstring style, rendered as parameter tables: every public function, class and
public method that takes parameters documents each of them in a Google-style ``Args:``
section (the style the site's mkdocstrings is set to), and documents no parameter it
does not take.

Public, here: every name in the ``__all__`` of a public module (the modules the
reference renders, as ``tests/test_docs_inventory.py`` finds them) that feedline itself
defines, and the public methods such a class defines itself. ``self``/``cls``,
``*args``/``**kwargs`` catch-alls and deprecated options (accepted for one release,
documented in their ``Deprecated:`` note instead) need no row. A class documents its
constructor's parameters in the class docstring (or in ``__init__``'s).
"""

from __future__ import annotations

import importlib
import inspect
import re

from test_docs_inventory import _foreign, public_modules

#: parameters that are deprecated spellings, accepted for one release (a parameter counts as
#: one only when its default is the "not given" marker ``UNSET`` as well)
DEPRECATED = {"workers", "drop_last_deprecated",
              # flat keywords that option groups replaced (feedline._internal.option_groups)
              "buffer_size", "max_skips", "replacement", "timeout", "ray_options", "resize",
              "center_crop", "encoding", "quality", "color", "pass_through", "restart_markers",
              "pack_label", "exts", "allow_outside_root", "image_mode"}

_SECTION = re.compile(r"^(\s*)(Args|Arguments|Parameters):\s*$", re.M)


def documented_params(doc: str) -> set[str] | None:
    """Names in the docstring's ``Args:`` section, or ``None`` when there is none."""
    match = _SECTION.search(doc)
    if match is None:
        return None
    indent = len(match.group(1))
    names: set[str] = set()
    item_indent = None
    for line in doc[match.end():].splitlines()[1:] if doc[match.end():].startswith("\n") \
            else doc[match.end():].splitlines():
        if not line.strip():
            continue
        lead = len(line) - len(line.lstrip())
        if lead <= indent:
            break  # the next section or prose
        if item_indent is None:
            item_indent = lead
        if lead == item_indent:
            m = re.match(r"\s*\**([A-Za-z_]\w*)\s*(\([^)]*\))?\s*:", line)
            if m:
                names.add(m.group(1))
    return names


def _signature(fn) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _params(fn) -> list[str] | None:
    """The parameters that need a row: not ``self``/``cls``, not ``*args``/``**kwargs``,
    not a deprecated spelling."""
    from feedline._internal.validate import UNSET

    sig = _signature(fn)
    if sig is None:
        return None
    names = []
    for p in sig.parameters.values():
        if p.name in ("self", "cls") or (p.name in DEPRECATED and p.default is UNSET):
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        names.append(p.name)
    return names


def _allowed_rows(fn) -> set[str]:
    """Rows a docstring may have beyond the parameters: ``*args``/``**kwargs`` and
    deprecated spellings."""
    sig = _signature(fn)
    allowed = set(DEPRECATED)
    if sig is not None:
        allowed.update(p.name for p in sig.parameters.values()
                       if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD))
    return allowed


def _own(obj) -> bool:
    return str(getattr(obj, "__module__", "") or "").startswith("feedline")


def _callables():
    """``(qualified name, callable, docstring)`` for every public callable to check."""
    seen: set[int] = set()
    for module_name in public_modules():
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if _foreign(obj) or id(obj) in seen or not _own(obj):
                continue
            seen.add(id(obj))
            if inspect.isfunction(obj):
                yield f"{obj.__module__}.{obj.__qualname__}", obj, inspect.getdoc(obj) or ""
            elif inspect.isclass(obj):
                if issubclass(obj, BaseException):
                    continue
                qual = f"{obj.__module__}.{obj.__qualname__}"
                init = obj.__dict__.get("__init__")
                if init is not None and inspect.isfunction(init):
                    doc = (inspect.getdoc(obj) or "") + "\n\n" + (init.__doc__ and inspect.cleandoc(init.__doc__) or "")
                    yield qual, init, doc
                for attr, member in vars(obj).items():
                    if attr.startswith("_"):
                        continue
                    if isinstance(member, (staticmethod, classmethod)):
                        member = member.__func__
                    if inspect.isfunction(member):
                        yield f"{qual}.{attr}", member, inspect.getdoc(member) or ""


def undocumented() -> dict[str, str]:
    problems = {}
    for qual, fn, doc in _callables():
        params = _params(fn)
        if not params:
            continue
        rows = documented_params(doc)
        if rows is None:
            problems[qual] = f"no Args: section for {params}"
            continue
        missing = [p for p in params if p not in rows]
        extra = sorted(rows - set(params) - _allowed_rows(fn))
        if missing or extra:
            problems[qual] = f"missing {missing}, not parameters {extra}"
    return problems


def test_documented_params_reads_google_sections():
    doc = inspect.cleandoc("""Summary.

        Args:
            path: where.
            batch_size (int): how many,
                continued.
            **kwargs: the rest.

        Returns:
            something.
        """)
    assert documented_params(doc) == {"path", "batch_size", "kwargs"}
    assert documented_params("No section.") is None


def test_every_public_parameter_has_a_row():
    problems = undocumented()
    assert not problems, "\n".join(f"{k}: {v}" for k, v in sorted(problems.items()))
