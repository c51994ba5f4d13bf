"""Files named after the process that writes them: this machine's tag, whether a process
of it is alive, and which names a dead writer left."""

from __future__ import annotations

import os
import re
import socket

__all__ = ["host_tag", "left_by_dead_writers", "pid_alive"]


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this machine exists: ``False`` only when it is known to
    be gone (a live process of another user counts as alive).

    Args:
        pid: the process id.

    >>> pid_alive(os.getpid())
    True
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: someone else's live process
        return True
    return True


def host_tag() -> str:
    """This machine's name as a part of a file name split at ``-`` (its ``-`` become
    ``_``).

    >>> "-" in host_tag()
    False
    """
    return socket.gethostname().replace("-", "_")


def left_by_dead_writers(directory: str, prefix: str, pattern: re.Pattern[str]) -> list[str]:
    """The names in ``directory`` (``[]`` when it cannot be listed) that start with
    ``prefix`` and in which ``pattern`` finds the ``pid`` group of a process of this
    machine that is gone; when ``pattern`` has a ``host`` group too, only names whose
    host is :func:`host_tag`'s.

    Args:
        directory: the folder to look in (``""``: the current one).
        prefix: the start of the names to consider.
        pattern: searched in each name; must have a ``pid`` group.

    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> open(os.path.join(folder, f"a.tmp-{os.getpid()}"), "w").close()   # alive
    >>> left_by_dead_writers(folder, "a.tmp-", re.compile(r"-(?P<pid>\\d+)$"))
    []
    """
    try:
        names = os.listdir(directory or ".")
    except OSError:
        return []
    host = host_tag() if "host" in pattern.groupindex else None
    dead = []
    for name in names:
        m = pattern.search(name) if name.startswith(prefix) else None
        if m and (host is None or m["host"] == host) and not pid_alive(int(m["pid"])):
            dead.append(name)
    return dead
