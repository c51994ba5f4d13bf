"""Issue 28 (hardening 3), the image and Example native paths: every valid JPEG sampling
decodes and agrees across decode, probe, decode_region, the planned augmenters and the
paths without the extension; mutated sampling bytes are a DecodeError, never a KeyError;
add_restart_markers has the pixel budget; decode_region's scale is exact without the
extension and for CMYK; the C Example encoder writes a bool as 1; the resampler's box is
checked in double precision."""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest

simplejpeg = pytest.importorskip("simplejpeg")
Image = pytest.importorskip("PIL.Image")

from _jpeg_sampling import jpeg_with_sampling  # noqa: E402
from feedline.exceptions import DecodeError  # noqa: E402
from feedline.image import EncodeOptions, codec  # noqa: E402
from feedline.image.augment import Compose, RandomResizedCrop  # noqa: E402

# valid samplings TurboJPEG does not name: 4:4:1 and 2x2/2x1/1x1 mixtures, chroma finer than luma
UNUSUAL = [
    ((1, 4), (1, 1), (1, 1)),
    ((2, 2), (2, 1), (1, 1)),
    ((2, 1), (1, 2), (1, 1)),
    ((1, 1), (2, 2), (1, 1)),
    ((4, 2), (1, 1), (1, 1)),
    ((3, 1), (1, 1), (1, 1)),
]


@pytest.fixture(params=[True, False], ids=["extension", "fallback"])
def native(request, monkeypatch):
    """Run a test with the region extension and again without it (Pillow's libjpeg)."""
    if request.param:
        codec.require_region_decoding("these tests")
    else:
        monkeypatch.setattr(codec, "_region_decoder", lambda: None)
    return request.param


def _sof(data: bytes) -> int:
    i = data.index(b"\xff\xc0")
    return i + 4  # offset of the sample precision byte


@pytest.mark.parametrize("sampling", UNUSUAL, ids=lambda s: "".join(f"{h}{v}" for h, v in s))
def test_every_valid_sampling_decodes_and_all_paths_agree(sampling, native):
    jpeg = jpeg_with_sampling(37, 53, sampling, seed=3)
    reference = np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB"))
    assert codec.probe(jpeg) == (37, 53, "jpeg")
    full = codec.decode(jpeg)
    np.testing.assert_array_equal(full, reference)
    np.testing.assert_array_equal(codec.decode_region(jpeg, (3, 5, 30, 40)), full[3:33, 5:45])
    grey = codec.decode(jpeg, mode="L")
    np.testing.assert_array_equal(codec.decode_region(jpeg, (1, 2, 9, 9), mode="L"),
                                  grey[1:10, 2:11])
    for scale in (2, 4, 8):
        small = codec.decode(jpeg, target_size=(-(-37 // scale), -(-53 // scale)))
        assert small.shape == (-(-37 // scale), -(-53 // scale), 3)
        np.testing.assert_array_equal(
            codec.decode_region(jpeg, (0, 0) + small.shape[:2], scale=scale), small)
    rrc = Compose([RandomResizedCrop(32)])  # boxes under 64 px: no DCT reduction, exact
    np.testing.assert_array_equal(rrc.decode(jpeg, seed=5), rrc.decode(jpeg, seed=5, plan=False))


def test_mutated_sampling_bytes_raise_decode_error_only():
    """3,600 of 100,000 fuzz inputs raised a bare KeyError; here every luma sampling byte
    (and every fifth chroma one) of a 4:2:0 JPEG: pixels or a DecodeError from every path."""
    base = simplejpeg.encode_jpeg(
        np.random.default_rng(0).integers(0, 255, (24, 40, 3), dtype=np.uint8),
        quality=90, colorsubsampling="420")
    at = _sof(base) + 6
    rrc = Compose([RandomResizedCrop(16)])
    outcomes = set()
    for component in range(3):
        for value in range(256) if component == 0 else range(0, 256, 5):
            data = bytearray(base)
            data[at + 3 * component + 1] = value
            data = bytes(data)
            for call, kwargs in ((codec.decode, {"strict": False}),
                                 (codec.decode, {"min_side": 4}),
                                 (codec.decode_region, {"box": (0, 0, 8, 8), "strict": False}),
                                 (codec.probe, {}),
                                 (rrc.decode, {"seed": 1}),
                                 (rrc.decode, {"seed": 1, "plan": False})):
                try:
                    call(data, **kwargs)
                    outcomes.add("decoded")
                except DecodeError:
                    outcomes.add("DecodeError")
    assert outcomes == {"decoded", "DecodeError"}


def test_record_iter_skips_an_image_with_bad_sampling(tmp_path):
    from feedline import recordio
    from feedline.image.record_iter import ImageRecordIter

    good = simplejpeg.encode_jpeg(np.full((8, 8, 3), 90, np.uint8), quality=90)
    bad = bytearray(good)
    bad[_sof(good) + 7] = 0x14  # 4:4:1 sampling over 4:4:4 data: was a KeyError, not skipped
    rec, idx = str(tmp_path / "s.rec"), str(tmp_path / "s.idx")
    with recordio.IndexedRecordIO(idx, rec, "w") as w:
        for i, payload in enumerate([good, bytes(bad), good]):
            w.write_idx(i, recordio.pack(recordio.IRHeader(0, float(i), i, 0), payload))
    kw = dict(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=2, preprocess_threads=0,
              round_batch=False)
    with pytest.raises(DecodeError, match=r"s\.rec: record 1: "):
        list(ImageRecordIter(**kw))
    with ImageRecordIter(on_error="skip", **kw) as it:
        labels = {float(v) for b in it for v in b.label[0]}
        assert labels == {0.0, 2.0} and it.skipped == 1


def _claiming(height: int, width: int) -> bytes:
    data = bytearray(simplejpeg.encode_jpeg(np.zeros((8, 8, 3), np.uint8), quality=50))
    data[_sof(data) + 1 : _sof(data) + 5] = struct.pack(">HH", height, width)
    return bytes(data)


def test_add_restart_markers_has_the_pixel_budget(tmp_path):
    codec.require_region_decoding("add_restart_markers")
    bomb = _claiming(16000, 16000)
    with pytest.raises(DecodeError, match=r"b\.jpg: image of 16000 x 16000 = 256000000 pixels "
                                          r"exceeds the budget of 89478485"):
        codec.add_restart_markers(bomb, path="b.jpg")
    small = simplejpeg.encode_jpeg(np.zeros((40, 40, 3), np.uint8))
    with pytest.raises(DecodeError, match="exceeds the budget of 1000 pixels"):
        codec.add_restart_markers(small, max_pixels=1000)
    assert codec.has_restart_layout(codec.add_restart_markers(small, max_pixels=None))
    with pytest.raises(ValueError, match="`max_pixels` must be"):
        codec.add_restart_markers(small, max_pixels=0)
    # pack --restart-markers goes through it: the bomb is refused (or skipped), never decoded
    from feedline.image.pack import pack_images

    (tmp_path / "img" / "a").mkdir(parents=True)
    (tmp_path / "img" / "a" / "bomb.jpg").write_bytes(bomb)
    (tmp_path / "img" / "a" / "ok.jpg").write_bytes(small)
    with pytest.raises(DecodeError, match="exceeds the budget"):
        pack_images(tmp_path / "img", tmp_path / "out", encode=EncodeOptions(pass_through=True, restart_markers=True))
    result = pack_images(tmp_path / "img", tmp_path / "out2", encode=EncodeOptions(pass_through=True, restart_markers=True), on_error="skip")
    assert result.count == 1


def test_region_scale_is_exact_without_the_extension_on_tiny_images(monkeypatch):
    """The fallback decoded images smaller than the scale at 1/8 instead of 1/scale."""
    native = codec.require_region_decoding("this test")
    cases = []
    for height, width in [(1, 3), (2, 1), (3, 3), (2, 2), (5, 7), (9, 4)]:
        pixels = np.random.default_rng(height * 10 + width).integers(
            0, 255, (height, width, 3), dtype=np.uint8)
        for sub in ("444", "420"):
            cases.append(simplejpeg.encode_jpeg(pixels, quality=90, colorsubsampling=sub))
    for jpeg in cases:
        height, width, _ = codec.probe(jpeg)
        for scale in (2, 4, 8):
            for mode in ("RGB", "L"):
                dims = (-(-height // scale), -(-width // scale))
                out = np.empty(dims + (codec.MODES[mode],), np.uint8)
                native.decode_region(jpeg, out, 0, 0, dims[0], dims[1], scale, mode == "L",
                                     False, True)
                with monkeypatch.context() as m:
                    m.setattr(codec, "_region_decoder", lambda: None)
                    got = codec.decode_region(jpeg, (0, 0) + dims, scale=scale, mode=mode)
                np.testing.assert_array_equal(got, out, err_msg=f"{height}x{width} 1/{scale} {mode}")


def test_cmyk_regions_in_both_modes_and_at_every_scale():
    pixels = np.random.default_rng(1).integers(0, 255, (21, 30, 4), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels, "CMYK").save(buf, "JPEG", quality=95)
    jpeg = buf.getvalue()
    for mode in ("RGB", "L"):
        full = codec.decode(jpeg, mode=mode)
        np.testing.assert_array_equal(codec.decode_region(jpeg, (2, 3, 10, 12), mode=mode),
                                      full[2:12, 3:15])
    for scale in (2, 4, 8):
        dims = (-(-21 // scale), -(-30 // scale))
        assert codec.decode_region(jpeg, (0, 0) + dims, scale=scale).shape == dims + (3,)
    tiny = io.BytesIO()
    Image.fromarray(pixels[:2, :3], "CMYK").save(tiny, "JPEG", quality=95)
    at = [codec.decode_region(tiny.getvalue(), (0, 0, 1, 1), scale=s) for s in (2, 4, 8)]
    assert not np.array_equal(at[0], at[2])  # 1/2 is not 1/8


def test_c_example_encoder_writes_bools_as_one():
    from feedline.formats.example import _native
    from feedline.formats.example import codec as excodec

    raw = np.frombuffer(bytes([0, 255, 7, 1]), dtype=np.bool_)  # bools held by any byte
    compiled = excodec.encode_example({"b": raw})
    python = None
    saved = _native.extension
    try:
        _native.extension = lambda: None
        python = excodec.encode_example({"b": raw})
    finally:
        _native.extension = saved
    assert compiled == python
    assert excodec.decode_example(compiled)["b"].tolist() == [0, 1, 1, 1]


def test_resample_box_checked_in_double_precision():
    kernels = pytest.importorskip("feedline.image._kernels")
    src = np.zeros((20, 30, 3), np.uint8)
    dst = np.zeros((10, 10, 3), np.uint8)
    for box in [(0, 0, 30 + 1e-7, 20), (0, 0, 30, 20 + 1e-9), (-1e-9, 0, 30, 20),
                (float("nan"), 0, 30, 20), (0, float("nan"), 30, 20), (0, 0, float("nan"), 20),
                (0, 0, 30, float("inf")), (5, 0, 4, 20), (0, 0, 1e300, 20)]:
        with pytest.raises(ValueError, match="box"):
            kernels.resample(src, dst, box, 1)
    kernels.resample(src, dst, (0.5, 0.25, 29.5, 19.75), 1)  # fractional, inside: fine
