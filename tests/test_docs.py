"""Every ```python block of the documentation site (docs/**/*.md) runs as written, except
blocks marked as needing files the reader brings (they open ``data/...``)."""

from __future__ import annotations

import re

import pytest

from conftest import ROOT

BLOCKS = [
    (f"{path.relative_to(ROOT)} block {i}", code)
    for path in sorted((ROOT / "docs").rglob("*.md"))
    for i, code in enumerate(re.findall(r"```python\n(.*?)```", path.read_text(), re.S))
]
RUNNABLE = [(name, code) for name, code in BLOCKS if '"data/' not in code]


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
        else:  # a format is documented where it lives (feedline.tfrecord is an alias)
            assert f"::: feedline.{module}\n" in page or f"::: feedline.formats.{module}\n" in page


@pytest.mark.parametrize(("name", "code"), RUNNABLE, ids=[n for n, _ in RUNNABLE])
def test_docs_example_runs(name, code, capsys):
    exec(compile(code, name, "exec"), {"__name__": "docs"})


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
