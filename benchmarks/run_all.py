"""Run every ``benchmarks/bench_*.py`` in turn, then assemble ``BENCHMARKS.md``.

Usage::

    python benchmarks/run_all.py              # all benchmarks, then BENCHMARKS.md
    python benchmarks/run_all.py reader tfrec # only those whose name contains one of the words
    python benchmarks/run_all.py --list       # list the benchmarks and the peers found

Each benchmark runs as its own process (``python benchmarks/bench_NAME.py``, whose ``main()``
writes ``benchmarks/results/NAME.md`` through ``harness.write_section``), so one that fails does not
stop the others; the exit status is 1 when any failed. ``BENCHMARKS.md`` is assembled from all the
sections present, including ones left by earlier runs of benchmarks not selected this time.
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import harness  # noqa: E402


def benchmark_scripts(words: list[str] | None = None) -> list[pathlib.Path]:
    """The ``bench_*.py`` files beside this script, sorted, filtered to those whose name contains
    one of ``words`` when given."""
    scripts = sorted(HERE.glob("bench_*.py"))
    if words:
        scripts = [s for s in scripts if any(w in s.stem for w in words)]
    return scripts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", help="run only benchmarks whose name contains a word")
    parser.add_argument("--list", action="store_true", help="list benchmarks and peers, run none")
    parser.add_argument(
        "--no-collect", action="store_true", help="do not rewrite BENCHMARKS.md afterwards"
    )
    args = parser.parse_args(argv)

    scripts = benchmark_scripts(args.only)
    if args.list:
        for script in scripts:
            print(script.relative_to(harness.REPO_ROOT))
        for peer in harness.PEERS:
            print(f"peer {peer}: {harness.peer_version(peer) or harness.NOT_INSTALLED}")
        return 0

    print(f"machine: {harness.machine_description()}", flush=True)
    failed = []
    for script in scripts:
        print(f"== {script.name}", flush=True)
        start = time.perf_counter()
        done = subprocess.run([sys.executable, str(script)], cwd=harness.REPO_ROOT, check=False)
        took = time.perf_counter() - start
        status = "ok" if done.returncode == 0 else f"FAILED (exit {done.returncode})"
        print(f"== {script.name}: {status} in {took:.1f}s", flush=True)
        if done.returncode != 0:
            failed.append(script.name)
    if not scripts:
        print("no benchmarks matched", file=sys.stderr)
    if not args.no_collect:
        print(f"wrote {harness.collect()}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
