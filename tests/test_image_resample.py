"""The compiled resampler (feedline.image._kernels.resample) is Pillow's resize, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image as PIL_Image

from feedline.image import augment
from feedline.image.augment import RandomResizedCrop, Resize

FILTERS = ("box", "bilinear", "hamming", "bicubic", "lanczos")


def _pillow(img: np.ndarray, height: int, width: int, name: str, box) -> np.ndarray:
    src = np.ascontiguousarray(img if img.shape[2] == 3 else img[:, :, 0])
    out = np.asarray(
        PIL_Image.fromarray(src).resize(
            (width, height), getattr(PIL_Image.Resampling, name.upper()), box=box
        )
    )
    return out if img.shape[2] == 3 else out[:, :, None]


def _kernel(img: np.ndarray, height: int, width: int, name: str, box) -> np.ndarray:
    out = np.empty((height, width, img.shape[2]), np.uint8)
    augment._kernels().resample(img, out, box, augment._KERNEL_FILTERS[name])
    return out



def test_pillow_is_recent_enough():
    """The kernel follows Pillow 13's order of the two passes; the tests compare with it."""
    major = int(PIL_Image.__version__.split(".")[0])
    assert major >= 13, f"the test extra needs Pillow >= 13, found {PIL_Image.__version__}"


@pytest.mark.parametrize("name", FILTERS)
@pytest.mark.parametrize("channels", [1, 3])
def test_random_sizes_and_boxes_match_pillow(name, channels, simd):
    rng = np.random.default_rng(FILTERS.index(name) * 10 + channels)
    for _ in range(250):
        h, w = (int(v) for v in rng.integers(1, 90, 2))
        oh, ow = (int(v) for v in rng.integers(1, 110, 2))
        img = rng.integers(0, 256, (h, w, channels), dtype=np.uint8)
        kind = rng.random()
        if kind < 0.5:  # fractional box: enlarging, shrinking, either order of the passes
            x0, y0 = rng.uniform(0, w), rng.uniform(0, h)
            box = (x0, y0, rng.uniform(x0, w), rng.uniform(y0, h))
        elif kind < 0.6 and oh <= h and ow <= w:  # a whole-pixel crop of the output's size
            y0, x0 = int(rng.integers(0, h - oh + 1)), int(rng.integers(0, w - ow + 1))
            box = (x0, y0, x0 + ow, y0 + oh)
        elif kind < 0.7:  # one axis unchanged: a single pass
            oh = h
            box = (0, 0, w, h)
        else:
            box = (0, 0, w, h)
        np.testing.assert_array_equal(
            _kernel(img, oh, ow, name, box), _pillow(img, oh, ow, name, box),
            err_msg=f"{(h, w, channels)} -> {(oh, ow)} box {box} {name}",
        )


@pytest.mark.parametrize("name", FILTERS)
@pytest.mark.parametrize("channels", [1, 3])
def test_larger_sizes_match_pillow(name, channels, simd):
    """Sizes where the AVX2 passes run: 16 or more output pixels and source bytes, row counts
    off the groups of 8, blocks that overlap at the right edge, many taps, either order."""
    rng = np.random.default_rng(100 + FILTERS.index(name) * 10 + channels)
    for _ in range(12):
        h, w = (int(v) for v in rng.integers(8, 400, 2))
        oh, ow = (int(v) for v in rng.integers(1, 300, 2))
        img = rng.integers(0, 256, (h, w, channels), dtype=np.uint8)
        if rng.random() < 0.5:
            x0, y0 = rng.uniform(0, w / 2), rng.uniform(0, h / 2)
            box = (x0, y0, rng.uniform(x0, w), rng.uniform(y0, h))
        else:
            box = (0, 0, w, h)
        np.testing.assert_array_equal(
            _kernel(img, oh, ow, name, box), _pillow(img, oh, ow, name, box),
            err_msg=f"{(h, w, channels)} -> {(oh, ow)} box {box} {name}",
        )


def test_simd_and_portable_passes_agree():
    """The two implementations of the passes give the same bytes (where AVX2 is available)."""
    kernels = augment._kernels()
    if not kernels._set_simd(True):
        pytest.skip("the AVX2 passes are not available here")
    rng = np.random.default_rng(11)
    try:
        for _ in range(300):
            channels = int(rng.choice([1, 3]))
            h, w = (int(v) for v in rng.integers(1, 200, 2))
            oh, ow = (int(v) for v in rng.integers(1, 200, 2))
            img = rng.integers(0, 256, (h, w, channels), dtype=np.uint8)
            x0, y0 = rng.uniform(0, w), rng.uniform(0, h)
            box = (x0, y0, rng.uniform(x0, w), rng.uniform(y0, h))
            name = FILTERS[int(rng.integers(0, len(FILTERS)))]
            kernels._set_simd(True)
            fast = _kernel(img, oh, ow, name, box)
            kernels._set_simd(False)
            slow = _kernel(img, oh, ow, name, box)
            np.testing.assert_array_equal(fast, slow, err_msg=f"{img.shape} -> {(oh, ow)} {box} {name}")
    finally:
        kernels._set_simd(True)


def test_views_with_row_strides_match_pillow(simd):
    rng = np.random.default_rng(7)
    img = rng.integers(0, 256, (300, 400, 3), dtype=np.uint8)
    view = img[40:260, 30:350]  # rows strided, pixels contiguous
    for size in ((224, 224), (100, 300), (219, 319)):
        box = (2.5, 3.25, 301.75, 200.5)
        np.testing.assert_array_equal(
            _kernel(view, *size, "bilinear", box), _pillow(view, *size, "bilinear", box)
        )
    upside_down = img[::-1]
    np.testing.assert_array_equal(
        _kernel(upside_down, 150, 200, "bicubic", (0, 0, 400, 300)),
        _pillow(upside_down, 150, 200, "bicubic", (0, 0, 400, 300)),
    )


@pytest.mark.parametrize(
    ("src", "out", "box", "message"),
    [
        (np.zeros((4, 4, 3), np.uint8), np.zeros((2, 2, 3), np.uint8), (0, 0, 5, 4), "exceed"),
        (np.zeros((4, 4, 3), np.uint8), np.zeros((2, 2, 3), np.uint8), (-1, 0, 4, 4), "exceed"),
        (np.zeros((4, 4, 3), np.uint8), np.zeros((2, 2, 3), np.uint8), (3, 0, 2, 4), "empty"),
        (np.zeros((4, 4, 2), np.uint8), np.zeros((2, 2, 2), np.uint8), (0, 0, 4, 4), "1 or 3"),
        (np.zeros((4, 4, 3), np.float32), np.zeros((2, 2, 3), np.uint8), (0, 0, 4, 4), "uint8"),
        (np.zeros((4, 4, 3), np.uint8), np.zeros((2, 2, 1), np.uint8), (0, 0, 4, 4), "channels"),
        (np.zeros((4, 4, 3), np.uint8)[:, ::-1], np.zeros((2, 2, 3), np.uint8), (0, 0, 4, 4),
         "contiguous"),
    ],
)
def test_wrong_arguments_raise(src, out, box, message):
    with pytest.raises(ValueError, match=message):
        augment._kernels().resample(src, out, box, 1)


def test_unknown_filter_raises():
    with pytest.raises(ValueError, match="filter"):
        augment._kernels().resample(np.zeros((4, 4, 3), np.uint8), np.zeros((2, 2, 3), np.uint8),
                                    (0, 0, 4, 4), 9)


@pytest.mark.parametrize("aug", [RandomResizedCrop(56), RandomResizedCrop((40, 64), interpolation="lanczos"),
                                 Resize(48), Resize(30, interpolation="bicubic")])
def test_augmenters_give_pillows_pixels(aug, monkeypatch):
    """With and without the kernel, the augmenters return the same pixels."""
    rng = np.random.default_rng(3)
    images = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in ((120, 90), (77, 200))]
    images.append(images[0][::-1, ::-1])  # a flipped view is copied first
    for i, img in enumerate(images):
        fast = aug(img, np.random.default_rng(i))
        with monkeypatch.context() as m:
            m.setattr(augment, "_kernels", lambda: None)
            slow = aug(img, np.random.default_rng(i))
        np.testing.assert_array_equal(fast, slow)
