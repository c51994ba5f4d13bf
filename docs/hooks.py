"""mkdocs hooks: reference pages that follow ``__all__``, and doctest examples shown as code.

**Reference pages.** A line ``::: feedline.x`` of a page under ``reference/`` (with no
options of its own) renders exactly the names of ``feedline.x.__all__``, read from the
module at build time: ``members: [...]`` is added for mkdocstrings. Names a package
exports lazily or re-exports from its submodules are rendered like its own, so the
reference cannot drift from what ``from feedline.x import *`` and type checkers see.

The docstrings are written for ``pytest --doctest-modules``: an example is a run of
lines starting with ``>>>`` (continued by ``...`` and followed by the expected output)
up to a blank line. Markdown would read ``>`` as a quote, so this hook adds a Markdown
preprocessor that fences every such run as ``pycon`` code, and shows Sphinx roles such as
``:class:`~feedline.x.Y``` as code spans. It is registered before the plugins, so
mkdocstrings renders docstrings with it.
"""

from __future__ import annotations

import importlib
import re

from markdown import Extension
from markdown.preprocessors import Preprocessor
from mkdocs.plugins import event_priority

_START = re.compile(r"^(\s*)>>>( |$)")
_FENCE = re.compile(r"^\s*(```|~~~)")
_ROLE = re.compile(r":(?:class|func|mod|meth|attr|exc|data|obj):`(~?)([^`]+)`")


def _role(match: re.Match) -> str:
    """Sphinx roles (``:class:`~feedline.x.Y```) become code spans (`` `Y` ``)."""
    target = match.group(2)
    return f"`{target.rsplit('.', 1)[-1] if match.group(1) else target}`"


class _DoctestFence(Preprocessor):
    def run(self, lines: list[str]) -> list[str]:
        out: list[str] = []
        in_fence = False
        i = 0
        while i < len(lines):
            line = lines[i]
            if _FENCE.match(line):
                in_fence = not in_fence
            match = None if in_fence else _START.match(line)
            if match is None:
                out.append(line if in_fence else _ROLE.sub(_role, line))
                i += 1
                continue
            indent = match.group(1)
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i])
                i += 1
            if out and out[-1].strip():
                out.append("")
            out.append(f"{indent}```pycon")
            out.extend(block)
            out.append(f"{indent}```")
            out.append("")
        return out


class DoctestFenceExtension(Extension):
    def extendMarkdown(self, md):  # noqa: N802 - Markdown's API
        md.preprocessors.register(_DoctestFence(md), "feedline_doctest_fence", 40)


@event_priority(100)
def on_config(config):
    config["markdown_extensions"].append(DoctestFenceExtension())
    return config


_DIRECTIVE = re.compile(r"^::: (feedline[\w.]*)[ \t]*$")


def members_of(module_name: str) -> list[str] | None:
    """The names of ``module_name.__all__`` (``None``: no ``__all__``, or the path names an
    object, not a module)."""
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            return None  # ``feedline.x.name``: an object, rendered as it is
        raise
    names = getattr(module, "__all__", None)
    return None if names is None else [str(n) for n in names]


def expand_directives(markdown: str) -> str:
    """Give every option-less ``::: feedline.x`` line the members of ``feedline.x.__all__``."""
    lines = markdown.split("\n")
    out: list[str] = []
    for i, line in enumerate(lines):
        out.append(line)
        match = _DIRECTIVE.match(line)
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if match is None or following.startswith(" "):
            continue
        names = members_of(match.group(1))
        if names is None:
            continue
        out.append("    options:")
        out.append("      members:")
        out.extend(f"        - {name}" for name in names)
    return "\n".join(out)


_ALL_MODULES = "<!-- every other public module -->"


def other_modules(docs_dir: str) -> list[str]:
    """Every public module of feedline (no ``_`` in its dotted path) with an ``__all__``
    that no reference page renders with a ``:::`` line of its own."""
    import pathlib
    import pkgutil

    import feedline

    rendered = set()
    for page in pathlib.Path(docs_dir, "reference").glob("*.md"):
        rendered.update(re.findall(r"^::: (feedline[\w.]*)", page.read_text(encoding="utf-8"), re.M))
    names = []
    for info in pkgutil.walk_packages(feedline.__path__, "feedline."):
        if any(part.startswith("_") for part in info.name.split(".")[1:]) or info.name in rendered:
            continue
        if members_of(info.name):
            names.append(info.name)
    return sorted(names)


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri.startswith("reference/"):
        if _ALL_MODULES in markdown:
            directives = "\n\n".join(f"::: {name}" for name in other_modules(config["docs_dir"]))
            markdown = markdown.replace(_ALL_MODULES, directives)
        return expand_directives(markdown)
    return markdown
