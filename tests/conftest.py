"""Shared test helpers: fixture paths and leak checks for threads and processes."""

from __future__ import annotations

import os
import pathlib
import threading
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "data"


@pytest.fixture(scope="session")
def fixtures_dir() -> pathlib.Path:
    """``tests/data``: peer-written conformance files (see ``tests/data/SOURCES.md``)."""
    if not FIXTURES.is_dir():
        pytest.fail(f"fixtures not found at {FIXTURES}")
    return FIXTURES


def _child_pids() -> set[int]:
    me = os.getpid()
    kids = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, ppid = fields[0], int(fields[1])
        if ppid == me and state != "Z":
            kids.add(int(entry))
    return kids


def _feedline_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("feedline")}


def _shm_segments() -> set[str]:
    try:
        return {n for n in os.listdir("/dev/shm") if n.startswith("feedline")}
    except FileNotFoundError:
        return set()


class LeakCheck:
    """Records threads, child processes and shared-memory segments at start; ``assert_clean``
    waits briefly for them to go and fails naming whatever is left."""

    def __init__(self) -> None:
        self.threads = _feedline_threads()
        self.children = _child_pids()
        self.shm = _shm_segments()

    def leftovers(self) -> dict[str, set]:
        return {
            "threads": {t.name for t in _feedline_threads() - self.threads if t.is_alive()},
            "processes": _child_pids() - self.children,
            "shared memory": _shm_segments() - self.shm,
        }

    def assert_clean(self, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            left = {k: v for k, v in self.leftovers().items() if v}
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        assert not left, f"left behind: {left}"


@pytest.fixture
def leak_check() -> LeakCheck:
    """Use ``leak_check.assert_clean()`` after closing an iterator."""
    return LeakCheck()


@pytest.fixture(params=[True, False], ids=["simd", "portable"])
def simd(request):
    """Runs a test on the image kernels' AVX2 code (skipped where the machine lacks it) and
    on their portable loops; AVX2 is switched back on (the default where supported) after."""
    from feedline.image import augment

    kernels = augment._kernels()
    on = kernels._set_simd(request.param)
    try:
        if request.param and not on:
            pytest.skip("the AVX2 code is not available here")
        yield on
    finally:
        kernels._set_simd(True)


@pytest.fixture
def closing():
    """Datasets registered here are closed after the test (their worker processes stopped)."""
    made = []
    yield made.append
    for ds in made:
        ds.close()
