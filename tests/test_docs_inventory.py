"""The API reference is complete: every name in the ``__all__`` of every public module has a
rendered entry in the built site, checked through the site's ``objects.inv`` (the
inventory mkdocstrings writes: one line per rendered object).

Public modules, for this check: ``feedline`` and every module under it without a ``_``
in its dotted path (internals live in ``_``-prefixed modules), and every module a
reference page renders (``:::``) or the README or a guide imports by its dotted path
(``from feedline.io.records import read_records``). The pages document what programs
import; "Every other module" renders the rest, one section per module. A name counts as
documented when the
inventory has a primary entry (one the site renders, not an alias) that ends in that name
and resolves to the same object — a package's re-export of a submodule's class counts
once, wherever it is rendered. feedline's functions and classes must also carry a
runnable ``>>>`` example in their docstring (exception classes are shown by the
exceptions module's hierarchy and example instead). Classes and functions of other
libraries that a module re-exports (numpy's ``uint8`` as ``tf_v1.uint8``) are left to
their library's documentation.

The site is built once, by ``mkdocs build --strict`` into a temporary folder (about half
a minute), so a warning that would fail CI's documentation build fails here too.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
import zlib

import pytest

from conftest import ROOT

pytest.importorskip("mkdocstrings", reason="the documentation build needs "
                    "pip install 'feedline[docs]' (the test extra includes it)")


def read_inventory(path) -> dict[str, tuple[str, str, str]]:
    """``{name: (role, priority, uri)}`` from a Sphinx ``objects.inv`` (version 2)."""
    data = path.read_bytes()
    header = data.split(b"\n", 4)
    assert header[0] == b"# Sphinx inventory version 2", header[0]
    entries = {}
    for line in zlib.decompress(header[4]).decode().splitlines():
        match = re.match(r"(\S+)\s+(\S+)\s+(-?\d+)\s+(\S+)\s+(.*)", line)
        if match:
            name, role, priority, uri, _ = match.groups()
            entries[name] = (role, priority, uri)
    return entries


def resolve(name: str):
    """The object a dotted inventory name refers to (longest importable module prefix,
    then attributes), or ``None``."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for part in parts[i:]:
                obj = getattr(obj, part)
        except AttributeError:
            return None
        return obj
    return None


def public_modules() -> list[str]:
    import feedline

    names = {"feedline"}
    names.update(m.name for m in pkgutil.walk_packages(feedline.__path__, "feedline."))
    pages = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        names.update(re.findall(r"^::: (feedline[\w.]*)\s*$", text, re.M))
        names.update(re.findall(r"(?:from|import) (feedline(?:\.\w+)+)", text))
    modules = []
    for name in sorted(names):
        if any(part.startswith("_") for part in name.split(".")):
            continue
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and name.startswith(exc.name) and exc.name.startswith("feedline"):
                continue  # an object path (``::: feedline.train.network.network``), not a module
            raise
        modules.append(name)
    return modules


@pytest.fixture(scope="module")
def inventory(tmp_path_factory):
    site = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return read_inventory(site / "objects.inv")


def _documented(inventory) -> set[tuple[str, int]]:
    documented = set()
    for name, (_role, priority, _uri) in inventory.items():
        if priority != "1" or not name.startswith("feedline"):
            continue  # priority 2: an alias of an entry rendered elsewhere
        obj = resolve(name)
        if obj is not None:
            documented.add((name.rsplit(".", 1)[-1], id(obj)))
    return documented


def _foreign(obj) -> bool:
    """A class or function of another library that a module re-exports under its name
    (``tf_v1.uint8`` is numpy's ``uint8``): that library documents it."""
    return ((inspect.isclass(obj) or inspect.isfunction(obj) or inspect.isbuiltin(obj))
            and not str(getattr(obj, "__module__", "") or "").startswith("feedline"))


def test_every_public_name_has_a_rendered_entry(inventory):
    documented = _documented(inventory)
    missing = {}
    modules = public_modules()
    assert {"feedline", "feedline.image", "feedline.pytorch", "feedline.tfrecord",
            "feedline.io.records", "feedline.pytorch.lightning"} <= set(modules)
    for module_name in modules:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if _foreign(obj):
                continue
            if (name, id(obj)) not in documented:
                missing.setdefault(module_name, []).append(name)
    assert not missing, f"names without a reference entry: {missing}"


#: public names without a ``>>>`` example, and why none can run in a docstring
NO_EXAMPLE = {
    "feedline.runtime.executor.Executor": "the worker-stage engine's protocol; used through map()",
    "feedline.runtime.executor.Slot": "the engine's per-slot bookkeeping; used through map()",
    "feedline.runtime.executor.SlotExecutor": "a base class of the engine's executors",
    "feedline.runtime.executor.ThreadExecutor": "the engine's executor of map(backend='thread')",
    "feedline.runtime.ray_executor.RayExecutor": "needs a Ray cluster",
    "feedline.runtime.ray_executor.cluster_cpus": "needs a Ray cluster",
    "feedline.train.builder.DistributedRunner": "starts processes (seconds)",
}


def test_every_public_function_and_class_has_an_example(inventory):
    without = {}
    for module_name in public_modules():
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            if _foreign(obj):
                continue
            if inspect.isclass(obj) and issubclass(obj, BaseException):
                continue  # the exceptions module's docstring draws and shows them
            if f"{obj.__module__}.{obj.__qualname__}" in NO_EXAMPLE:
                continue
            if ">>>" not in (inspect.getdoc(obj) or ""):
                without.setdefault(module_name, []).append(name)
    assert not without, f"public names without a >>> example: {without}"


def test_reference_pages_render_names_from_all():
    """The docs hook gives every option-less ``::: module`` line its ``__all__``."""
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    out = hooks.expand_directives("# x\n\n::: feedline.sharded\n\n::: feedline.io\n    options:\n")
    import feedline.sharded

    assert out.split("\n")[2:5] == ["::: feedline.sharded", "    options:", "      members:"]
    assert [line.strip("- ") for line in out.split("\n")[5:5 + len(feedline.sharded.__all__)]] \
        == list(feedline.sharded.__all__)
    assert out.endswith("::: feedline.io\n    options:\n")  # a page's own options are kept
