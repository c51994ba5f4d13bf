"""feedline._internal.optional.require: the import helper behind every optional extra."""

from __future__ import annotations

import builtins
import importlib
import sys
import threading

import pytest

from feedline._internal.optional import require


def test_missing_module_names_the_extra():
    with pytest.raises(ImportError, match=r"pip install 'feedline\[image\]'"):
        require("feedline_no_such_module_xyz", extra="image")


def test_a_module_mid_import_in_another_thread_is_waited_for(tmp_path, monkeypatch):
    """Two decode threads importing Pillow at once: the second must not get the first's
    half-initialised module from sys.modules."""
    (tmp_path / "feedline_slow_mod.py").write_text(
        "import builtins\n"
        "builtins._feedline_slow_started.set()\n"
        "builtins._feedline_slow_release.wait(10)\n"
        "VALUE = 42\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    started, release = threading.Event(), threading.Event()
    monkeypatch.setattr(builtins, "_feedline_slow_started", started, raising=False)
    monkeypatch.setattr(builtins, "_feedline_slow_release", release, raising=False)
    seen: list[bool] = []

    def second():
        seen.append(hasattr(require("feedline_slow_mod", extra="image"), "VALUE"))

    first = threading.Thread(target=importlib.import_module, args=("feedline_slow_mod",))
    first.start()
    try:
        assert started.wait(10)
        other = threading.Thread(target=second)
        other.start()
        other.join(0.3)  # it must be waiting for the first import, not done already
        assert seen == []
    finally:
        release.set()
        first.join(10)
    other.join(10)
    assert seen == [True]
    sys.modules.pop("feedline_slow_mod", None)
