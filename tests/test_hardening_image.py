"""Hardening of feedline.image.codec: a pixel budget read from the header refuses
decompression bombs before any pixel buffer is allocated."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest

simplejpeg = pytest.importorskip("simplejpeg")
Image = pytest.importorskip("PIL.Image")

from _hardening_util import run_limited  # noqa: E402
from feedline.exceptions import DecodeError  # noqa: E402
from feedline.image import codec  # noqa: E402
from feedline.image.codec import decode, set_max_pixels  # noqa: E402


def jpeg_claiming(height: int, width: int) -> bytes:
    """A tiny real JPEG whose SOF header is rewritten to claim ``height x width``."""
    data = bytearray(simplejpeg.encode_jpeg(np.zeros((8, 8, 3), np.uint8), quality=50))
    i = 2
    while i < len(data):
        marker = data[i + 1]
        seglen = struct.unpack(">H", data[i + 2 : i + 4])[0]
        if marker in (0xC0, 0xC1, 0xC2):
            data[i + 5 : i + 9] = struct.pack(">HH", height, width)
            return bytes(data)
        i += 2 + seglen
    raise AssertionError("no SOF marker")


def png_claiming(height: int, width: int) -> bytes:
    """A small PNG whose IHDR claims ``height x width`` (CRC fixed up) over a tiny IDAT."""
    buf = io.BytesIO()
    Image.new("RGB", (4, 4)).save(buf, format="PNG")
    data = bytearray(buf.getvalue())
    assert data[12:16] == b"IHDR"
    data[16:24] = struct.pack(">II", width, height)
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])))
    return bytes(data)


def test_jpeg_bomb_refused_with_path_and_record():
    bomb = jpeg_claiming(30000, 30000)
    assert len(bomb) < 1000
    with pytest.raises(DecodeError, match=r"train\.rec: record 4: image of 30000 x 30000 = 900000000 pixels exceeds the budget of 89478485"):
        decode(bomb, path="train.rec", index=4)


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")  # Pillow's own notice
def test_png_bomb_refused_even_when_not_strict():
    bomb = png_claiming(13000, 13000)
    with pytest.raises(DecodeError, match="image of 13000 x 13000 = 169000000 pixels exceeds"):
        decode(bomb, strict=False, path="a.png")


def test_per_call_budget_and_global_default():
    jpeg = simplejpeg.encode_jpeg(np.zeros((40, 50, 3), np.uint8))
    assert decode(jpeg, max_pixels=2000).shape == (40, 50, 3)
    with pytest.raises(DecodeError, match="2000 pixels exceeds the budget of 1999 pixels"):
        decode(jpeg, max_pixels=1999)
    png = io.BytesIO()
    Image.new("RGB", (50, 40)).save(png, format="PNG")
    with pytest.raises(DecodeError, match="exceeds the budget of 100 pixels"):
        decode(png.getvalue(), max_pixels=100)
    previous = set_max_pixels(1000)
    try:
        assert codec.MAX_PIXELS == 1000
        with pytest.raises(DecodeError, match="budget of 1000 pixels"):
            decode(jpeg)
        assert decode(jpeg, max_pixels=None).shape == (40, 50, 3)  # per call wins
    finally:
        set_max_pixels(previous)
    assert decode(jpeg).shape == (40, 50, 3)


def test_budget_validated():
    with pytest.raises(ValueError, match="`max_pixels` must be a positive int, got 0"):
        decode(b"\xff\xd8\xff", max_pixels=0)
    with pytest.raises(ValueError, match="`max_pixels` must be a positive int, got -5"):
        set_max_pixels(-5)


def test_bombs_stay_within_memory_bound():
    """Under a 512 MiB address-space allowance both bombs fail cleanly with DecodeError."""
    proc = run_limited(
        f"""
        import numpy, simplejpeg, PIL.Image
        from feedline.image.codec import decode
        from feedline.exceptions import DecodeError
        bombs = [{jpeg_claiming(30000, 30000)!r}, {jpeg_claiming(65500, 65500)!r},
                 {png_claiming(13000, 13000)!r}]
        decode(simplejpeg.encode_jpeg(numpy.zeros((8, 8, 3), numpy.uint8)))  # warm up
        limit()
        for bomb in bombs:
            try:
                decode(bomb, path="bomb")
            except DecodeError as exc:
                print("refused", exc)
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("refused bomb: image of") == 3, proc.stdout
