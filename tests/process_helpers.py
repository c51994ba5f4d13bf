"""Looking at processes from tests (alive, not a zombie; gone within a timeout; parent),
and a function for worker stages to fail in."""

from __future__ import annotations

import time


def process_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not).

    >>> import os
    >>> process_alive(os.getpid())
    True
    """
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pids, timeout: float = 10.0) -> list[int]:
    """The ``pids`` still alive after waiting up to ``timeout`` seconds for them to end."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [p for p in pids if process_alive(p)]
        if not alive:
            return []
        time.sleep(0.05)
    return [p for p in pids if process_alive(p)]


def parent_of(pid: int) -> int | None:
    """The parent process id of ``pid`` (``None`` once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return None


class BadRecord(ValueError):
    """What :func:`fail_on_five` raises."""


def fail_on_five(x):
    """``x``, except that item 5 raises :class:`BadRecord`."""
    if x == 5:
        raise BadRecord(f"record {x} is bad")
    return x
