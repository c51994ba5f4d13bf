"""Damaged inputs raise feedline errors naming the file and the offset, with bounded memory:
NDArray files with overflowing shapes, damaged RecordIO ``.idx`` files, a failing
``idx.write_idx`` (full disk)."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest

from feedline import idx as idxmod
from feedline import ndarray_file, recordio
from feedline.exceptions import CorruptRecordError


def test_ndarray_overflowing_shape(tmp_path):
    path = tmp_path / "a.params"
    ndarray_file.save(path, {"w": np.arange(6, dtype=np.float32).reshape(2, 3)})
    data = bytearray(path.read_bytes())
    dims = data.index(struct.pack("<2q", 2, 3))
    data[dims : dims + 16] = struct.pack("<2q", 1 << 62, 1 << 62)  # product overflows int64
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError, match=r"a\.params: at byte \d+: the file ends inside array 0's \d+ data bytes"):
        ndarray_file.load(path)


def test_recordio_idx_not_utf8(tmp_path):
    rec, idx = tmp_path / "x.rec", tmp_path / "x.idx"
    with recordio.IndexedRecordIO(idx, rec, "w") as w:
        w.write_idx(0, b"zero")
        w.write_idx(1, b"one")
    idx.write_bytes(idx.read_bytes() + b"\xff\xfe\t8\n")
    with pytest.raises(CorruptRecordError, match=r"x\.idx: line 3 at byte 9: bad index line .*not UTF-8"):
        recordio.IndexedRecordIO(idx, rec)


@pytest.mark.parametrize(
    "line, problem",
    [
        (b"1\t99999999999999999999999999\n", "is beyond any file"),
        (b"1\t" + b"9" * 5000 + b"\n", r"bad index line '1\\t9999"),
        (b"1\t64\n", "the index points at byte 64, beyond the file's 12 bytes"),
    ],
)
def test_recordio_idx_offsets_out_of_range(tmp_path, line, problem):
    rec, idx = tmp_path / "x.rec", tmp_path / "x.idx"
    with recordio.IndexedRecordIO(idx, rec, "w") as w:
        w.write_idx(0, b"zero")
    idx.write_bytes(idx.read_bytes() + line)
    with pytest.raises(CorruptRecordError, match=problem):
        r = recordio.IndexedRecordIO(idx, rec)
        r.read_idx(1)


def test_write_idx_leaves_no_partial_file_on_a_full_disk(tmp_path, monkeypatch):
    path = tmp_path / "labels.idx"
    path.write_bytes(idxmod.encode_idx(np.arange(3, dtype=np.uint8)))
    before = path.read_bytes()

    def failing_fdopen(fd, *args, **kwargs):
        f = real_fdopen(fd, *args, **kwargs)

        class _F:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                f.close()

            def write(self, data):
                raise OSError(28, "No space left on device")

        return _F()

    real_fdopen = os.fdopen
    monkeypatch.setattr(os, "fdopen", failing_fdopen)
    with pytest.raises(OSError, match="No space left on device"):
        idxmod.write_idx(path, np.arange(10, dtype=np.uint8))
    with pytest.raises(OSError, match="No space left on device"):
        idxmod.write_idx(tmp_path / "new.idx", np.arange(10, dtype=np.uint8))
    monkeypatch.undo()
    assert path.read_bytes() == before  # the old file is intact
    assert sorted(os.listdir(tmp_path)) == ["labels.idx"]  # no 0-byte file, no temporary
    idxmod.write_idx(tmp_path / "new.idx.gz", np.arange(10, dtype=np.uint8))
    assert idxmod.read_idx(tmp_path / "new.idx.gz").tolist() == list(range(10))


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_recordio_and_text_readers_release_their_file_when_they_raise(tmp_path):
    import gc
    import gzip

    from feedline import text

    rec = tmp_path / "a.rec"
    with recordio.RecordIOWriter(rec) as w:
        for _ in range(10):
            w.write(b"x" * 100)
    data = bytearray(rec.read_bytes())
    data[5 * 108] ^= 0xFF  # record 5's magic word
    rec.write_bytes(bytes(data))
    gz = tmp_path / "t.txt.gz"
    gz.write_bytes(gzip.compress(b"line\n" * 5000, mtime=0)[:-30])
    gc.disable()
    try:
        before = _fds()
        reader = recordio.read(rec)
        with pytest.raises(CorruptRecordError, match=r"a\.rec: record 5 at byte 540: bad magic word"):
            for _ in reader:
                pass
        assert _fds() == before
        lines = text.read_lines(gz)
        got = []
        with pytest.raises(CorruptRecordError, match=r"t\.txt\.gz: line \d+ at byte \d+: GZIP stream"):
            for line in lines:
                got.append(line)
        assert _fds() == before
        assert got == [b"line"] * len(got) and len(got) > 0
        state = lines.get_state()
        with pytest.raises(CorruptRecordError, match="GZIP stream"):
            next(lines)  # reopens where it stopped and meets the same damage
        assert lines.get_state() == state and _fds() == before
    finally:
        gc.enable()
