"""The static checks CI relies on run as part of the suite: ruff (style, imports, bugbear)
over the whole tree and mypy over ``src/`` (configured in ``pyproject.toml``)."""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


def test_ruff_is_clean():
    done = _run("ruff", "check", "src", "tests", "benchmarks")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_is_clean_on_src():
    done = _run("mypy")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
