"""The short public module names are the real modules, not copies."""

from __future__ import annotations

import importlib
import pickle
import subprocess
import sys

import pytest

from feedline._internal.aliases import ALIASES


@pytest.mark.parametrize("short, real", sorted(ALIASES.items()))
def test_each_short_name_is_the_real_module(short, real):
    if short.endswith("parquet"):
        pytest.importorskip("pyarrow")
    module = importlib.import_module(short)
    assert module is importlib.import_module(real)
    assert module.__name__ == real and module.__spec__.name == real


def test_a_fresh_interpreter_imports_every_way():
    code = (
        "import feedline, feedline.tfrecord as a\n"
        "from feedline.recordio import IRHeader\n"
        "from feedline import example\n"
        "assert a is feedline.tfrecord is feedline.formats.tfrecord\n"
        "assert IRHeader.__module__ == 'feedline.formats.recordio.image'\n"
        "assert example.__name__ == 'feedline.formats.example'\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.strip() == "ok", done.stderr


def test_objects_from_a_short_name_pickle_by_their_real_module():
    from feedline.recordio import IRHeader

    header = IRHeader(0, 1.5, 7, 0)
    assert pickle.loads(pickle.dumps(header)) == header


def test_an_unknown_submodule_is_still_an_import_error():
    with pytest.raises(ModuleNotFoundError, match="feedline.no_such_format"):
        importlib.import_module("feedline.no_such_format")
