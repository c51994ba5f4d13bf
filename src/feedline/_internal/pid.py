"""Whether a process of this machine is alive (for files named after their writer's pid)."""

from __future__ import annotations

import os

__all__ = ["pid_alive"]


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
