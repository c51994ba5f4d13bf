"""Fuzz every decoder (TFRecord plain, gzip and skip mode, the TFRecord sidecar index,
Example, RecordIO + ``.idx``, CSV, text plain and gzip, fixed-length, IDX plain and gzip,
NDArray files, JPEG and PNG decode) with seeded mutations of valid files, in a subprocess
under an address-space limit and a wall-clock timeout: only feedline exceptions, bounded
memory (a ``MemoryError`` would be reported), no hang.

``FEEDLINE_FUZZ_ITERATIONS`` (default 40 per decoder, a few seconds) and
``FEEDLINE_FUZZ_SEED`` run longer or other campaigns."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="sets RLIMIT_AS and reads /proc/self/status"
)


def test_every_decoder_raises_only_feedline_errors_within_bounded_memory():
    iterations = int(os.environ.get("FEEDLINE_FUZZ_ITERATIONS", "40"))
    seed = int(os.environ.get("FEEDLINE_FUZZ_SEED", "17"))
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"), OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, os.path.join(HERE, "_fuzz_decoders.py"), str(iterations), str(seed), "512"],
        capture_output=True, text=True, timeout=240, env=env,
    )
    bad = [line for line in proc.stdout.splitlines() if line.startswith("BAD")]
    assert not bad, "\n".join(bad[:20])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"x {iterations}, 0 bad" in proc.stdout, proc.stdout[-2000:]
