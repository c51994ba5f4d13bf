"""The package's import graph: no circles, no private cross-imports, layers bottom-up.

Reads every module under ``src/feedline`` with :mod:`ast` (nothing is imported) and
checks the imports executed when a module loads (those at module level, outside
``if TYPE_CHECKING:``). Imports inside functions are deliberate late bindings (a
``Dataset`` method constructing the stage that lives in its own module) and are checked
only for privacy.

Layers, lowest first (a module may import its own layer and those below it):

0. core: ``_internal``, ``exceptions``, and the engine's protocol every reader
   implements (``dataset.base``, ``dataset.iterator``)
1. ``storage``: opening bytes
2. ``formats``: record formats, and their short public names (``feedline.tfrecord`` ...)
3. ``runtime``: threads and worker processes
4. ``dataset``: the pipeline stages
5. ``io``: file lists and splits
6. faces: ``reader``, ``data_type``, ``feeder``, ``sequence``, ``pytorch``, ``image``, ``mxnet``,
   ``datasets``, ``compat`` (other libraries' APIs: ``compat.tf_v1``)
7. ``train``
8. ``demo``
9. ``cli``
"""

from __future__ import annotations

import ast
import pathlib

import pytest

SRC = pathlib.Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "feedline"

LAYERS = [
    ("feedline._internal", "feedline.exceptions", "feedline.dataset.base",
     "feedline.dataset.iterator"),
    ("feedline.storage",),
    ("feedline.formats", "feedline.tfrecord", "feedline.example", "feedline.recordio",
     "feedline.csv", "feedline.text", "feedline.fixed", "feedline.idx", "feedline.ndarray_file",
     "feedline.sharded", "feedline.parquet", "feedline.webdataset"),
    ("feedline.runtime",),
    ("feedline.dataset",),
    ("feedline.io",),
    ("feedline.reader", "feedline.data_type", "feedline.feeder", "feedline.sequence",
     "feedline.pytorch", "feedline.image", "feedline.mxnet", "feedline.datasets",
     "feedline.compat", "feedline.ray"),
    ("feedline.train",),
    ("feedline.demo",),
    ("feedline.cli", "feedline.__main__"),
]


def module_names(src: pathlib.Path = SRC) -> dict[str, pathlib.Path]:
    names = {}
    for path in sorted((src / "feedline").rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def imports(name: str, path: pathlib.Path) -> list[tuple[str, str | None, bool, int]]:
    """``(module, imported name or None, at load time?, line)`` for each import."""
    tree = ast.parse(path.read_text(), str(path))
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: list[tuple[str, str | None, bool, int]] = []

    def visit(body: list[ast.stmt], at_load: bool) -> None:
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, ast.Import):
                found.extend((a.name, None, at_load, node.lineno) for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package[: len(package) - node.level + 1]
                    base = ".".join(parent + ([base] if base else []))
                found.extend((base, a.name, at_load, node.lineno) for a in node.names)
            inner = at_load and not isinstance(
                node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
            )
            for field in ("body", "orelse", "finalbody", "handlers"):
                sub = getattr(node, field, None)
                if isinstance(sub, list):
                    visit(sub, inner)

    visit(tree.body, True)
    return found


def resolve(base: str, attr: str | None, names: dict) -> str:
    return f"{base}.{attr}" if attr and f"{base}.{attr}" in names else base


def graph(names: dict) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for name, path in names.items():
        edges[name] = {
            resolve(base, attr, names)
            for base, attr, at_load, _ in imports(name, path)
            if at_load and resolve(base, attr, names) in names
        }
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module, or a self-import."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in edges.get(v, ()):
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def private_imports(names: dict) -> list[str]:
    """Imports of another module's ``_name``, or of a ``_module`` from outside the package
    it belongs to (``_internal`` serves everyone)."""
    bad = []
    for name, path in names.items():
        for base, attr, _, line in imports(name, path):
            if not base.startswith("feedline"):
                continue
            target = resolve(base, attr, names)
            if attr and attr.startswith("_") and not attr.startswith("__") and target == base:
                if base != name:
                    bad.append(f"{name}:{line} imports the private name {attr} of {base}")
            parts = target.split(".")
            for i, part in enumerate(parts):
                if part.startswith("_") and not part.startswith("__") and part != "_internal":
                    owner = ".".join(parts[:i])
                    if not (name == owner or name.startswith(owner + ".")):
                        bad.append(f"{name}:{line} imports the private module {target}")
                    break
    return bad


def layer_of(name: str) -> int | None:
    best = None
    for rank, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if name == prefix or name.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (rank, len(prefix))
    return None if best is None else best[0]


def layer_violations(edges: dict[str, set[str]]) -> list[str]:
    bad = []
    for name, targets in edges.items():
        mine = layer_of(name)
        if mine is None:
            continue
        for target in targets:
            theirs = layer_of(target)
            if theirs is not None and theirs > mine:
                bad.append(f"{name} (layer {mine}) imports {target} (layer {theirs}) at load time")
    return sorted(bad)


NAMES = module_names()


def test_no_import_circle():
    assert cycles(graph(NAMES)) == []


def test_no_private_cross_import():
    assert private_imports(NAMES) == []


def test_layers_import_downwards_only():
    assert layer_violations(graph(NAMES)) == []


def test_every_module_has_a_layer():
    unplaced = [n for n in NAMES if n != "feedline" and layer_of(n) is None]
    assert unplaced == []


def test_top_level_holds_public_modules_and_internal_only():
    private = sorted(
        p.name for p in PACKAGE.iterdir()
        if p.name.startswith("_") and p.name not in {"__init__.py", "__init__.pyi", "__main__.py",
                                                      "_internal", "__pycache__"}
    )
    assert private == []


# -- the checks themselves catch what they are meant to catch -----------------------


def _tree(tmp_path: pathlib.Path, files: dict[str, str]) -> dict[str, pathlib.Path]:
    for rel, text in files.items():
        path = tmp_path / "feedline" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return module_names(tmp_path)


def test_a_circle_is_found(tmp_path):
    names = _tree(tmp_path, {
        "__init__.py": "",
        "formats/__init__.py": "",
        "formats/a.py": "from feedline.formats.b import x\n",
        "formats/b.py": "from feedline.formats import a\nx = 1\n",
        "formats/c.py": "def late():\n    from feedline.formats import a\n",
    })
    assert cycles(graph(names)) == [["feedline.formats.a", "feedline.formats.b"]]


def test_a_late_import_is_not_a_circle(tmp_path):
    names = _tree(tmp_path, {
        "__init__.py": "",
        "a.py": "import feedline.b\n",
        "b.py": "def f():\n    import feedline.a\n",
    })
    assert cycles(graph(names)) == []


@pytest.mark.parametrize("text, message", [
    ("from feedline.formats.b import _helper\n",
     "feedline.formats.a:1 imports the private name _helper of feedline.formats.b"),
    ("from feedline.io import _split\n",
     "feedline.formats.a:1 imports the private module feedline.io._split"),
    ("def f():\n    from feedline.formats.b import _helper\n",
     "feedline.formats.a:2 imports the private name _helper of feedline.formats.b"),
])
def test_a_private_cross_import_is_found(tmp_path, text, message):
    names = _tree(tmp_path, {
        "__init__.py": "",
        "formats/__init__.py": "",
        "formats/a.py": text,
        "formats/b.py": "_helper = 1\n",
        "io/__init__.py": "",
        "io/_split.py": "",
    })
    assert private_imports(names) == [message]


def test_private_modules_serve_their_own_package(tmp_path):
    names = _tree(tmp_path, {
        "__init__.py": "",
        "io/__init__.py": "from feedline.io._split import x\n",
        "io/_split.py": "x = 1\n",
        "formats/__init__.py": "from feedline._internal.validate import positive_int\n",
        "_internal/__init__.py": "",
        "_internal/validate.py": "positive_int = 1\n",
    })
    assert private_imports(names) == []


def test_an_upward_import_is_found(tmp_path):
    names = _tree(tmp_path, {
        "__init__.py": "",
        "formats/__init__.py": "",
        "formats/a.py": "from feedline.train import runner\n",
        "train/__init__.py": "",
        "train/runner.py": "",
    })
    assert layer_violations(graph(names)) == [
        "feedline.formats.a (layer 2) imports feedline.train.runner (layer 7) at load time"
    ]
