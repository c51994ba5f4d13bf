"""Hardening of TFRecord reading: skip mode resynchronises after damage, a damaged sidecar
index raises CorruptRecordError, build_index never writes through a fixed temporary name."""

from __future__ import annotations

import os
import struct

import pytest

from feedline import tfrecord
from feedline.exceptions import CorruptRecordError
from feedline.tfrecord import TFRecordFile, TFRecordWriter, build_index, masked_crc


def write_records(path, records):
    with TFRecordWriter(path) as w:
        for r in records:
            w.write(r)
    offsets, pos = [], 0
    for r in records:
        offsets.append(pos)
        pos += len(r) + 16
    return offsets


def frame_header(length: int) -> bytes:
    raw = struct.pack("<Q", length)
    return raw + struct.pack("<I", masked_crc(raw))


RECORDS = [b"record-%03d-" % i + bytes([i]) * (i % 7) for i in range(100)]


@pytest.mark.parametrize("on_error", ["skip", "warn"])
def test_skip_resynchronises_after_a_length_running_past_the_end(tmp_path, on_error):
    path = str(tmp_path / "a.tfrecord")
    offsets = write_records(path, RECORDS)
    data = bytearray(open(path, "rb").read())
    at = offsets[10]
    data[at : at + 12] = frame_header(1 << 40)  # valid length CRC, length past the end
    open(path, "wb").write(bytes(data))
    with pytest.raises(CorruptRecordError, match=rf"record 10 at byte {at}: truncated record"):
        list(tfrecord.read(path))
    reader = tfrecord.TFRecordReader(path, on_error=on_error)
    if on_error == "warn":
        with pytest.warns(RuntimeWarning, match="truncated record"):
            got = list(reader)
    else:
        got = list(reader)
    assert got == RECORDS[:10] + RECORDS[11:]
    assert reader.skipped == 1
    assert reader.skipped_bytes == offsets[11] - offsets[10]


def test_resync_needs_the_data_crc_too(tmp_path):
    """A payload that contains a valid-looking header is not taken for a record."""
    fake = frame_header(5) + b"XXXXX" + b"\0\0\0\0"  # header ok, data CRC wrong
    records = [b"a" * 8, b"damaged", b"pre" + fake + b"post", b"good-1", b"good-2"]
    path = str(tmp_path / "b.tfrecord")
    offsets = write_records(path, records)
    data = bytearray(open(path, "rb").read())
    data[offsets[1] + 9] ^= 0xFF  # break record 1's length CRC
    open(path, "wb").write(bytes(data))
    reader = tfrecord.TFRecordReader(path, on_error="skip")
    assert list(reader) == [records[0], records[2], records[3], records[4]]
    assert reader.skipped == 1


def test_resync_after_data_crc_and_state_resume(tmp_path):
    path = str(tmp_path / "c.tfrecord")
    offsets = write_records(path, RECORDS[:20])
    data = bytearray(open(path, "rb").read())
    data[offsets[5] : offsets[5] + 12] = frame_header(1 << 33)
    open(path, "wb").write(bytes(data))
    expected = RECORDS[:5] + RECORDS[6:20]
    for k in range(len(expected) + 1):
        it = tfrecord.TFRecordReader(path, on_error="skip")
        head = [next(it) for _ in range(k)]
        state = it.get_state()
        it2 = tfrecord.TFRecordReader(path, on_error="skip")
        it2.set_state(state)
        assert head + list(it2) == expected


def test_damaged_sidecar_index_raises_corrupt_record_error(tmp_path):
    path = str(tmp_path / "d.tfrecord")
    write_records(path, RECORDS[:4])
    build_index(path)
    index = path + ".index"
    good = open(index, "rb").read()
    header = 32
    # a length field claiming 1 TiB: refused at load, before any read is attempted
    bad = bytearray(good)
    bad[header + 8 * 4 + 8 : header + 8 * 4 + 16] = struct.pack("<Q", 1 << 40)
    open(index, "wb").write(bytes(bad))
    with pytest.raises(CorruptRecordError, match=r"d\.tfrecord\.index: at byte 40: damaged TFRecord index: entry 1 .*length 1099511627776"):
        TFRecordFile(path)
    # an offset beyond any file (pread would raise OSError/OverflowError)
    bad = bytearray(good)
    bad[header + 16 : header + 24] = struct.pack("<Q", (1 << 64) - 1)
    open(index, "wb").write(bytes(bad))
    with pytest.raises(CorruptRecordError, match=r"entry 2 \(offset 18446744073709551615"):
        TFRecordFile(path)
    # skip mode ignores the damaged index with a warning and reads everything
    with pytest.warns(RuntimeWarning, match="ignoring the sidecar index"):
        data = bytearray(open(path, "rb").read())
        data[9] ^= 1
        open(path, "wb").write(bytes(data))
        assert list(tfrecord.TFRecordReader(path, on_error="skip")) == RECORDS[1:4]


def test_build_index_does_not_follow_a_planted_symlink(tmp_path):
    path = str(tmp_path / "e.tfrecord")
    offsets = write_records(path, RECORDS[:3])
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    for name in (path + ".index.tmp", path + ".tmp"):
        os.symlink(victim, name)
    build_index(path)
    assert victim.read_bytes() == b"precious"
    assert len(TFRecordFile(path)) == 3
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["e.tfrecord", "e.tfrecord.index", "e.tfrecord.index.tmp", "e.tfrecord.tmp", "victim.txt"]
    )
    assert TFRecordFile(path).index.offsets.tolist() == offsets


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_reader_that_raised_releases_descriptor_and_buffer_at_once(tmp_path):
    import gc
    import tracemalloc

    path = str(tmp_path / "f.tfrecord")
    offsets = write_records(path, RECORDS[:20])
    data = bytearray(open(path, "rb").read())
    data[offsets[7] + 20] ^= 0xFF  # record 7's data CRC fails
    open(path, "wb").write(bytes(data))
    gc.disable()
    tracemalloc.start()
    try:
        before_fds = _open_fds()
        reader = tfrecord.TFRecordReader(path)
        got = [next(reader) for _ in range(7)]
        assert _open_fds() == before_fds + 1
        with pytest.raises(CorruptRecordError, match=rf"record 7 at byte {offsets[7]}: corrupted record: data CRC"):
            next(reader)
        assert _open_fds() == before_fds  # released now, the reader still referenced
        assert tracemalloc.get_traced_memory()[0] < 1 << 20  # the 4 MiB buffer is gone
        assert reader.get_state()["offset"] == offsets[7]
        with pytest.raises(CorruptRecordError, match=rf"record 7 at byte {offsets[7]}"):
            next(reader)  # reopens where it stopped and meets the same damage
        assert _open_fds() == before_fds
        assert got == RECORDS[:7]
    finally:
        tracemalloc.stop()
        gc.enable()
