"""feedline.image.codec: decode JPEG via libjpeg-turbo, other formats via Pillow, errors named."""

from __future__ import annotations

import io
import pathlib
import pickle

import numpy as np
import pytest

pytest.importorskip("simplejpeg")
Image = pytest.importorskip("PIL.Image")
sklearn_datasets = pytest.importorskip("sklearn.datasets")

from feedline.exceptions import DecodeError  # noqa: E402
from feedline.image.codec import decode, image_format, probe  # noqa: E402

PHOTOS = pathlib.Path(sklearn_datasets.__file__).parent / "images"


@pytest.fixture(scope="module")
def china_jpeg() -> bytes:
    """A real 640x427 photograph as its original JPEG bytes."""
    return (PHOTOS / "china.jpg").read_bytes()


@pytest.fixture(scope="module")
def flower_rgb() -> np.ndarray:
    with Image.open(PHOTOS / "flower.jpg") as im:
        return np.array(im.convert("RGB"))[100:260, 200:440]  # 160 x 240


def _png(arr: np.ndarray, mode: str | None = None) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr, mode=mode).save(buf, format="PNG")
    return buf.getvalue()


def test_jpeg_matches_pillow_decode(china_jpeg):
    out = decode(china_jpeg)
    with Image.open(io.BytesIO(china_jpeg)) as im:
        ref = np.array(im.convert("RGB"))
    assert out.shape == (427, 640, 3) and out.dtype == np.uint8
    assert out.flags.c_contiguous and out.flags.writeable
    # both are libjpeg(-turbo) decodes; allow a level for different IDCT/upsampling builds
    assert np.abs(out.astype(int) - ref.astype(int)).max() <= 2
    assert image_format(china_jpeg) == "jpeg"


def test_jpeg_grayscale(china_jpeg):
    out = decode(china_jpeg, mode="L")
    rgb = decode(china_jpeg).astype(np.float64)
    luma = rgb @ np.array([0.299, 0.587, 0.114])
    assert out.shape == (427, 640, 1)
    assert np.abs(out[:, :, 0] - luma).mean() < 1.5


@pytest.mark.parametrize(
    ("kwargs", "shape"),
    [
        ({"min_side": 427}, (427, 640, 3)),  # no reduction possible
        ({"min_side": 500}, (427, 640, 3)),  # larger than the image: full size
        ({"min_side": 200}, (214, 320, 3)),  # 1/2
        ({"min_side": 100}, (107, 160, 3)),  # 1/4
        ({"min_side": 10}, (54, 80, 3)),  # 1/8 is the smallest
        ({"target_size": (100, 300)}, (214, 320, 3)),  # width needs 1/2
        ({"target_size": (100, 150)}, (107, 160, 3)),
    ],
)
def test_reduced_size_jpeg_decode(china_jpeg, kwargs, shape):
    out = decode(china_jpeg, **kwargs)
    assert out.shape == shape
    if shape[0] < 427:
        # a scaled decode is close to an averaged full decode
        factor = {214: 2, 107: 4, 54: 8}[shape[0]]
        full = decode(china_jpeg).astype(np.float64)
        h, w = (427 // factor) * factor, (640 // factor) * factor
        pooled = full[:h, :w].reshape(h // factor, factor, w // factor, factor, 3).mean((1, 3))
        assert np.abs(out[: h // factor, : w // factor] - pooled).mean() < 6


def test_portrait_min_side_uses_width(china_jpeg):
    import simplejpeg

    portrait = simplejpeg.encode_jpeg(np.ascontiguousarray(decode(china_jpeg)[:, :300]), 90)
    assert decode(portrait, min_side=150).shape == (214, 150, 3)
    assert decode(portrait, min_side=151).shape == (427, 300, 3)


def test_fast_decode_is_close(china_jpeg):
    fast = decode(china_jpeg, fast=True).astype(int)
    assert fast.shape == (427, 640, 3)
    assert np.abs(fast - decode(china_jpeg).astype(int)).mean() < 2.0


@pytest.mark.parametrize("buf_type", [bytes, bytearray, memoryview, "array"])
def test_bytes_like_inputs(china_jpeg, flower_rgb, buf_type):
    png = _png(flower_rgb)
    for data, shape in ((china_jpeg, (427, 640, 3)), (png, (160, 240, 3))):
        buf = np.frombuffer(data, np.uint8) if buf_type == "array" else buf_type(data)
        assert decode(buf).shape == shape


def test_png_rgb_round_trip_is_exact(flower_rgb):
    png = _png(flower_rgb)
    assert image_format(png) == "png"
    out = decode(png)
    np.testing.assert_array_equal(out, flower_rgb)
    # size hints only apply to JPEG
    np.testing.assert_array_equal(decode(png, min_side=20), flower_rgb)


def test_png_grayscale_and_conversions(flower_rgb):
    gray = np.ascontiguousarray(flower_rgb[:, :, 1])
    png = _png(gray)
    np.testing.assert_array_equal(decode(png, mode="L")[:, :, 0], gray)
    rgb = decode(png)
    assert rgb.shape == (160, 240, 3)
    for c in range(3):
        np.testing.assert_array_equal(rgb[:, :, c], gray)
    # RGB PNG to grayscale goes through Pillow's ITU-R 601-2 luma
    expected = np.array(Image.fromarray(flower_rgb).convert("L"))
    np.testing.assert_array_equal(decode(_png(flower_rgb), mode="L")[:, :, 0], expected)


def test_png_alpha_is_dropped_and_palette_expanded(flower_rgb):
    rgba = np.dstack([flower_rgb, np.full(flower_rgb.shape[:2], 128, np.uint8)])
    np.testing.assert_array_equal(decode(_png(rgba)), flower_rgb)
    pal = Image.fromarray(flower_rgb).quantize(16)
    buf = io.BytesIO()
    pal.save(buf, format="PNG")
    np.testing.assert_array_equal(decode(buf.getvalue()), np.array(pal.convert("RGB")))


def test_16_bit_grayscale_png_keeps_high_byte():
    wide = (np.arange(64 * 32, dtype=np.uint16).reshape(32, 64) * 31).astype(np.uint16)
    buf = io.BytesIO()
    Image.fromarray(wide).save(buf, format="PNG")
    out = decode(buf.getvalue(), mode="L")
    np.testing.assert_array_equal(out[:, :, 0], (wide >> 8).astype(np.uint8))
    assert decode(buf.getvalue()).shape == (32, 64, 3)


def test_other_formats_through_pillow(flower_rgb):
    buf = io.BytesIO()
    Image.fromarray(flower_rgb).save(buf, format="BMP")
    assert image_format(buf.getvalue()) == "bmp"
    np.testing.assert_array_equal(decode(buf.getvalue()), flower_rgb)


def test_probe(china_jpeg, flower_rgb):
    assert probe(china_jpeg) == (427, 640, "jpeg")
    assert probe(_png(flower_rgb)) == (160, 240, "png")
    with pytest.raises(DecodeError, match=r"^x\.rec: record 2: cannot read image header"):
        probe(b"garbage!", path="x.rec", index=2)


def test_truncated_jpeg_names_the_record(china_jpeg):
    with pytest.raises(DecodeError, match=r"^train\.rec: record 12: cannot decode image: ") as info:
        decode(china_jpeg[: len(china_jpeg) // 2], path="train.rec", index=12)
    err = info.value
    assert isinstance(err, ValueError)
    assert (err.path, err.index) == ("train.rec", 12)
    again = pickle.loads(pickle.dumps(err))  # crosses worker processes intact
    assert type(again) is DecodeError and str(again) == str(err)


def test_corrupt_jpeg_body_raises(china_jpeg):
    data = bytearray(china_jpeg)
    start = len(data) // 3
    data[start : start + 2] = b"\xff\xd9"  # an end-of-image marker inside the scan
    data = bytes(data)
    with pytest.raises(DecodeError, match=r"^record 4: cannot decode image: Corrupt JPEG data"):
        decode(data, index=4)
    # strict=False recovers what libjpeg-turbo can (like OpenCV): the top rows survive
    out = decode(data, strict=False)
    assert out.shape == (427, 640, 3)
    np.testing.assert_array_equal(out[:16], decode(china_jpeg)[:16])


def test_garbage_and_empty_payloads():
    with pytest.raises(DecodeError, match=r"unknown image format \(starts with b'hello wo'\)"):
        decode(b"hello world")
    with pytest.raises(DecodeError, match=r"^a\.tfrecord: record 0: cannot decode image: empty payload"):
        decode(b"", path="a.tfrecord", index=0)
    with pytest.raises(DecodeError, match=r"cannot decode image"):
        decode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 20)


def test_argument_validation(china_jpeg):
    with pytest.raises(ValueError, match=r"`mode` must be one of 'RGB', 'L', got 'BGR'"):
        decode(china_jpeg, mode="BGR")
    with pytest.raises(ValueError, match=r"`min_side` must be a positive int, got 0"):
        decode(china_jpeg, min_side=0)
    with pytest.raises(ValueError, match=r"give at most one of `min_side` and `target_size`"):
        decode(china_jpeg, min_side=10, target_size=(10, 10))
    with pytest.raises(ValueError, match=r"`target_size` must be a \(height, width\) pair"):
        decode(china_jpeg, target_size=10)
    with pytest.raises(ValueError, match=r"`target_size\[1\]` must be a positive int, got -1"):
        decode(china_jpeg, target_size=(10, -1))
    with pytest.raises(TypeError, match=r"`buf` must be bytes-like, got str"):
        decode("china.jpg")
    with pytest.raises(TypeError, match=r"`buf` must be bytes or a 1-D uint8 array"):
        decode(np.zeros((2, 2), np.uint8))


def test_decodes_mxnet_packed_images_like_opencv(fixtures_dir):
    """images.rec was written by MXNet's pack_img; expected.json has what OpenCV decoded."""
    import hashlib
    import json

    from feedline import recordio

    expected = json.loads((fixtures_dir / "mxnet" / "expected.json").read_text())["images.rec"]
    reader = recordio.IndexedRecordIO(
        fixtures_dir / "mxnet" / "images.idx", fixtures_dir / "mxnet" / "images.rec", "r"
    )
    formats = set()
    for rec in expected["records"]:
        header, payload = recordio.unpack(reader.read_idx(rec["key"]))
        assert header.id == rec["id"]
        img = decode(payload)
        assert list(img.shape) == rec["decoded_shape_hwc"]
        formats.add(rec["format"])
        if rec["format"] == "png":
            assert hashlib.sha256(img.tobytes()).hexdigest() == rec["decoded_rgb_sha256"]
        else:
            assert abs(float(img.mean()) - rec["decoded_rgb_mean"]) < 1.0
    reader.close()
    assert formats == {"jpg", "png"}
