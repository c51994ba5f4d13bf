"""Region decoding (codec.decode_region, the libjpeg-turbo extension) and the crops that
plan the decode with it: the pixels equal a full decode's, exactly."""

from __future__ import annotations

import numpy as np
import pytest

simplejpeg = pytest.importorskip("simplejpeg")
pytest.importorskip("PIL")

from feedline.exceptions import DecodeError  # noqa: E402
from feedline.image import codec  # noqa: E402
from feedline.image.augment import (  # noqa: E402
    CenterCrop,
    Compose,
    HorizontalFlip,
    Normalize,
    RandomCrop,
    ToCHW,
)


def _photos(count: int, seed: int = 0) -> list[bytes]:
    """Crops of the photos scikit-learn ships, in the subsamplings cameras and encoders use."""
    from sklearn.datasets import load_sample_images

    rng = np.random.default_rng(seed)
    photos = load_sample_images().images
    out = []
    for k in range(count):
        photo = photos[k % 2]
        h, w = int(rng.integers(60, 427)), int(rng.integers(60, 640))
        y, x = int(rng.integers(0, 427 - h + 1)), int(rng.integers(0, 640 - w + 1))
        pixels = np.ascontiguousarray(photo[y : y + h, x : x + w])
        sub = ("420", "422", "444", "411", "440")[k % 5]
        out.append(simplejpeg.encode_jpeg(pixels, quality=85, colorsubsampling=sub))
    return out


@pytest.fixture(scope="module")
def photos() -> list[bytes]:
    return _photos(20)


def test_the_extension_is_built():
    """CI builds feedline.image._libjpeg (libjpeg-turbo's headers are on its machines);
    without it decode_region still works, by decoding whole images."""
    assert codec.region_decoding()


@pytest.mark.parametrize("scale", [1, 2, 4, 8])
@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_region_equals_full_decode(photos, scale, mode):
    rng = np.random.default_rng(scale)
    for jpeg in photos:
        full = codec.decode(jpeg, mode=mode) if scale == 1 else None
        if full is None:
            height, width, _ = codec.probe(jpeg)
            small = (-(-height // scale), -(-width // scale))
            full = codec.decode(jpeg, mode=mode, target_size=small)
            assert full.shape[:2] == small
        H, W = full.shape[:2]
        boxes = [(0, 0, H, W), (H - 1, W - 1, 1, 1), (0, W // 2, H, W - W // 2)]
        for _ in range(6):
            h, w = int(rng.integers(1, H + 1)), int(rng.integers(1, W + 1))
            boxes.append((int(rng.integers(0, H - h + 1)), int(rng.integers(0, W - w + 1)), h, w))
        for y, x, h, w in boxes:
            region = codec.decode_region(jpeg, (y, x, h, w), scale=scale, mode=mode)
            assert region.flags.c_contiguous and region.dtype == np.uint8
            np.testing.assert_array_equal(region, full[y : y + h, x : x + w],
                                          err_msg=f"box {(y, x, h, w)} at 1/{scale}")


def test_fallback_without_the_extension_gives_the_same_pixels(photos, monkeypatch):
    boxes = [(5, 7, 40, 50), (0, 0, 30, 20)]
    native = [codec.decode_region(jpeg, box) for jpeg in photos[:5] for box in boxes]
    monkeypatch.setattr(codec, "_region_decoder", lambda: None)
    assert not codec.region_decoding()
    fallback = [codec.decode_region(jpeg, box) for jpeg in photos[:5] for box in boxes]
    for a, b in zip(native, fallback):
        np.testing.assert_array_equal(a, b)


def test_other_formats_and_cmyk_cut_from_a_full_decode():
    import io

    from PIL import Image

    pixels = np.random.default_rng(1).integers(0, 256, (40, 60, 3), dtype=np.uint8)
    png = io.BytesIO()
    Image.fromarray(pixels).save(png, format="PNG")
    np.testing.assert_array_equal(codec.decode_region(png.getvalue(), (3, 4, 10, 20)),
                                  pixels[3:13, 4:24])
    with pytest.raises(ValueError, match="JPEG images only"):
        codec.decode_region(png.getvalue(), (0, 0, 5, 5), scale=2)
    cmyk = io.BytesIO()
    Image.fromarray(pixels).convert("CMYK").save(cmyk, format="JPEG", quality=95)
    full = codec.decode(cmyk.getvalue())
    np.testing.assert_array_equal(codec.decode_region(cmyk.getvalue(), (1, 2, 30, 40)),
                                  full[1:31, 2:42])


def test_bad_boxes_and_bad_data(photos):
    height, width, _ = codec.probe(photos[0])
    for box in [(-1, 0, 5, 5), (0, 0, 0, 5), (height - 4, 0, 5, 5), (0, width, 1, 1)]:
        with pytest.raises(ValueError, match="not inside"):
            codec.decode_region(photos[0], box)
    with pytest.raises(ValueError, match=r"\(y, x, height, width\)"):
        codec.decode_region(photos[0], (0, 0, 5))
    with pytest.raises(ValueError, match="`scale`"):
        codec.decode_region(photos[0], (0, 0, 5, 5), scale=3)
    truncated = photos[0][: len(photos[0]) // 3]
    # the region's rows are past the end of the data: strict decoding raises, naming it
    with pytest.raises(DecodeError, match=r"x\.rec: record 9: cannot decode image"):
        codec.decode_region(truncated, (height - 8, 0, 8, 8), path="x.rec", index=9)
    # a region above the damage decodes (what lies below is not read)
    top = codec.decode_region(truncated, (0, 0, 8, 8), strict=True)
    np.testing.assert_array_equal(top, codec.decode(photos[0])[:8, :8])
    with pytest.raises(DecodeError, match="exceeds the budget"):
        codec.decode_region(photos[0], (0, 0, 5, 5), max_pixels=100)


@pytest.mark.parametrize("crop", [RandomCrop, CenterCrop])
def test_planned_crops_are_bit_identical(photos, crop):
    aug = Compose([crop((48, 40)), HorizontalFlip(), Normalize(mean=120, std=50), ToCHW()])
    for i, jpeg in enumerate(photos):
        planned = aug.decode(jpeg, seed=4, epoch=1, index=i)
        exact = aug.decode(jpeg, seed=4, epoch=1, index=i, plan=False)
        np.testing.assert_array_equal(planned, exact)


def test_planned_crop_decodes_only_the_region(photos, monkeypatch):
    calls = []
    real = codec._probed_region

    def spy(buf, box, *args):
        calls.append(box)
        return real(buf, box, *args)

    monkeypatch.setattr(codec, "_probed_region", spy)
    monkeypatch.setattr(codec, "decode", None)  # a full decode would fail
    Compose([RandomCrop(32)]).decode(photos[0], seed=0)
    assert len(calls) == 1 and calls[0][2:] == (32, 32)


def test_region_decode_runs_threads_in_parallel(photos):
    """The extension releases the GIL: threads decoding at once give the same pixels."""
    from concurrent.futures import ThreadPoolExecutor

    jobs = [(jpeg, (1, 2, 50, 40)) for jpeg in photos if min(codec.probe(jpeg)[:2]) >= 60]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda job: codec.decode_region(*job), jobs * 3))
    for (jpeg, (y, x, h, w)), region in zip(jobs * 3, results):
        np.testing.assert_array_equal(region, codec.decode(jpeg)[y : y + h, x : x + w])
