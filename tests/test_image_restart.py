"""JPEGs with restart markers (codec.add_restart_markers) and the spliced region decode
that uses them: lossless rewriting, exact pixels for every region and DCT scale, and
damaged files decoded as they are."""

from __future__ import annotations

import numpy as np
import pytest

simplejpeg = pytest.importorskip("simplejpeg")
pytest.importorskip("PIL")

from feedline.exceptions import DecodeError, FeedlineError  # noqa: E402
from feedline.image import codec  # noqa: E402
from feedline.image.augment import (  # noqa: E402
    Compose,
    HorizontalFlip,
    RandomResizedCrop,
    ToCHW,
)

SUBSAMPLINGS = ("420", "422", "444", "411", "440", "gray")


def _photo(height: int, width: int, seed: int) -> np.ndarray:
    from sklearn.datasets import load_sample_images

    rng = np.random.default_rng(seed)
    photo = load_sample_images().images[seed % 2]
    y, x = int(rng.integers(0, 427 - height + 1)), int(rng.integers(0, 640 - width + 1))
    return np.ascontiguousarray(photo[y : y + height, x : x + width])


def _progressive(pixels: np.ndarray) -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="JPEG", quality=80, progressive=True)
    return buf.getvalue()


def _jpeg(pixels: np.ndarray, sub: str, **kw) -> bytes:
    if sub == "gray":
        return simplejpeg.encode_jpeg(np.ascontiguousarray(pixels[..., :1]), quality=90,
                                      colorspace="GRAY", **kw)
    return simplejpeg.encode_jpeg(pixels, quality=90, colorsubsampling=sub, **kw)


@pytest.fixture(scope="module")
def native():
    if not codec.region_decoding():
        pytest.fail("feedline.image._libjpeg is not built (CI builds it)")
    return codec._region_decoder()


@pytest.fixture(params=[True, False], ids=["spliced", "plain"])
def splicing(request, native):
    """Runs a test with the splice on and off; on again after."""
    native._set_splicing(request.param)
    try:
        yield request.param
    finally:
        native._set_splicing(True)


@pytest.mark.parametrize("sub", SUBSAMPLINGS)
@pytest.mark.parametrize("interval", [8, 32, 1000])
def test_rewriting_is_lossless_and_lays_out_whole_rows(native, sub, interval):
    rng = np.random.default_rng(interval)
    for k in range(4):
        height, width = int(rng.integers(9, 300)), int(rng.integers(9, 400))
        jpeg = _jpeg(_photo(height, width, k), sub)
        marked = codec.add_restart_markers(jpeg, interval_pixels=interval)
        mode = "L" if sub == "gray" else "RGB"
        assert np.array_equal(codec.decode(marked, mode=mode), codec.decode(jpeg, mode=mode))
        assert not codec.has_restart_layout(jpeg)
        assert codec.has_restart_layout(marked)
        k_mcus, per_row, rows, mcu_h, mcu_w = native.restart_layout(marked)
        assert per_row == -(-width // mcu_w) and rows == -(-height // mcu_h)
        assert per_row % k_mcus == 0  # every MCU row starts an interval
        # the largest divisor of the row that spans at most `interval` pixels (at least 1)
        assert k_mcus == max(d for d in range(1, per_row + 1)
                             if per_row % d == 0 and (d == 1 or d * mcu_w <= interval))


def test_progressive_input_and_markers_are_kept(native):
    pixels = _photo(120, 200, 3)
    progressive = _progressive(pixels)
    exif = b"\xff\xe1" + (2 + 14).to_bytes(2, "big") + b"Exif\x00\x00feedline"
    comment = b"\xff\xfe" + (2 + 5).to_bytes(2, "big") + b"hello"
    assert b"\xff\xc2" in progressive  # SOF2: progressive
    with_markers = progressive[:2] + exif + comment + progressive[2:]
    marked = codec.add_restart_markers(with_markers)
    assert codec.has_restart_layout(marked)  # progressive in, baseline out
    assert np.array_equal(codec.decode(marked), codec.decode(progressive))
    assert exif in marked and comment in marked


@pytest.mark.parametrize("sub", SUBSAMPLINGS)
def test_region_of_a_marked_jpeg_equals_a_full_decode(splicing, sub):
    """Every region, at every DCT scale, spliced or not: the pixels of a full decode."""
    rng = np.random.default_rng(len(sub))
    mode = "L" if sub == "gray" else "RGB"
    for k in range(6):
        height, width = int(rng.integers(17, 427)), int(rng.integers(17, 640))
        jpeg = _jpeg(_photo(height, width, k), sub)
        marked = codec.add_restart_markers(jpeg, interval_pixels=int(rng.choice([8, 16, 64])))
        for scale in (1, 2, 4, 8):
            size = (-(-height // scale), -(-width // scale))
            full = codec.decode(jpeg, mode=mode, target_size=size if scale > 1 else None)
            assert full.shape[:2] == size
            for _ in range(8):
                h, w = int(rng.integers(1, size[0] + 1)), int(rng.integers(1, size[1] + 1))
                y, x = int(rng.integers(0, size[0] - h + 1)), int(rng.integers(0, size[1] - w + 1))
                region = codec.decode_region(marked, (y, x, h, w), scale=scale, mode=mode)
                assert np.array_equal(region, full[y : y + h, x : x + w]), (scale, (y, x, h, w))


def test_edges_and_single_pixels(splicing):
    """Regions at each corner and edge, one pixel wide, and the whole image."""
    jpeg = _jpeg(_photo(203, 301, 1), "420")
    marked = codec.add_restart_markers(jpeg, interval_pixels=16)
    full = codec.decode(jpeg)
    h, w = full.shape[:2]
    boxes = [(0, 0, 1, 1), (h - 1, w - 1, 1, 1), (0, w - 1, h, 1), (h - 1, 0, 1, w),
             (0, 0, h, w), (17, 33, 1, 1), (15, 15, 2, 2), (16, 16, 16, 16), (100, 0, 3, w)]
    for y, x, bh, bw in boxes:
        assert np.array_equal(codec.decode_region(marked, (y, x, bh, bw)),
                              full[y : y + bh, x : x + bw]), (y, x, bh, bw)


def test_planned_random_resized_crop_is_the_same_on_a_marked_jpeg():
    aug = Compose([RandomResizedCrop(64), HorizontalFlip(), ToCHW()])
    for k in range(8):
        jpeg = _jpeg(_photo(300, 420, k), "420")
        marked = codec.add_restart_markers(jpeg)
        for index in range(4):
            a = aug.decode(jpeg, seed=5, index=index)
            b = aug.decode(marked, seed=5, index=index)
            assert np.array_equal(a, b)


def _intervals(marked: bytes) -> list[int]:
    """Offsets of the RSTn markers in a marked JPEG's entropy-coded data."""
    start = marked.index(b"\xff\xda")
    return [i for i in range(start, len(marked) - 1)
            if marked[i] == 0xFF and 0xD0 <= marked[i + 1] <= 0xD7]


def test_a_damaged_marker_sequence_decodes_the_file_as_it_is(native):
    """A restart marker out of sequence or missing: no splice, libjpeg decodes the file
    as it is, spliced or not (the same pixels, or the same error)."""
    jpeg = _jpeg(_photo(160, 240, 2), "420")
    marked = codec.add_restart_markers(jpeg, interval_pixels=16)
    offsets = _intervals(marked)
    assert len(offsets) > 10
    wrong_number = bytearray(marked)
    wrong_number[offsets[3] + 1] = 0xD0 + (marked[offsets[3] + 1] - 0xD0 + 3) % 8
    missing = marked[: offsets[5]] + marked[offsets[5] + 2 :]
    for damaged in (bytes(wrong_number), missing):
        for strict in (True, False):
            results = []
            for on in (True, False):
                native._set_splicing(on)
                try:
                    results.append(codec.decode_region(damaged, (100, 150, 40, 60),
                                                       strict=strict, path="d.rec", index=4))
                except DecodeError as exc:
                    results.append(str(exc))
                finally:
                    native._set_splicing(True)
            if isinstance(results[0], str):
                assert results[0] == results[1]
                assert results[0].startswith("d.rec: record 4: cannot decode image")
            else:
                assert np.array_equal(results[0], results[1])


def test_corrupt_data_inside_a_spliced_interval_is_an_error():
    jpeg = _jpeg(_photo(160, 240, 4), "444")
    marked = bytearray(codec.add_restart_markers(jpeg, interval_pixels=16))
    offsets = _intervals(bytes(marked))
    at = offsets[len(offsets) // 2] - 6  # inside the interval before a marker mid-image
    marked[at : at + 4] = b"\xff\xd9\x00\x00"  # an EOI in the middle of the data
    with pytest.raises(DecodeError, match=r"bad\.rec: record 9: cannot decode image"):
        codec.decode(bytes(marked), path="bad.rec", index=9)
    with pytest.raises(DecodeError, match=r"bad\.rec: record 9: cannot decode image"):
        codec.decode_region(bytes(marked), (60, 0, 100, 240), path="bad.rec", index=9)


def test_bad_input_to_add_restart_markers():
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 20
    assert codec.add_restart_markers(png) == png  # not a JPEG: unchanged
    jpeg = _jpeg(_photo(40, 40, 0), "420")
    with pytest.raises(DecodeError, match=r"x\.jpg: record 3: cannot add restart markers"):
        codec.add_restart_markers(jpeg[: len(jpeg) // 2], path="x.jpg", index=3)
    with pytest.raises(ValueError, match="interval_pixels"):
        codec.add_restart_markers(jpeg, interval_pixels=0)


def test_without_the_extension(monkeypatch):
    jpeg = _jpeg(_photo(40, 40, 0), "420")
    marked = codec.add_restart_markers(jpeg)
    monkeypatch.setattr(codec, "_region_decoder", lambda: None)
    with pytest.raises(FeedlineError, match=r"feedline\.image\._libjpeg"):
        codec.add_restart_markers(jpeg)
    assert not codec.has_restart_layout(marked)
    assert np.array_equal(codec.decode_region(marked, (3, 5, 20, 30)),
                          codec.decode(jpeg)[3:23, 5:35])


def test_layout_rejects_what_it_cannot_splice(native):
    pixels = _photo(64, 64, 1)
    assert native.restart_layout(_progressive(pixels)) is None
    assert native.restart_layout(b"\xff\xd8\xff") is None
    assert native.restart_layout(b"") is None
    marked = codec.add_restart_markers(_jpeg(pixels, "420"))
    for cut in range(0, 200, 7):  # truncated headers: no layout, no crash
        native.restart_layout(marked[:cut])


def test_a_header_claiming_a_huge_frame_is_an_error_not_a_huge_index(native):
    """A marked JPEG whose frame header is edited to 60000 x 60000 pixels: far too few
    bytes for that many restart intervals, so no splice; libjpeg runs out of data."""
    marked = bytearray(codec.add_restart_markers(_jpeg(_photo(64, 64, 1), "420")))
    sof = marked.index(b"\xff\xc0") + 5  # height, width follow the precision byte
    marked[sof : sof + 4] = (60000).to_bytes(2, "big") * 2
    assert native.restart_layout(bytes(marked))[1:3] == (3750, 3750)
    with pytest.raises(DecodeError, match=r"big\.rec: record 1: cannot decode image"):
        codec.decode_region(bytes(marked), (30000, 30000, 8, 8), max_pixels=None,
                            path="big.rec", index=1)
