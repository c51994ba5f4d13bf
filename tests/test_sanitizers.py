"""Issue 28: feedline's three C extensions built with ``-fsanitize=address,undefined`` into
a temporary folder, then a seeded, bounded mutation fuzz of every C entry point under
them (``tests/_native_fuzz.py``, which also checks each against its pure-Python path),
in a subprocess with AddressSanitizer's runtime preloaded. Any sanitizer report, crash or
mismatch fails the test.

Skipped, saying why, only where the C compiler has no sanitizer runtime; without
libjpeg-turbo's headers (so without the region decoder in any build) the two other
extensions are fuzzed. ``FEEDLINE_FUZZ_ITERATIONS``
(default 400 cases per entry-point group) and ``FEEDLINE_FUZZ_SEED`` make longer runs::

    FEEDLINE_FUZZ_ITERATIONS=5000 pytest tests/test_sanitizers.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("simplejpeg")
pytest.importorskip("PIL.Image")

ROOT = Path(__file__).resolve().parents[1]
SOURCES = {
    "_libjpeg": (ROOT / "src/feedline/image/_libjpeg.c", ["-ljpeg"]),
    "_kernels": (ROOT / "src/feedline/image/_kernels.c", []),
    "_wire": (ROOT / "src/feedline/formats/example/_wire.c", []),
}
FLAGS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
         "-fno-omit-frame-pointer", "-g", "-O1", "-std=c99", "-ffp-contract=off",
         "-shared", "-fPIC"]
REPORTS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer",
           "SUMMARY: UndefinedBehaviorSanitizer")


def _compiler() -> str:
    cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    found = shutil.which(cc) or shutil.which("cc") or shutil.which("gcc")
    if found is None:
        pytest.skip("no C compiler on PATH: the sanitizer build needs gcc or clang")
    return found


def _runtime(cc: str, tmp: Path) -> str:
    """The AddressSanitizer runtime to preload, after checking that the compiler links a
    sanitized program at all; skips with the reason where it does not."""
    probe = tmp / "probe.c"
    probe.write_text("int main(void) { return 0; }\n")
    made = subprocess.run([cc, "-fsanitize=address,undefined", str(probe), "-o",
                           str(tmp / "probe")], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"{cc} cannot link -fsanitize=address,undefined (no sanitizer runtime; "
                    f"Debian: apt install libasan8 libubsan1): {made.stderr.strip()[-300:]}")
    asan = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True,
                          text=True).stdout.strip()
    if not os.path.isabs(asan) or not os.path.exists(asan):
        pytest.skip(f"{cc} does not name its libasan.so (clang links it statically; "
                    "build with gcc to run this test)")
    return asan


def _have_jpeg_headers(cc: str, tmp: Path) -> bool:
    """Whether libjpeg-turbo's headers are there: without them the region decoder is not
    built (here or by setup.py) and the fuzz covers the two other extensions."""
    jpeg = tmp / "jpeg.c"
    jpeg.write_text("#include <stdio.h>\n#include <jpeglib.h>\nint main(void) { return 0; }\n")
    return subprocess.run([cc, "-c", str(jpeg), "-o", str(tmp / "jpeg.o")],
                          capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def sanitized(tmp_path_factory) -> tuple[Path, str]:
    tmp = tmp_path_factory.mktemp("sanitized")
    cc = _compiler()
    asan = _runtime(cc, tmp)
    include = sysconfig.get_paths()["include"]
    suffix = sysconfig.get_config_var("EXT_SUFFIX")

    sources = dict(SOURCES)
    if not _have_jpeg_headers(cc, tmp):
        del sources["_libjpeg"]

    def build(item):
        stem, (source, libs) = item
        out = tmp / f"{stem}{suffix}"
        made = subprocess.run([cc, *FLAGS, f"-I{include}", str(source), "-o", str(out), *libs],
                              capture_output=True, text=True)
        assert made.returncode == 0, f"sanitized build of {source.name} failed:\n{made.stderr}"

    with ThreadPoolExecutor(3) as pool:
        list(pool.map(build, sources.items()))
    return tmp, asan


def _run(folder: Path, asan: str, script: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.update(
        FEEDLINE_SANITIZED_DIR=str(folder),
        LD_PRELOAD=asan,
        # Python's own allocations are not ours to judge: no leak report at exit
        ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=0:allocator_may_return_null=1",
        UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1",
        PYTHONPATH=os.pathsep.join([str(ROOT / "tests"), str(ROOT / "src"),
                                    env.get("PYTHONPATH", "")]),
    )
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True,
                          env=env, cwd=str(ROOT / "tests"), timeout=600)


def _check(done: subprocess.CompletedProcess) -> None:
    reports = [line for line in done.stderr.splitlines() if any(r in line for r in REPORTS)]
    assert not reports and done.returncode == 0, (
        f"exit {done.returncode}; sanitizer reports: {reports[:5]}\n"
        f"stdout: {done.stdout[-2000:]}\nstderr: {done.stderr[-6000:]}")


def test_sanitized_builds_are_the_ones_loaded(sanitized):
    folder, asan = sanitized
    script = folder / "which.py"
    script.write_text(
        "import os, _native_fuzz\n"
        "_native_fuzz.load_sanitized(os.environ['FEEDLINE_SANITIZED_DIR'])\n"
        "from feedline._internal.optional import compiled\n"
        "from feedline.formats.example import _native\n"
        "from feedline.image import codec\n"
        "for m in (codec._region_decoder(), compiled('feedline.image._kernels'),\n"
        "          _native.extension()):\n"
        "    print(getattr(m, '__file__', 'missing'))\n"
        "print(any('libasan' in line for line in open('/proc/self/maps')))\n")
    done = _run(folder, asan, str(script))
    _check(done)
    lines = done.stdout.split()
    built = len(list(folder.glob("_*.so")))
    assert sum(line.startswith(str(folder)) for line in lines[:3]) == built >= 2
    assert lines[3] == "True"


def test_mutation_fuzz_of_every_entry_point_under_asan_and_ubsan(sanitized):
    folder, asan = sanitized
    iterations = os.environ.get("FEEDLINE_FUZZ_ITERATIONS", "400")
    seed = os.environ.get("FEEDLINE_FUZZ_SEED", "28")
    done = _run(folder, asan, "_native_fuzz.py", iterations, seed)
    _check(done)
    counts = eval(done.stdout.strip().splitlines()[-1])  # the dict run() returns
    assert counts["kernels"] > 0 and counts["examples"] > 0
    assert counts["jpeg"] > 0 or not list(folder.glob("_libjpeg*.so"))


def test_the_known_reports_stay_fixed(sanitized):
    """The three reports of the issue's sanitizer campaign, replayed directly:
    resample's NaN box (UBSan at the float-to-int cast) and its box past the edge by less
    than a float32 step (ASAN heap over-read in the crop copy), and the encoder's
    memcpy from a NULL buffer of length 0 (an Example without features)."""
    folder, asan = sanitized
    script = folder / "known.py"
    script.write_text(
        "import os, numpy as np, _native_fuzz\n"
        "_native_fuzz.load_sanitized(os.environ['FEEDLINE_SANITIZED_DIR'])\n"
        "from feedline.image import _kernels as k\n"
        "from feedline.formats.example import codec\n"
        "src = np.zeros((4, 1 << 20, 1), np.uint8)[:, :5]\n"
        "for box in [(float('nan'),) * 4, (0.0, 0.0, 5.0000001, 4.0), (0, 0, 5, 4.00000001),\n"
        "            (2.0, 0.0, 5.00000001, 4.0), (0.0, 0.0, float('nan'), 4.0)]:\n"
        "    for dst in (np.empty((4, 3, 1), np.uint8), np.empty((4, 5, 1), np.uint8)):\n"
        "        try:\n"
        "            k.resample(np.ascontiguousarray(src), dst, box, 1)\n"
        "        except ValueError:\n"
        "            pass\n"
        "        else:\n"
        "            raise SystemExit(f'box {box} accepted')\n"
        "codec.encode_example({}), codec.encode_example({'a': []}), codec.encode_example({'a': b''})\n"
        "entry = b'\\x0a\\x01a\\x12\\x04\\x12\\x02\\x0a\\x00'  # a packed FloatList of 0 bytes\n"
        "record = b'\\x0a\\x0b\\x0a\\x09' + entry\n"
        "from feedline.formats.example import spec\n"
        "codec.parse_example([record], {'a': spec.VarLenFeature('float32')})\n"
        "print('ok')\n")
    done = _run(folder, asan, str(script))
    _check(done)
    assert done.stdout.strip() == "ok"
