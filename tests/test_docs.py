"""Every ```python block of the documentation site (docs/**/*.md) and of README.md runs as
written, with only the extras it names.

A block names what it needs in its first line, the way a reader would install it::

    # pip install 'feedline[torch,lightning]'

and runs in a fresh interpreter in which the packages of every *other* extra of
``pyproject.toml`` cannot be imported (they look uninstalled: ``import`` fails and
``importlib.util.find_spec`` returns ``None``); a block without that line runs with the
core dependencies alone. So an example that quietly needs ``lightning`` or ``pyarrow``
fails here instead of on a reader's machine. Blocks that open files the reader brings
(``"data/...``) are not run, nor blocks whose first line says why they cannot run in a
test (``# not run: needs a Ray cluster``). The blocks that name the same extras run in one interpreter,
each in a namespace of its own.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = None  # type: ignore[assignment]

PAGES = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
_EXTRAS_LINE = re.compile(r"^#\s*pip install\s+['\"]?feedline\[([\w,\s-]+)\]")

def _blocks():
    out = []
    for path in PAGES:
        text = path.read_text(encoding="utf-8")
        for i, code in enumerate(re.findall(r"```python\n(.*?)```", text, re.S)):
            match = _EXTRAS_LINE.match(code)
            extras = tuple(sorted(e.strip() for e in match.group(1).split(","))) if match else ()
            out.append((f"{path.relative_to(ROOT)} block {i}", code, extras))
    return out


BLOCKS = _blocks()
#: a block that cannot run in a test says why in its first line: ``# not run: needs a cluster``
_NOT_RUN = re.compile(r"^#\s*not run:\s*\S")
RUNNABLE = [b for b in BLOCKS if '"data/' not in b[1] and not _NOT_RUN.match(b[1])]


def _project() -> dict:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    if tomllib is not None:
        return tomllib.loads(text)["project"]
    project = {"optional-dependencies": {}}  # Python 3.10: the two lists this test reads
    section = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    for name, body in re.findall(r"^(\w+)\s*=\s*\[(.*?)\]", section, re.S | re.M):
        project["optional-dependencies"][name] = re.findall(r'"([^"]+)"', body)
    deps = re.search(r"^dependencies\s*=\s*\[(.*?)\]", text, re.S | re.M)
    project["dependencies"] = re.findall(r'"([^"]+)"', deps.group(1)) if deps else []
    return project


def _name(requirement: str) -> tuple[str, list[str]]:
    """``("pytorch-lightning", ["extra"])`` from ``"pytorch_lightning[extra]>=2"``."""
    match = re.match(r"\s*([A-Za-z0-9_.-]+)\s*(?:\[([^\]]*)\])?", requirement)
    extras = [e.strip() for e in (match.group(2) or "").split(",") if e.strip()]
    return re.sub(r"[-_.]+", "-", match.group(1).lower()), extras


def _closure(requirements) -> set[str]:
    """The installed distributions ``requirements`` pull in, their own requirements (and
    those of the extras they ask for) included."""
    import importlib.metadata as metadata

    seen: set[tuple[str, str]] = set()
    dists: set[str] = set()
    todo = [_name(r) for r in requirements]
    while todo:
        dist, extras = todo.pop()
        for extra in [""] + extras:
            if (dist, extra) in seen:
                continue
            seen.add((dist, extra))
            dists.add(dist)
            try:
                requires = metadata.requires(dist) or []
            except metadata.PackageNotFoundError:
                continue
            for req in requires:
                marker = req.partition(";")[2]
                wanted = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
                if (wanted.group(1) if wanted else "") == extra:
                    todo.append(_name(req.partition(";")[0]))
    return dists


_CACHE: dict = {}


def blocked_packages(extras: tuple[str, ...]) -> list[str]:
    """The top-level packages a block naming ``extras`` must run without: those that only
    the distributions of feedline's other extras provide (not the core dependencies, not
    what the named extras pull in)."""
    import importlib.metadata as metadata

    project = _project()
    table = project["optional-dependencies"]
    for extra in extras:
        if extra not in table:
            raise ValueError(f"unknown extra {extra!r}; pyproject.toml has {sorted(table)}")
    if "providers" not in _CACHE:
        _CACHE["providers"] = metadata.packages_distributions()
    user = [r for k, v in table.items() if k not in ("test", "all", "docs") for r in v]
    allowed = _closure(list(project.get("dependencies", [])) +
                       [r for e in extras for r in table[e]])
    blocked = _closure(user) - allowed
    return sorted(
        package for package, dists in _CACHE["providers"].items()
        if dists and all(_name(d)[0] in blocked for d in dists) and not package.startswith("_")
    )


def blocked_distributions(extras: tuple[str, ...]) -> list[str]:
    """The distributions whose metadata a block naming ``extras`` must not see either
    (``importlib.metadata.version("matplotlib")`` fails as if it were not installed)."""
    project = _project()
    table = project["optional-dependencies"]
    user = [r for k, v in table.items() if k not in ("test", "all", "docs") for r in v]
    allowed = _closure(list(project.get("dependencies", [])) +
                       [r for e in extras for r in table[e]])
    return sorted(_closure(user) - allowed)


_RUNNER = textwrap.dedent('''
    import importlib.machinery, json, re, sys, traceback
    BLOCKED, BLOCKED_DISTS = (set(x) for x in json.loads(sys.argv[1]))

    class _WithoutExtras(importlib.machinery.PathFinder):
        """PathFinder that does not see the packages (nor the metadata) of the extras a
        block did not name."""
        @classmethod
        def find_spec(cls, name, path=None, target=None):
            if name.partition(".")[0] in BLOCKED:
                return None
            return super().find_spec(name, path, target)

        @classmethod
        def find_distributions(cls, *args, **kwargs):
            for dist in super().find_distributions(*args, **kwargs):
                name = re.sub(r"[-_.]+", "-", (dist.metadata["Name"] or "").lower())
                if name not in BLOCKED_DISTS:
                    yield dist

    sys.meta_path = [_WithoutExtras if f is importlib.machinery.PathFinder else f
                     for f in sys.meta_path]
    for name, code in json.loads(sys.stdin.read()):
        try:
            exec(compile(code, name, "exec"), {"__name__": "docs"})
        except BaseException:
            print("FAILED: " + name, file=sys.stderr)
            traceback.print_exc()
            sys.exit(1)
''')


def _groups():
    """The runnable blocks by the extras they name (one interpreter per set of extras)."""
    groups: dict[tuple[str, ...], list[tuple[str, str]]] = {}
    for name, code, extras in RUNNABLE:
        groups.setdefault(extras, []).append((name, code))
    return groups


GROUPS = _groups()


def test_docs_have_examples_and_an_api_page_per_public_module():
    assert len(RUNNABLE) >= 8
    pages = {p.stem for p in (ROOT / "docs" / "reference").glob("*.md")}
    for module in ("feedline", "dataset", "reader", "tfrecord", "example", "recordio", "csv",
                   "text", "fixed", "idx", "sharded", "io", "image", "feeder", "data_type",
                   "sequence", "train", "runtime", "exceptions"):
        assert module in pages
        page = (ROOT / "docs" / "reference" / f"{module}.md").read_text()
        if module == "feedline":
            assert "::: feedline\n" in page
        else:  # a format is documented where it lives (feedline.tfrecord re-exports it)
            assert f"::: feedline.{module}\n" in page or f"::: feedline.formats.{module}\n" in page


def test_every_guide_names_its_extras_and_the_guides_exist():
    guides = {p.stem for p in (ROOT / "docs" / "guides").glob("*.md")}
    assert {"pytorch", "tensorflow", "mxnet", "paddle", "images", "remote"} <= guides
    named = {extras for name, _, extras in BLOCKS if name.startswith("docs/guides/pytorch")}
    assert ("torch",) in named and ("lightning",) in named


def test_blocked_packages_follow_pyproject():
    assert "torch" in blocked_packages(()) and "lightning" in blocked_packages(("torch",))
    assert "torch" not in blocked_packages(("lightning",))  # the lightning extra includes torch
    assert "numpy" not in blocked_packages(())  # a core dependency
    with pytest.raises(ValueError, match="unknown extra 'tensorflow'"):
        blocked_packages(("tensorflow",))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("extras", list(GROUPS), ids=[",".join(e) or "core" for e in GROUPS])
def test_docs_examples_run_with_only_the_extras_they_name(extras, tmp_path):
    blocks = GROUPS[extras]
    proc = subprocess.run(
        [sys.executable, "-c", _RUNNER,
         json.dumps([blocked_packages(extras), blocked_distributions(extras)])],
        input=json.dumps(blocks), capture_output=True, text=True, cwd=tmp_path, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-6000:]


def test_doctest_fence_hook():
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    lines = ["Text :class:`~feedline.tfrecord.TFRecordFile` here.", "", ">>> 1 + 1", "2",
             "", "```", ">>> kept", "```"]
    out = hooks._DoctestFence(None).run(lines)
    assert out == ["Text `TFRecordFile` here.", "", "```pycon", ">>> 1 + 1", "2", "```", "",
                   "", "```", ">>> kept", "```"]


def test_one_docstring_style():
    """The reference renders docstrings as Google style (mkdocs.yml): ``Args:``,
    ``Returns:``, ``Raises:`` sections become tables; prose is prose. No docstring uses
    another style's syntax, which would render as plain text: Sphinx fields
    (``:param x:``, ``:returns:``) or numpy sections (``Parameters`` underlined)."""
    import ast

    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "docstring_style: google" in config
    other = re.compile(r"^\s*(:param\s|:type\s|:returns?:|:rtype:|:raises?\s)|"
                       r"^\s*(Parameters|Returns|Raises|Yields|Attributes)\n\s*-{3,}", re.M)
    deviating = []
    for path in sorted((ROOT / "src" / "feedline").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=True)
                if doc and other.search(doc):
                    deviating.append(f"{path.relative_to(ROOT)}:{getattr(node, 'name', '<module>')}")
    assert not deviating, deviating
