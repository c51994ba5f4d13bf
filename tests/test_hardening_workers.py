"""Fault injection for worker processes: when the consumer dies (SIGKILL, SIGTERM) while
its workers are inside user code, no worker survives it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads process state from /proc")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


CONSUMER = """
import os, sys, threading, time
from feedline import Dataset

marks = sys.argv[1]

def stuck(x):                       # user code that never returns
    open(os.path.join(marks, str(os.getpid())), "w").close()
    while True:
        time.sleep(0.01)

def consume():
    ds = Dataset.range(100).map(stuck, num_workers=2)
    for _ in ds:
        pass

if sys.argv[2] == "thread":          # a pool created off the main thread
    t = threading.Thread(target=consume, daemon=True)
    t.start()
    t.join()
else:
    consume()
"""


@pytest.mark.parametrize(
    "sig, where",
    [
        (signal.SIGKILL, "main"),
        (signal.SIGTERM, "main"),
        (signal.SIGKILL, "thread"),
        (signal.SIGTERM, "thread"),
    ],
)
def test_no_worker_outlives_a_killed_consumer(tmp_path, sig, where):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"))
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(CONSUMER), str(tmp_path), where],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        # both workers are inside the user function
        _wait(lambda: len(os.listdir(tmp_path)) == 2 or proc.poll() is not None, 60)
        assert len(os.listdir(tmp_path)) == 2, proc.stderr.read1().decode()
        pids = [int(n) for n in os.listdir(tmp_path)]
        assert all(_alive(p) for p in pids)
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == -sig
        assert _wait(lambda: not any(_alive(p) for p in pids), 15), [
            p for p in pids if _alive(p)
        ]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
