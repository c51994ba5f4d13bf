"""Ctrl-C at exit never prints a traceback: ``feedline`` ignores SIGINT once its
subcommand is over (interrupted or not), so a late Ctrl-C during interpreter exit is quiet."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = """
import atexit, os, signal, sys, time
import feedline.cli.inspect as inspect_cmd

def late_ctrl_c():            # a Ctrl-C that arrives while the interpreter exits
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.2)

atexit.register(late_ctrl_c)
if sys.argv[1] == "interrupted":
    def run(args):
        raise KeyboardInterrupt
    inspect_cmd.run = run
else:
    inspect_cmd.run = lambda args: 0
from feedline.cli import main
sys.argv = ["feedline", "inspect", "x.tfrecord"]
sys.exit(main())
"""


@pytest.mark.parametrize("how, code", [("interrupted", 130), ("finished", 0)])
def test_ctrl_c_at_exit_prints_no_traceback(how, code):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT), how], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr and "KeyboardInterrupt" not in proc.stderr, proc.stderr
    assert proc.stderr.strip() == ("feedline inspect: interrupted" if how == "interrupted" else "")


def test_explicit_argv_leaves_sigint_alone(monkeypatch):
    import signal

    import feedline.cli.inspect as inspect_cmd
    from feedline.cli import main

    monkeypatch.setattr(inspect_cmd, "run", lambda args: 0)
    before = signal.getsignal(signal.SIGINT)
    assert main(["inspect", "x.tfrecord"]) == 0
    assert signal.getsignal(signal.SIGINT) is before
