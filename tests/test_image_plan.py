"""Decode planning: Compose.decode (RandomResizedCrop -> DCT-scaled decode) and
codec.dct_reduction, against the exact full-decode-then-crop-and-resize path."""

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
    RandomResizedCrop,
    Resize,
    ToCHW,
    make_rng,
)

#: documented tolerance (Compose.decode, docs/guides/images.md): mean absolute difference
#: per pixel and channel, in levels of 255
MEAN_TOLERANCE = 1.5
PER_IMAGE_TOLERANCE = 4.0


@pytest.fixture(scope="module")
def corpus() -> list[bytes]:
    """Real photos (scikit-learn's china and flower), cut and rescaled like the benchmark
    corpus (benchmarks/make_images.py) but larger, so that crops allow reduced decodes."""
    from PIL import Image
    from sklearn.datasets import load_sample_images

    rng = np.random.default_rng(0)
    out = []
    for k in range(12):
        photo = load_sample_images().images[k % 2]
        h = int(rng.integers(300, 428))
        w = int(rng.integers(400, 641))
        y = int(rng.integers(0, 427 - h + 1))
        x = int(rng.integers(0, 640 - w + 1))
        crop = Image.fromarray(np.ascontiguousarray(photo[y : y + h, x : x + w]))
        width = int(rng.integers(400, 1200))
        crop = crop.resize((width, max(1, round(h * width / w))), Image.Resampling.BILINEAR)
        out.append(simplejpeg.encode_jpeg(np.asarray(crop), quality=90))
    return out


@pytest.fixture
def decoded_sizes(monkeypatch) -> list[tuple[int, int]]:
    """Spy: the (height, width) of the image each call of codec.decode returns, or that
    codec.decode_region (or the planners' codec._probed_region) works in (the whole image
    at its ``scale``)."""
    sizes: list[tuple[int, int]] = []
    real, real_region, real_probed = codec.decode, codec.decode_region, codec._probed_region

    def spy(*args, **kwargs):
        img = real(*args, **kwargs)
        sizes.append(img.shape[:2])
        return img

    def spy_region(buf, box, *, scale=1, **kwargs):
        height, width, _ = codec.probe(buf)
        sizes.append((-(-height // scale), -(-width // scale)))
        with monkeypatch.context() as inner:  # its own fallback decode is not counted
            inner.setattr(codec, "decode", real)
            return real_region(buf, box, scale=scale, **kwargs)

    def spy_probed(buf, box, scale, mode, height, width, path, index):
        sizes.append((-(-height // scale), -(-width // scale)))
        with monkeypatch.context() as inner:  # its own fallback decode is not counted
            inner.setattr(codec, "decode", real)
            inner.setattr(codec, "decode_region", real_region)
            return real_probed(buf, box, scale, mode, height, width, path, index)

    monkeypatch.setattr(codec, "decode", spy)
    monkeypatch.setattr(codec, "decode_region", spy_region)
    monkeypatch.setattr(codec, "_probed_region", spy_probed)
    return sizes


@pytest.mark.parametrize(
    ("region", "size", "denom"),
    [
        ((447, 1000), (224, 224), 1),  # height allows no half
        ((448, 448), (224, 224), 2),
        ((895, 900), (224, 224), 2),
        ((896, 896), (224, 224), 4),
        ((5000, 5000), (224, 224), 8),  # 1/8 is the smallest scale
        ((100, 40), (10, 20), 2),
        ((3, 3), (5, 5), 1),  # smaller than the output: never reduce
    ],
)
def test_dct_reduction(region, size, denom):
    assert codec.dct_reduction(region, size) == denom


def test_planned_decode_within_tolerance_of_full_decode(corpus, decoded_sizes):
    aug = Compose([RandomResizedCrop(96), HorizontalFlip()])
    mads = []
    reduced = 0
    for i, jpeg in enumerate(corpus):
        height, width, _ = codec.probe(jpeg)
        for epoch in range(4):
            decoded_sizes.clear()
            planned = aug.decode(jpeg, seed=3, epoch=epoch, index=i)
            if decoded_sizes[0] != (height, width):
                reduced += 1
            exact = aug.decode(jpeg, seed=3, epoch=epoch, index=i, plan=False)
            assert decoded_sizes[-1] == (height, width)  # the old path decodes in full
            assert planned.shape == exact.shape == (96, 96, 3)
            mads.append(float(np.abs(planned.astype(np.int16) - exact).mean()))
    # most boxes of these photos are >= 192 px: most decodes must have been reduced
    assert reduced >= len(mads) // 2
    assert np.mean(mads) <= MEAN_TOLERANCE, mads
    assert max(mads) <= PER_IMAGE_TOLERANCE, mads


def test_same_box_with_and_without_plan(corpus):
    """Planning draws the same random numbers: a uniform image comes out the same, and
    the draws after the crop (the flip) are the same."""
    flat = simplejpeg.encode_jpeg(np.full((900, 1000, 3), 77, np.uint8), quality=95)
    aug = Compose([RandomResizedCrop(64), HorizontalFlip()])
    for index in range(5):
        a = aug.decode(flat, seed=1, index=index)
        b = aug.decode(flat, seed=1, index=index, plan=False)
        assert np.abs(a.astype(int) - b).max() <= 1
    # a left-right ramp shows the flip: planned and exact agree on its direction
    ramp = np.tile(np.linspace(0, 255, 1000).astype(np.uint8)[None, :, None], (900, 1, 3))
    jpeg = simplejpeg.encode_jpeg(ramp, quality=95)
    for index in range(8):
        a = aug.decode(jpeg, seed=2, index=index).astype(int)
        b = aug.decode(jpeg, seed=2, index=index, plan=False).astype(int)
        assert np.sign(a[:, -1].mean() - a[:, 0].mean()) == np.sign(b[:, -1].mean() - b[:, 0].mean())
        assert np.abs(a - b).mean() <= MEAN_TOLERANCE


def test_no_reduction_is_bit_identical(decoded_sizes):
    """When the crop box is smaller than twice the output, the planned path is the old one."""
    rng = np.random.default_rng(5)
    img = rng.integers(0, 256, (120, 160, 3), dtype=np.uint8)
    jpeg = simplejpeg.encode_jpeg(img, quality=90)
    aug = Compose([RandomResizedCrop(100), HorizontalFlip(), Normalize(mean=120, std=50), ToCHW()])
    for index in range(6):
        out = np.empty((3, 100, 100), np.float32)
        planned = aug.decode(jpeg, seed=0, index=index, out=out)
        assert planned is out
        exact = aug(codec.decode(jpeg), seed=0, index=index)
        np.testing.assert_array_equal(planned, exact)
    assert set(decoded_sizes) == {(120, 160)}


def test_grayscale_and_float_chain(corpus, decoded_sizes):
    aug = Compose([RandomResizedCrop((40, 50), scale=(0.5, 1.0)), Normalize(0, 1), ToCHW()])
    planned = aug.decode(corpus[0], mode="L", seed=0, index=0)
    exact = aug.decode(corpus[0], mode="L", seed=0, index=0, plan=False)
    assert planned.shape == exact.shape == (1, 40, 50)
    assert planned.dtype == np.float32
    assert decoded_sizes[0][0] < decoded_sizes[1][0]  # the planned decode was reduced
    assert float(np.abs(planned - exact).mean()) <= MEAN_TOLERANCE


def test_other_chains_and_formats_decode_as_before(corpus, decoded_sizes):
    import io

    from PIL import Image

    # Resize first: the old min_side hint, same result with and without plan
    aug = Compose([Resize(100), CenterCrop(90)])
    np.testing.assert_array_equal(
        aug.decode(corpus[1]), aug.decode(corpus[1], plan=False)
    )
    # PNG: no DCT scaling, planned == exact
    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (300, 300, 3), np.uint8)).save(
        buf, format="PNG"
    )
    rrc = Compose([RandomResizedCrop(32)])
    np.testing.assert_array_equal(
        rrc.decode(buf.getvalue(), seed=4), rrc.decode(buf.getvalue(), seed=4, plan=False)
    )


def test_errors_name_the_record():
    aug = Compose([RandomResizedCrop(32)])
    with pytest.raises(DecodeError, match=r"a\.rec: record 4: cannot read image header"):
        aug.decode(b"\xff\xd8\xff garbage", path="a.rec", record=4)
    small = simplejpeg.encode_jpeg(np.zeros((20, 20, 3), np.uint8))
    with pytest.raises(DecodeError, match=r"a\.rec: record 2: cannot augment image of shape "
                                          r"\(20, 20, 3\): .*smaller than the crop 30x30"):
        Compose([CenterCrop(30)]).decode(small, path="a.rec", record=2)


def test_tolerance_over_the_benchmark_corpus(tmp_path):
    """The benchmark corpus itself (benchmarks/make_images.py: 400-520 px crops of real
    photos), with outputs small enough for its crop boxes to be decoded at reduced scale."""
    import pathlib
    import sys

    bench = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"
    sys.path.insert(0, str(bench))
    try:
        import make_images
    finally:
        sys.path.remove(str(bench))
    make_images.build(tmp_path / "images", 16, seed=0)
    files = sorted((tmp_path / "images").glob("*/*.jpg"))
    assert len(files) == 16
    for size in (112, 64):
        aug = Compose([RandomResizedCrop(size), HorizontalFlip()])
        mads, reduced = [], 0
        for i, path in enumerate(files):
            data = path.read_bytes()
            height, width, _ = codec.probe(data)
            box = aug.augmenters[0].box(height, width, make_rng(0, 0, i))
            reduced += codec.dct_reduction(box[2:], (size, size)) > 1
            planned = aug.decode(data, seed=0, index=i).astype(np.int16)
            exact = aug.decode(data, seed=0, index=i, plan=False)
            mads.append(float(np.abs(planned - exact).mean()))
        assert reduced > 0
        assert np.mean(mads) <= MEAN_TOLERANCE, (size, mads)
        assert max(mads) <= PER_IMAGE_TOLERANCE, (size, mads)
