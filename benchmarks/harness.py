"""Shared helpers for feedline's benchmark scripts (standard library and numpy only).

Every benchmark is a script ``benchmarks/bench_*.py`` with a ``main()`` that measures feedline and,
in the same run, the peer it is compared with, then calls :func:`write_section` with a markdown
section. :func:`collect` (run by ``python benchmarks/run_all.py``) assembles the sections into
``BENCHMARKS.md`` at the repository root, headed by a description of the machine.

Peers (TensorFlow, torchvision, MXNet, PaddlePaddle, NVIDIA DALI) are never dependencies of feedline. Each lives in
its own virtual environment under :data:`PEERS_DIR` (``<repo>/../peers`` unless ``FEEDLINE_PEERS``
says otherwise; ``benchmarks/README.md`` tells how to make them). A peer measurement is a small
script run under that environment's Python by :func:`run_peer`, which prints its result as one JSON
object on its last stdout line. When a peer is missing, :func:`run_peer` returns ``None`` and the
benchmark reports "not installed" (:data:`NOT_INSTALLED`) while still measuring feedline.

Numbers are always reported side by side, as ratios taken in one run (:func:`ratio`); tests never
assert on time.
"""

from __future__ import annotations

import datetime
import functools
import gc
import json
import os
import pathlib
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

__all__ = [
    "NOT_INSTALLED",
    "PEERS",
    "PEERS_DIR",
    "REPO_ROOT",
    "RESULTS_DIR",
    "collect",
    "fmt_rate",
    "machine_description",
    "markdown_table",
    "peer_python",
    "peer_version",
    "rate",
    "ratio",
    "run_peer",
    "timed",
    "write_section",
]

#: Root of the feedline checkout (the folder holding ``benchmarks/``).
REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]

#: Folder holding one virtual environment per peer: ``$FEEDLINE_PEERS`` or ``<repo>/../peers``.
PEERS_DIR = pathlib.Path(os.environ.get("FEEDLINE_PEERS") or REPO_ROOT.parent / "peers").resolve()

#: Where :func:`write_section` puts one markdown file per benchmark.
RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"

#: The peer environments a benchmark may ask for, by name.
PEERS = ("tensorflow", "torchvision", "mxnet", "paddle", "dali")

#: What a table cell says for a peer whose environment is missing.
NOT_INSTALLED = "not installed"

# Code that prints the version of each peer's library (and what it runs on).
_VERSION_CODE = {
    "tensorflow": "import tensorflow as m; print(m.__version__)",
    "torchvision": "import torch, torchvision as m; print(f'{m.__version__} (torch {torch.__version__})')",
    "mxnet": "import mxnet as m; print(m.__version__)",
    "paddle": "import paddle as m; print(m.__version__)",
    "dali": "import nvidia.dali as m; print(f'{m.__version__} (CPU pipelines, device_id=None)')",
}


def _check_name(name: str) -> None:
    if name not in PEERS:
        raise ValueError(f"`name` must be one of {', '.join(PEERS)}, got {name!r}")


@functools.cache
def peer_python(name: str) -> str | None:
    """Path of the Python interpreter of peer environment ``name``, or ``None``.

    ``name`` is one of :data:`PEERS`. The interpreter is ``PEERS_DIR/<name>/bin/python``; it counts
    only if it exists and runs (``python -c pass`` exits 0). The answer is cached per process.

    >>> peer_python("no-such-peer")
    Traceback (most recent call last):
    ...
    ValueError: `name` must be one of tensorflow, torchvision, mxnet, paddle, dali, got 'no-such-peer'
    """
    _check_name(name)
    python = PEERS_DIR / name / "bin" / "python"
    if not python.exists():
        return None
    try:
        done = subprocess.run(
            [str(python), "-c", "pass"], capture_output=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return str(python) if done.returncode == 0 else None


@functools.cache
def peer_version(name: str) -> str | None:
    """Version string of the peer library in environment ``name`` (e.g. ``"2.21.0"``; torchvision's
    names its torch too), or ``None`` when the environment is missing or the library does not
    import."""
    python = peer_python(name)
    if python is None:
        return None
    done = subprocess.run(
        [python, "-c", _VERSION_CODE[name]],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    return lines[-1].strip() if done.returncode == 0 and lines else None


def run_peer(
    name: str,
    script: str | os.PathLike[str],
    *args: Any,
    timeout: float = 600,
    env: dict[str, str] | None = None,
) -> dict[str, Any] | None:
    """Run Python file ``script`` under peer ``name``'s interpreter and return its result.

    The script gets ``args`` (turned into strings) as its command-line arguments and must print its
    result as a JSON object on its **last** line of stdout; anything printed before is ignored. It runs
    with the current working directory at the repository root and ``env`` merged into the
    environment.

    Returns the parsed object, or ``None`` (after printing a note to stderr) when the peer's
    environment is missing. Raises ``RuntimeError`` carrying the script's stderr when it exits
    non-zero, ``subprocess.TimeoutExpired`` past ``timeout`` seconds, and ``ValueError`` when its last
    stdout line is not a JSON object.
    """
    python = peer_python(name)
    if python is None:
        print(
            f"[harness] peer {name!r} {NOT_INSTALLED} (no working {PEERS_DIR / name}/bin/python);"
            " measuring feedline only",
            file=sys.stderr,
        )
        return None
    child_env = dict(os.environ)
    # the peer must not pick up feedline's environment or an inherited PYTHONPATH
    child_env.pop("PYTHONPATH", None)
    child_env.pop("VIRTUAL_ENV", None)
    child_env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if env:
        child_env.update(env)
    cmd = [python, str(script), *map(str, args)]
    done = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO_ROOT,
        env=child_env,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"peer {name!r} script {script} exited with {done.returncode}:\n{done.stderr[-4000:]}"
        )
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if not lines:
        raise ValueError(f"peer {name!r} script {script} printed nothing on stdout")
    try:
        result = json.loads(lines[-1])
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"peer {name!r} script {script}: last stdout line is not JSON: {lines[-1][:200]!r}"
        ) from exc
    if not isinstance(result, dict):
        raise ValueError(
            f"peer {name!r} script {script}: last stdout line must be a JSON object, got "
            f"{type(result).__name__}"
        )
    return result


def timed(fn: Callable[[], Any], *, repeat: int = 3, warmup: int = 1) -> float:
    """Best wall-clock time in seconds of ``repeat`` calls of ``fn()``, after ``warmup`` untimed
    calls. The garbage collector runs before each call and is not paused.

    >>> timed(lambda: sum(range(10)), repeat=2, warmup=0) >= 0
    True
    """
    if repeat < 1:
        raise ValueError(f"`repeat` must be a positive int, got {repeat!r}")
    if warmup < 0:
        raise ValueError(f"`warmup` must be a non-negative int, got {warmup!r}")
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def rate(count: float, seconds: float) -> float:
    """Items per second: ``count / seconds`` (``inf`` when ``seconds`` is 0).

    >>> rate(1000, 0.5)
    2000.0
    """
    return float("inf") if seconds <= 0 else count / seconds


def ratio(ours: float | None, theirs: float | None, *, digits: int = 2) -> str:
    """Format ``ours / theirs`` as ``"1.85x"``, or :data:`NOT_INSTALLED` when ``theirs`` is ``None``.

    Pass rates (higher is better) so that a ratio above 1 means feedline is faster.

    >>> ratio(300.0, 100.0)
    '3.00x'
    >>> ratio(300.0, None)
    'not installed'
    """
    if theirs is None or ours is None:
        return NOT_INSTALLED
    if theirs == 0:
        return "inf"
    return f"{ours / theirs:.{digits}f}x"


def fmt_rate(value: float | None, unit: str = "/s") -> str:
    """Human format for a rate: ``"12,345/s"``, ``"1.23M/s"``; :data:`NOT_INSTALLED` for ``None``.

    >>> fmt_rate(12345.6)
    '12,346/s'
    >>> fmt_rate(2_500_000)
    '2.50M/s'
    """
    if value is None:
        return NOT_INSTALLED
    if value >= 1e6:
        return f"{value / 1e6:.2f}M{unit}"
    if value >= 100:
        return f"{value:,.0f}{unit}"
    return f"{value:.3g}{unit}"


def machine_description() -> str:
    """One line describing this machine: CPU model, core count, RAM, Python and OS.

    Reads ``/proc/cpuinfo`` and ``/proc/meminfo`` where present (Linux); elsewhere falls back to
    :mod:`platform`.
    """
    cpu = platform.processor() or platform.machine() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 0
    ram = "unknown RAM"
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    ram = f"{int(line.split()[1]) / 1024**2:.1f} GiB RAM"
                    break
    except OSError:
        pass
    py = f"Python {platform.python_version()} ({platform.python_implementation()})"
    system = f"{platform.system()} {platform.release()}"
    return f"{cpu}, {cores} cores, {ram}; {py}; {system}"


def markdown_table(headers: Sequence[Any], rows: Iterable[Sequence[Any]]) -> str:
    """A GitHub-flavoured markdown table. Cells are turned into text with ``str``; ``|`` in a cell is
    escaped. A column is right-aligned when each of its cells starts with a digit (rates, ratios) or
    reads :data:`NOT_INSTALLED`, and at least one is a number; other columns are left-aligned.

    >>> print(markdown_table(["pipeline", "rate"], [["feedline", "1.5x"]]))
    | pipeline | rate |
    | --- | ---: |
    | feedline | 1.5x |
    """
    head = [str(h).replace("|", "\\|") for h in headers]
    body = [[str(c).replace("|", "\\|") for c in row] for row in rows]
    for row in body:
        if len(row) != len(head):
            raise ValueError(f"row has {len(row)} cells, header has {len(head)}: {row!r}")

    def numeric(cell: str) -> bool:
        return cell[:1].isdigit() or cell in {NOT_INSTALLED, "inf"}

    aligns = []
    for i in range(len(head)):
        column = [row[i] for row in body]
        right = all(map(numeric, column)) and any(c[:1].isdigit() for c in column)
        aligns.append("---:" if right else "---")
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(aligns) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


def write_section(name: str, markdown: str) -> pathlib.Path:
    """Write one benchmark's results to ``benchmarks/results/<name>.md`` and return the path.

    ``markdown`` should start with a ``## `` heading and say what was measured, on how much data, and
    the peer's version (see :func:`peer_version`). :func:`collect` orders sections by ``name``.
    """
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"`name` must be a plain file stem, got {name!r}")
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.md"
    path.write_text(markdown.strip() + "\n", encoding="utf-8")
    return path


def collect(output: str | os.PathLike[str] | None = None) -> pathlib.Path:
    """Assemble every ``benchmarks/results/*.md`` (sorted by name) into ``BENCHMARKS.md``.

    The header names the machine (:func:`machine_description`), the date, the peer versions found and
    how to reproduce. ``output`` defaults to ``<repo>/BENCHMARKS.md``. Returns the path written.
    """
    out = pathlib.Path(output) if output is not None else REPO_ROOT / "BENCHMARKS.md"
    sections = sorted(RESULTS_DIR.glob("*.md")) if RESULTS_DIR.is_dir() else []
    peers = ", ".join(f"{p} {peer_version(p) or NOT_INSTALLED}" for p in PEERS)
    today = datetime.date.today().isoformat()
    header = [
        "# feedline benchmarks",
        "",
        "Generated by `python benchmarks/run_all.py`; do not edit by hand. Each table compares",
        "feedline with a peer measured in the same run on the same machine; ratios above 1x mean",
        "feedline is faster. A peer that is not installed is reported as such while feedline is",
        "still measured. See `benchmarks/README.md` for how to create the peer environments.",
        "",
        f"- Machine: {machine_description()}",
        f"- Date: {today}",
        f"- Peers found now: {peers} (each section was produced by its own run and names what"
        " it measured against; sections are rewritten only when their benchmark runs again)",
        "- Reproduce: `python benchmarks/run_all.py` (only some: `python benchmarks/run_all.py WORD`,"
        " which runs the `bench_*.py` whose name contains WORD and reassembles this file)",
        "",
    ]
    body = [s.read_text(encoding="utf-8").strip() + "\n" for s in sections]
    if not body:
        body = ["_No benchmark results yet._\n"]
    out.write_text("\n".join(header) + "\n" + "\n".join(body), encoding="utf-8")
    return out
