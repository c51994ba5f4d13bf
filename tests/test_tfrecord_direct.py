"""Large TFRecord payloads in plain local files are read straight from the file into their
``bytes`` (``TFRecordReader._fill_direct``) instead of through the block buffer. Everything
a reader yields, raises, reports and resumes must be what the buffered path gives: each test
runs both and compares."""

from __future__ import annotations

import random
import struct

import fsspec
import pytest

from feedline import tfrecord
from feedline.exceptions import CorruptRecordError
from feedline.formats.tfrecord import reader as reader_module
from feedline.formats.tfrecord.reader import TFRecordBatchReader, TFRecordReader
from feedline.tfrecord import build_index, masked_crc

BIG = reader_module._DIRECT_MIN


def _records(seed=0):
    """Mixed sizes: runs of large records (the direct path), small ones between them, a
    large first record, sizes just under and at the threshold, an empty one."""
    rnd = random.Random(seed)
    sizes = [BIG + 5, 100_000, 3, BIG, BIG - 1, 0, 70_000, 120]
    sizes += [100_000] * 12 + [17, 5, 200_000] + [rnd.randint(BIG, 3 * BIG) for _ in range(9)]
    sizes += [rnd.randint(0, 300) for _ in range(40)] + [100_000] * 5
    return [rnd.randbytes(n) for n in sizes]


def _offsets(records):
    out, pos = [], 0
    for r in records:
        out.append(pos)
        pos += len(r) + 16
    return out


@pytest.fixture()
def mixed(tmp_path):
    recs = _records()
    path = tmp_path / "mixed.tfrecord"
    tfrecord.write(path, recs)
    return path, recs


@pytest.fixture()
def direct_calls(monkeypatch):
    """Count the chunks the direct path delivered."""
    calls = []
    original = TFRecordReader._fill_direct

    def spy(self, *args, **kwargs):
        got = original(self, *args, **kwargs)
        calls.append(got)
        return got

    monkeypatch.setattr(TFRecordReader, "_fill_direct", spy)
    return calls


def _buffered(monkeypatch):
    monkeypatch.setattr(reader_module, "_DIRECT_MIN", 1 << 62)


def _both(monkeypatch, fn):
    """``fn()`` with the direct path, then with the buffered path only."""
    with monkeypatch.context() as m:
        m.setattr(reader_module, "_DIRECT_MIN", BIG)
        direct = fn()
    with monkeypatch.context() as m:
        _buffered(m)
        buffered = fn()
    return direct, buffered


def _events(make, step=None, *, stride=None):
    """Every record, state and error of the reader ``make()`` as a list of tuples."""
    out = []
    reader = make()
    if stride is not None:
        reader.hint_stride(*stride)
    with reader:
        while True:
            try:
                if step is None:
                    item = next(reader)
                else:
                    item = reader.next_batch(step)
                    if not item:
                        raise StopIteration
            except StopIteration:
                break
            except CorruptRecordError as exc:
                out.append(("error", str(exc), exc.index, exc.offset, reader.get_state()))
                break
            out.append(("item", item, reader.get_state()))
        out.append(("end", reader.skipped, reader.skipped_bytes, reader.get_state()))
    return out


def test_records_and_states_match_the_buffered_path(mixed, monkeypatch, direct_calls):
    path, recs = mixed
    for step in (None, 1, 2, 7, 64, 1000):
        direct, buffered = _both(
            monkeypatch, lambda s=step: _events(lambda: TFRecordReader(path), s)
        )
        assert direct == buffered
        got = [r for e in direct if e[0] == "item" for r in (e[1] if step else [e[1]])]
        assert got == recs
    assert any(direct_calls)
    assert list(tfrecord.read(path, verify=False)) == recs
    assert [r for b in tfrecord.read_batches(path, 5) for r in b] == recs


@pytest.mark.parametrize("block_size", [16, 1000, BIG + 100, 1 << 20])
def test_any_block_size(mixed, block_size, direct_calls):
    path, recs = mixed
    assert list(TFRecordReader(path, block_size=block_size)) == recs
    got = [r for b in TFRecordBatchReader(path, 3, block_size=block_size) for r in b]
    assert got == recs
    assert any(direct_calls)


def _damaged(tmp_path, recs, kind, k, *, index=False):
    path = tmp_path / f"{kind}-{k}.tfrecord"
    tfrecord.write(path, recs)
    if index:
        build_index(path)
    raw = bytearray(path.read_bytes())
    at = _offsets(recs)[k]
    n = len(recs[k])
    if kind == "data":  # a flipped byte in the middle of the payload
        raw[at + 12 + n // 2] ^= 0x40
    elif kind == "footer":  # a flipped byte of the data CRC
        raw[at + 12 + n + 1] ^= 1
    elif kind == "length":  # the length CRC fails
        raw[at + 1] ^= 1
    elif kind == "length_ok":  # a length with a valid CRC that runs past the end
        length = struct.pack("<Q", 1 << 40)
        raw[at : at + 12] = length + struct.pack("<I", masked_crc(length))
    elif kind == "cut_payload":
        del raw[at + 12 + n // 2 :]
    elif kind == "cut_footer":
        del raw[at + 12 + n + 2 :]
    elif kind == "cut_header":
        del raw[at + 5 :]
    else:
        raise AssertionError(kind)
    path.write_bytes(bytes(raw))
    return path


KINDS = ["data", "footer", "length", "length_ok", "cut_payload", "cut_footer", "cut_header"]
# 0: the first (large) record, partly in the first buffer; 1: right after it; 12: inside a
# run of direct reads; 23: after small records; 9: just after a chunk boundary
DAMAGED_AT = [0, 1, 9, 12, 23, -1]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("k", DAMAGED_AT)
@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_damage_matches_the_buffered_path(tmp_path, monkeypatch, kind, k, on_error):
    recs = _records(1)
    k %= len(recs)
    if kind.startswith("cut"):  # a truncation is only meaningful in the last record
        recs = recs[: k + 1]
    path = _damaged(tmp_path, recs, kind, k)
    for step in (None, 64):

        def run(s=step):
            return _events(lambda: TFRecordReader(path, on_error=on_error), s)

        direct, buffered = _both(monkeypatch, run)
        assert direct == buffered, (kind, k, step)
        if on_error == "raise":
            err = [e for e in direct if e[0] == "error"]
            assert err and err[0][2] == k and err[0][3] == _offsets(recs)[k]
            assert f"record {k} at byte {_offsets(recs)[k]}" in err[0][1]
            got = [r for e in direct if e[0] == "item" for r in (e[1] if step else [e[1]])]
            assert got == recs[:k]
        else:
            assert direct[-1][1] == 1  # skipped once


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("k", DAMAGED_AT)
def test_damage_unverified_or_left_out_matches_the_buffered_path(tmp_path, monkeypatch, kind, k):
    """``verify=False`` checks nothing; ``hint_stride`` still checks the length CRCs of the
    records it leaves out (not their data)."""
    recs = _records(1)
    k %= len(recs)
    if kind.startswith("cut"):
        recs = recs[: k + 1]
    path = _damaged(tmp_path, recs, kind, k)
    for verify, stride in ((False, None), (True, (1 - k % 2, 2)), (True, (0, 3))):

        def run(s=stride, v=verify):
            return _events(lambda: TFRecordReader(path, verify=v), 5, stride=s)

        direct, buffered = _both(monkeypatch, run)
        assert direct == buffered, (kind, k, verify, stride)


def test_the_damage_message_of_a_large_record(tmp_path):
    recs = [bytes([i]) * 100_000 for i in range(8)]
    path = _damaged(tmp_path, recs, "data", 5)
    at = _offsets(recs)[5]
    with pytest.raises(
        CorruptRecordError,
        match=rf"record 5 at byte {at}: corrupted record: data CRC mismatch "
        rf"\(data of 100000 bytes at byte {at + 12}\)",
    ):
        list(tfrecord.read(path))
    got = list(tfrecord.read(path, on_error="skip"))
    assert got == recs[:5] + recs[6:]
    assert list(tfrecord.read(path, verify=False))[5] != recs[5]
    path = _damaged(tmp_path, recs, "cut_payload", 7)
    with pytest.raises(
        CorruptRecordError,
        match=r"record 7 at byte \d+: truncated record: "
        r"the file ends 50012 bytes into a frame of 100016 bytes",
    ):
        list(tfrecord.read_batches(path, 4))
    batches = tfrecord.read_batches(path, 4)
    assert next(batches) == recs[:4]
    assert next(batches) == recs[4:7]  # cut short before the damage
    with pytest.raises(CorruptRecordError):
        next(batches)


@pytest.mark.parametrize("kind", ["data", "length", "length_ok"])
def test_damage_with_a_sidecar_index(tmp_path, monkeypatch, kind):
    recs = _records(2)
    path = _damaged(tmp_path, recs, kind, 12, index=True)

    def run():
        return _events(lambda: TFRecordReader(path, on_error="skip"), 5)

    direct, buffered = _both(monkeypatch, run)
    assert direct == buffered
    got = [r for e in direct if e[0] == "item" for r in e[1]]
    assert got == recs[:12] + recs[13:]


def test_resume_anywhere(mixed, monkeypatch, direct_calls):
    path, recs = mixed
    reader = TFRecordReader(path)
    states = [reader.get_state()]
    for _ in recs:
        next(reader)
        states.append(reader.get_state())
    reader.close()
    offsets = _offsets(recs)
    for k, state in enumerate(states):
        assert state["index"] == k
        assert state["offset"] == (
            offsets[k] if k < len(recs) else offsets[-1] + len(recs[-1]) + 16
        )
        again = TFRecordReader(path)
        again.set_state(state)
        assert list(again) == recs[k:], k
        batches = TFRecordBatchReader(path, 4)
        batches.set_state(state)
        assert [r for b in batches for r in b] == recs[k:], k
    assert any(direct_calls)
    # a state taken mid-batch, restored into a reader that has already read past it
    batches = TFRecordBatchReader(path, 6)
    head = next(batches) + next(batches)
    state = batches.get_state()
    rest = [r for b in batches for r in b]
    assert head + rest == recs
    batches.set_state(state)
    assert [r for b in batches for r in b] == rest


@pytest.mark.parametrize("stride", [(0, 2), (1, 3), (4, 5)])
def test_hint_stride_matches_the_buffered_path(mixed, monkeypatch, stride):
    path, recs = mixed

    def run():
        return _events(lambda: TFRecordReader(path), 7, stride=stride)

    direct, buffered = _both(monkeypatch, run)
    assert direct == buffered
    got = [r for e in direct if e[0] == "item" for r in e[1]]
    first, step = stride
    for i, r in enumerate(got):
        if i >= first and (i - first) % step == 0:
            assert r == recs[i]
        else:
            assert r is None or r == recs[i]


def test_hint_stride_skips_damage_in_left_out_large_records(tmp_path):
    recs = [bytes([i]) * 100_000 for i in range(10)]
    path = _damaged(tmp_path, recs, "data", 5)
    reader = TFRecordReader(path)
    reader.hint_stride(0, 2)
    got = list(reader)
    assert got[0::2] == recs[0::2]
    assert got[5] is None


def test_compressed_and_fsspec_files_keep_the_buffered_path(tmp_path, direct_calls):
    recs = _records(3)
    gz = tmp_path / "g.tfrecord"
    tfrecord.write(gz, recs, compression="GZIP")
    assert list(tfrecord.read(gz)) == recs
    fsspec.filesystem("memory").pipe("/direct-test/m.tfrecord", b"".join(map(_frame, recs)))
    url = "memory://direct-test/m.tfrecord"
    assert [r for b in tfrecord.read_batches(url, 5) for r in b] == recs
    assert not any(direct_calls)
    plain = tmp_path / "p.tfrecord"
    tfrecord.write(plain, recs)
    assert list(tfrecord.read("file://" + str(plain))) == recs
    assert any(direct_calls)


def _frame(data: bytes) -> bytes:
    length = struct.pack("<Q", len(data))
    return (
        length + struct.pack("<I", masked_crc(length)) + data + struct.pack("<I", masked_crc(data))
    )


def test_a_file_that_grows_while_read(tmp_path):
    recs = [bytes([i]) * 100_000 for i in range(6)]
    path = tmp_path / "grow.tfrecord"
    tfrecord.write(path, recs[:3])
    reader = TFRecordReader(path)
    assert next(reader) == recs[0]
    with open(path, "ab") as f:  # frames past the size seen at opening
        f.write(b"".join(_frame(r) for r in recs[3:]))
    assert list(reader) == recs[1:]


def test_build_index_over_large_records(mixed):
    path, recs = mixed
    assert build_index(path) == len(recs)
    f = tfrecord.TFRecordFile(path)
    assert [f[i] for i in range(len(recs))] == recs
