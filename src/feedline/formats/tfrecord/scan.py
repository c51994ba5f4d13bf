"""Walking TFRecord frames over an in-memory buffer: the reader's inner loop.

A frame is ``uint64 length | uint32 masked_crc32c(length bytes) | data | uint32
masked_crc32c(data)``, little-endian. :func:`scan` takes a buffer, a start and an end and
returns the complete frames it finds there as ``bytes`` plus their start offsets,
stopping at the end of the data, at a frame that is not complete yet, at ``limit``
frames, or at the first damaged frame (described by a :class:`Problem`, never raised:
the caller decides).

Runs of frames with the same length (fixed-size records are common) are handled with
numpy without a Python step per frame: the lengths and length-CRCs of the next ``m``
frames are read through strided views and compared at once (equal lengths have equal
length-CRCs), the payloads are cut out with one ``tolist()`` of a strided ``void`` view,
and their CRCs are compared as one array. Frames of varying length take a scalar loop.

>>> data = frame(b"abc") + frame(b"") + frame(b"xyz")
>>> records, offsets, pos, problem = scan(bytearray(data), 0, len(data), 10, True)
>>> records, [int(o) for o in offsets], pos, problem
([b'abc', b'', b'xyz'], [0, 19, 35], 54, None)
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import google_crc32c
import numpy as np

__all__ = [
    "HEADER",
    "FOOTER",
    "OVERHEAD",
    "MASK_DELTA",
    "mask",
    "masked_crc",
    "frame",
    "Problem",
    "scan",
    "find_header",
    "length_crc",
]

HEADER = 12
FOOTER = 4
OVERHEAD = HEADER + FOOTER
MASK_DELTA = 0xA282EAD8

_crc = google_crc32c.value
_HEADER = struct.Struct("<QI")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_RUN_MIN = 8  # try the vectorised path when at least this many equal frames may follow


def mask(crc: int) -> int:
    """TFRecord's CRC masking: rotate right by 15 bits and add a constant (mod 2**32).

    Args:
        crc: an unsigned 32-bit CRC.

    >>> mask(0) == MASK_DELTA, hex(mask(1))              # 1 rotated right by 15, plus the delta
    (True, '0xa284ead8')
    """
    return (((crc >> 15) | (crc << 17)) + MASK_DELTA) & 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    """Masked CRC-32C of ``data``.

    Args:
        data: the bytes to checksum (any read-only bytes-like object).

    >>> hex(masked_crc(b""))
    '0xa282ead8'
    """
    return mask(_crc(data))


def _mask_array(crcs: np.ndarray) -> np.ndarray:
    c = crcs.astype(np.uint32, copy=False)
    return ((c >> np.uint32(15)) | (c << np.uint32(17))) + np.uint32(MASK_DELTA)


def frame(data: bytes) -> bytes:
    """Return the complete frame of one record (what the writer emits for ``data``).

    Args:
        data: the record's payload, any bytes-like object.

    >>> f = frame(b"ab")
    >>> len(f), f[:8] == (2).to_bytes(8, "little"), f[12:14]     # length, its CRC, data, data CRC
    (18, True, b'ab')
    """
    data = bytes(data)
    length = _U64.pack(len(data))
    return b"".join((length, _U32.pack(masked_crc(length)), data, _U32.pack(masked_crc(data))))


class Problem(NamedTuple):
    """Why :func:`scan` stopped early.

    ``kind`` is ``"partial"`` (the frame at ``pos`` does not fit in the data given: read
    more, or the file is truncated), ``"length_crc"`` (the length field fails its CRC) or
    ``"data_crc"`` (the payload fails its CRC). ``length`` is the frame's declared
    payload length, or ``None`` when fewer than 12 bytes were available.

    >>> buf = frame(b"ab") + frame(b"cde")
    >>> scan(buf[:-2], 0, len(buf) - 2, 10, True)[3]      # the second frame is cut short
    Problem(kind='partial', pos=18, length=3)
    """

    kind: str
    pos: int
    length: int | None


_length_crc_cache: dict[int, int] = {}


def length_crc(length: int) -> int:
    """The masked CRC stored after a frame's 8 length bytes (cached for common lengths).

    Args:
        length: the frame's payload length, an int from 0 to 2**64 - 1.

    >>> length_crc(3) == masked_crc((3).to_bytes(8, "little"))
    True
    """
    value = _length_crc_cache.get(length)
    if value is None:
        value = masked_crc(_U64.pack(length))
        if len(_length_crc_cache) < 4096:
            _length_crc_cache[length] = value
    return value


def _walk(buf, pos: int, end: int, limit: int):
    """Follow the length fields from ``pos`` without checking anything.

    Returns ``(offsets, lengths, runs, pos, partial)``: frame offsets and data lengths
    (int64 arrays) of up to ``limit`` complete frames, the runs of equal-length frames
    found with numpy as ``(first index, count)``, the position after the last frame, and
    ``None`` or the length (``-1`` when the header itself is cut) of an incomplete frame
    at that position.
    """
    pieces_o: list[np.ndarray] = []
    pieces_l: list[np.ndarray] = []
    offs: list[int] = []
    lens: list[int] = []
    runs: list[tuple[int, int]] = []
    u64 = _U64.unpack_from
    n = 0
    prev = -1
    partial = None
    while n < limit:
        if end - pos < HEADER:
            if end > pos:
                partial = -1
            break
        length = u64(buf, pos)[0]
        stride = length + OVERHEAD
        if pos + stride > end:
            partial = length
            break
        if length == prev and end - pos >= _RUN_MIN * stride:
            m = min((end - pos) // stride, limit - n)
            view = np.ndarray((m,), dtype="<u8", buffer=buf, offset=pos, strides=(stride,))
            bad = np.flatnonzero(view != length)
            count = int(bad[0]) if bad.size else m
            if offs:
                pieces_o.append(np.asarray(offs, dtype=np.int64))
                pieces_l.append(np.asarray(lens, dtype=np.int64))
                offs, lens = [], []
            pieces_o.append(pos + stride * np.arange(count, dtype=np.int64))
            pieces_l.append(np.full(count, length, dtype=np.int64))
            runs.append((n, count))
            n += count
            pos += count * stride
            prev = -1
            continue
        offs.append(pos)
        lens.append(length)
        n += 1
        prev = length
        pos += stride
    if offs or not pieces_o:
        pieces_o.append(np.asarray(offs, dtype=np.int64))
        pieces_l.append(np.asarray(lens, dtype=np.int64))
    if len(pieces_o) == 1:
        return pieces_o[0], pieces_l[0], runs, pos, partial
    return np.concatenate(pieces_o), np.concatenate(pieces_l), runs, pos, partial


def _crc8(raw8: np.ndarray) -> np.ndarray:
    """CRC-32C of each row of an ``(n, 8)`` uint8 array, vectorised by table lookups."""
    tables, base = _window_tables()
    acc = np.full(raw8.shape[0], base, dtype=np.uint32)
    for j in range(8):
        acc ^= tables[j][raw8[:, j]]
    return acc


def _u32_at(buf, positions: np.ndarray) -> np.ndarray:
    """The little-endian uint32 at each of ``positions`` in ``buf``."""
    view = np.ndarray((len(buf) - 3,), dtype="<u4", buffer=buf, offset=0, strides=(1,))
    return view[positions]


def _cut(buf, offsets: np.ndarray, lengths: np.ndarray, runs) -> list[bytes]:
    """The payloads as ``bytes``: one strided ``tolist`` per run, a slice per other frame."""
    n = len(offsets)
    if not runs:
        mv = memoryview(buf)
        starts = (offsets + HEADER).tolist()
        out: list[bytes] = [
            mv[a:b].tobytes() for a, b in zip(starts, (offsets + HEADER + lengths).tolist())
        ]
        mv.release()
        return out
    out = []
    done = 0
    for first, count in runs:
        if first >= n:
            break
        count = min(count, n - first)
        if first > done:
            out.extend(_cut(buf, offsets[done:first], lengths[done:first], ()))
        length = int(lengths[first])
        if length:
            view = np.ndarray(
                (count,),
                dtype=np.dtype((np.void, length)),
                buffer=buf,
                offset=int(offsets[first]) + HEADER,
                strides=(length + OVERHEAD,),
            )
            out.extend(view.tolist())
        else:
            out.extend([b""] * count)
        done = first + count
    if done < n:
        out.extend(_cut(buf, offsets[done:], lengths[done:], ()))
    return out


def _first(mask_array: np.ndarray) -> int:
    bad = np.flatnonzero(mask_array)
    return int(bad[0]) if bad.size else len(mask_array)


def scan(buf, pos: int, end: int, limit: int, verify: bool,
         keep: tuple[int, int] | None = None):
    """Walk complete frames in ``buf[pos:end]``.

    Returns ``(records, offsets, new_pos, problem)``: the payloads (``bytes``), their
    frame offsets in ``buf`` (an int64 array), the position after the last frame
    returned, and ``None`` or the :class:`Problem` met at ``new_pos``.

    Args:
        buf (bytes | bytearray | memoryview): the buffer (anything numpy can view).
        pos: where the first frame starts in ``buf``.
        end: one past the last byte of data in ``buf``.
        limit: the most frames to return.
        verify: true checks both CRCs of every frame; false skips both checks.
        keep: ``(first, step)``: only frames ``first, first + step, ...`` of this walk are
            cut and have their data CRC checked; the others come back as ``None`` (length
            CRCs are checked for all). ``None`` (the default) keeps every frame.

    Three vectorised passes follow a cheap walk along the length fields: the length
    CRCs of all walked frames (computed from the lengths by table lookups), the cutting
    of payloads, and the data CRCs (one C call per payload, compared as an array). The
    first failure truncates the result there.

    >>> buf = frame(b"ab") + frame(b"cde")
    >>> records, offsets, new_pos, problem = scan(buf, 0, len(buf), 10, True)
    >>> records, offsets.tolist(), new_pos, problem
    ([b'ab', b'cde'], [0, 18], 37, None)
    >>> damaged = bytearray(buf); damaged[-1] ^= 1         # flip a bit of the last data CRC
    >>> scan(bytes(damaged), 0, len(buf), 10, True)[::3]
    ([b'ab'], Problem(kind='data_crc', pos=18, length=3))
    """
    offsets, lengths, runs, stop, partial = _walk(buf, pos, end, limit)
    n = len(offsets)
    problem = None
    if partial is not None:
        problem = Problem("partial", stop, None if partial < 0 else partial)
    if verify:
        if n:
            raw8 = lengths.astype("<u8").view(np.uint8).reshape(n, 8)
            k = _first(_mask_array(_crc8(raw8)) != _u32_at(buf, offsets + 8))
            if k < n:
                stop = int(offsets[k])
                problem = Problem("length_crc", stop, int(lengths[k]))
                offsets, lengths, n = offsets[:k], lengths[:k], k
        if problem is not None and problem.kind == "partial" and problem.length is not None:
            if length_crc(problem.length) != _U32.unpack_from(buf, stop + 8)[0]:
                problem = Problem("length_crc", stop, problem.length)
    if keep is not None and n:
        return _scan_kept(buf, offsets, lengths, stop, problem, verify, keep)
    records = _cut(buf, offsets, lengths, runs) if n else []
    if verify and n:
        stored = _u32_at(buf, offsets + HEADER + lengths)
        computed = _mask_array(np.fromiter(map(_crc, records), dtype=np.uint32, count=n))
        k = _first(computed != stored)
        if k < n:
            stop = int(offsets[k])
            problem = Problem("data_crc", stop, int(lengths[k]))
            del records[k:]
            offsets = offsets[:k]
    return records, offsets, stop, problem


def _scan_kept(buf, offsets, lengths, stop, problem, verify, keep):
    """The end of :func:`scan` when only every ``step``-th frame from ``first`` is wanted."""
    first, step = keep
    n = len(offsets)
    records = [None] * n  # the payloads of the kept frames replace these
    if first < n:
        cut = _cut(buf, offsets[first::step], lengths[first::step], ())
        if verify:
            stored = _u32_at(buf, offsets[first::step] + HEADER + lengths[first::step])
            computed = _mask_array(np.fromiter(map(_crc, cut), dtype=np.uint32, count=len(cut)))
            bad = _first(computed != stored)
            if bad < len(cut):
                k = first + bad * step
                stop = int(offsets[k])
                problem = Problem("data_crc", stop, int(lengths[k]))
                del records[k:], cut[bad:]
                offsets = offsets[:k]
        records[first::step] = cut
    return records, offsets, stop, problem


_WINDOW_TABLES: tuple[np.ndarray, int] | None = None


def _window_tables() -> tuple[np.ndarray, int]:
    """Per-position tables so that crc32c(8 bytes) = K ^ XOR_j T[j, byte_j] (CRC is affine).

    Built from the 64 one-bit probes: ``T[j, b]`` is the XOR of the probes of ``b``'s bits.
    """
    global _WINDOW_TABLES
    if _WINDOW_TABLES is None:
        base = _crc(bytes(8))
        values = np.arange(256)
        tables = np.zeros((8, 256), dtype=np.uint32)
        for j in range(8):
            for bit in range(8):
                probe = bytearray(8)
                probe[j] = 1 << bit
                tables[j][(values >> bit) & 1 == 1] ^= np.uint32(_crc(bytes(probe)) ^ base)
        _WINDOW_TABLES = (tables, base)
    return _WINDOW_TABLES


def find_header(buf, start: int, end: int) -> int:
    """First position ``p`` in ``[start, end - 12]`` where a frame header's length CRC
    checks (vectorised over the window), or ``-1``.

    Args:
        buf (bytes | bytearray | memoryview): the buffer to search.
        start: the first candidate position.
        end: one past the last byte a header may use.

    >>> buf = b"junk" + frame(b"ab")
    >>> find_header(buf, 0, len(buf)), find_header(b"no frame here at all", 0, 20)
    (4, -1)
    """
    step = 1 << 12
    while True:
        stop = min(end, start + step + HEADER - 1)
        hit = _find_header_in(buf, start, stop)
        if hit >= 0 or stop >= end:
            return hit
        start = stop - HEADER + 1
        step = min(2 * step, 1 << 22)


def _find_header_in(buf, start: int, end: int) -> int:
    count = end - HEADER + 1 - start
    if count <= 0:
        return -1
    tables, base = _window_tables()
    raw = np.frombuffer(buf, dtype=np.uint8, count=end - start, offset=start)
    acc = np.full(count, base, dtype=np.uint32)
    for j in range(8):
        acc ^= tables[j][raw[j : j + count]]
    stored = np.ndarray((count,), dtype="<u4", buffer=buf, offset=start + 8, strides=(1,))
    hits = np.flatnonzero(_mask_array(acc) == stored)
    return start + int(hits[0]) if hits.size else -1
