"""Helpers shared by the hardening tests: run a snippet in a subprocess under an
address-space limit and a wall-clock timeout."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")

PRELUDE = """
import resource, sys
def _limit_memory(extra_mib):
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) for line in f if line.startswith("VmSize:")) * 1024
    limit = vm + extra_mib * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
"""


def run_limited(code: str, *, timeout: float = 60, extra_mib: int = 512) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter; ``limit()`` inside it caps the address space at
    the current size plus ``extra_mib``. Returns the finished process (stdout, stderr)."""
    script = PRELUDE + f"\nlimit = lambda: _limit_memory({extra_mib})\n" + textwrap.dedent(code)
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
