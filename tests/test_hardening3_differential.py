"""Issue 28: a differential fuzz, in this process, that the C extensions and the
pure-Python paths agree: Examples (encode, decode, parse_example over random features and
mutated records), the image kernels (normalize_chw and hwc_to_chw against numpy,
resample against Pillow, also on hostile boxes) and region decoding against the full
decode cut to the box (every scale and mode, spliced or not). The cases are those of
``tests/_native_fuzz.py``, which ``tests/test_sanitizers.py`` runs under AddressSanitizer
and UBSan; ``FEEDLINE_FUZZ_ITERATIONS`` / ``FEEDLINE_FUZZ_SEED`` make longer runs."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("simplejpeg")
pytest.importorskip("PIL.Image")

import _native_fuzz  # noqa: E402
from feedline._internal.optional import compiled  # noqa: E402

ITERATIONS = int(os.environ.get("FEEDLINE_FUZZ_ITERATIONS", "300"))
SEED = int(os.environ.get("FEEDLINE_FUZZ_SEED", "7"))


def _need(module: str) -> None:
    if compiled(module) is None:
        pytest.skip(f"{module} was not built (install a C compiler, and libjpeg-turbo's "
                    "headers for the region decoder, then reinstall feedline)")


def test_region_decode_agrees_with_full_decode_and_crop():
    _need("feedline.image._libjpeg")
    assert _native_fuzz.fuzz_jpeg(ITERATIONS, SEED) > ITERATIONS // 10


def test_kernels_agree_with_numpy_and_pillow():
    _need("feedline.image._kernels")
    assert _native_fuzz.fuzz_kernels(ITERATIONS, SEED) > ITERATIONS // 2


def test_example_extension_agrees_with_the_python_codec():
    _need("feedline.formats.example._wire")
    assert _native_fuzz.fuzz_examples(ITERATIONS, SEED) == ITERATIONS
