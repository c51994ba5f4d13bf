"""mkdocs hook: show the docstrings' doctest examples (``>>>`` blocks) as code.

The docstrings are written for ``pytest --doctest-modules``: an example is a run of
lines starting with ``>>>`` (continued by ``...`` and followed by the expected output)
up to a blank line. Markdown would read ``>`` as a quote, so this hook adds a Markdown
preprocessor that fences every such run as ``pycon`` code, and shows Sphinx roles such as
``:class:`~feedline.x.Y``` as code spans. It is registered before the plugins, so
mkdocstrings renders docstrings with it.
"""

from __future__ import annotations

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
