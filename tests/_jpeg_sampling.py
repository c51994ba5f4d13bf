"""A tiny baseline JPEG writer for tests: any sampling factors, 3 interleaved components.

Every 8x8 block is flat (only its DC coefficient is coded), so the pixels vary from block
to block and the chroma planes have the resolution their sampling factors give them; that
is enough to exercise header parsing, upsampling and region decoding of samplings that
common encoders do not write (4:4:1, a 2x2 luma with 2x1/1x1 chroma, chroma finer than
luma...). The output is a valid JPEG that libjpeg decodes without a warning.
"""

from __future__ import annotations

import struct

import numpy as np

_DC_BITS = [0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0]  # the standard DC luminance table
_DC_VALS = list(range(12))


def _codes(bits: list[int], vals: list[int]) -> dict[int, tuple[int, int]]:
    codes, code, k = {}, 0, 0
    for length, count in enumerate(bits, start=1):
        for _ in range(count):
            codes[vals[k]] = (code, length)
            code += 1
            k += 1
        code <<= 1
    return codes


def _segment(marker: int, payload: bytes) -> bytes:
    return struct.pack(">BBH", 0xFF, marker, len(payload) + 2) + payload


def jpeg_with_sampling(height: int, width: int, sampling: tuple[tuple[int, int], ...],
                       seed: int = 0) -> bytes:
    """A JPEG of ``height`` x ``width`` pixels whose components (Y, Cb, Cr) have the
    ``(h, v)`` sampling factors ``sampling``; block levels drawn from ``seed``."""
    assert len(sampling) == 3 and sum(h * v for h, v in sampling) <= 10
    hmax = max(h for h, _ in sampling)
    vmax = max(v for _, v in sampling)
    mcus_x = -(-width // (8 * hmax))
    mcus_y = -(-height // (8 * vmax))
    rng = np.random.default_rng(seed)
    dc = {c: rng.integers(-50, 51, (mcus_y * v, mcus_x * h)) for c, (h, v) in enumerate(sampling)}
    dc_codes = _codes(_DC_BITS, _DC_VALS)
    bits: list[int] = []

    def put(value: int, n: int) -> None:
        bits.extend((value >> (n - 1 - i)) & 1 for i in range(n))

    pred = [0, 0, 0]
    for my in range(mcus_y):
        for mx in range(mcus_x):
            for c, (h, v) in enumerate(sampling):
                for by in range(v):
                    for bx in range(h):
                        value = int(dc[c][my * v + by, mx * h + bx])
                        diff, pred[c] = value - pred[c], value
                        cat = abs(diff).bit_length()
                        put(*dc_codes[cat])
                        if cat:
                            put(diff if diff > 0 else diff + (1 << cat) - 1, cat)
                        put(0, 1)  # end of block: the AC table's only code
    bits.extend([1] * (-len(bits) % 8))
    data = bytearray()
    for i in range(0, len(bits), 8):
        byte = int("".join(map(str, bits[i:i + 8])), 2)
        data.append(byte)
        if byte == 0xFF:
            data.append(0)
    sof = struct.pack(">BHHB", 8, height, width, 3) + b"".join(
        struct.pack(">BBB", c + 1, (h << 4) | v, 0) for c, (h, v) in enumerate(sampling))
    dht = (bytes([0x00]) + bytes(_DC_BITS) + bytes(_DC_VALS)
           + bytes([0x10]) + bytes([1] + [0] * 15) + bytes([0x00]))
    sos = bytes([3]) + b"".join(bytes([c + 1, 0x00]) for c in range(3)) + bytes([0, 63, 0])
    return (b"\xff\xd8" + _segment(0xDB, bytes([0]) + bytes([16] * 64))
            + _segment(0xC0, sof) + _segment(0xC4, dht) + _segment(0xDA, sos)
            + bytes(data) + b"\xff\xd9")
