"""A stream shard over a TFRecord reader: the reader skips the work on other parts' records
(``hint_stride``) and the parts stay exactly what they are without the hint."""

from __future__ import annotations

import random
import struct

import pytest

from feedline import Dataset, tfrecord
from feedline.exceptions import CorruptRecordError
from feedline.formats.tfrecord.reader import TFRecordReader


@pytest.fixture()
def records(tmp_path):
    rnd = random.Random(7)
    recs = [rnd.randbytes(rnd.randint(0, 300)) for _ in range(3000)]
    path = tmp_path / "a.tfrecord"
    tfrecord.write(path, recs)
    return path, recs


def _part(path, rank, world, on_error="raise"):
    return Dataset.from_source(
        lambda: tfrecord.read(path, on_error=on_error)).shard(rank, world, policy="none")


@pytest.mark.parametrize("world", [1, 2, 3, 5])
def test_parts_are_every_world_th_record_and_resume_exactly(records, world):
    path, recs = records
    for rank in range(world):
        ds = _part(path, rank, world)
        assert ds.to_list() == recs[rank::world]
        for k in (0, 1, 17, 400):
            it = ds.iterator()
            head = [next(it) for _ in range(k)]
            state = it.get_state()
            it.close()
            assert head + list(ds.iterator(state)) == recs[rank::world]


def test_reader_hint_leaves_other_records_out(records):
    path, recs = records
    reader = TFRecordReader(path)
    assert [next(reader) for _ in range(3)] == recs[:3]
    reader.hint_stride(2, 4)  # of the records from index 3 on: 5, 9, 13, ...
    rest = list(reader)
    assert len(rest) == len(recs) - 3
    for i, r in enumerate(rest, 3):
        if i >= 5 and (i - 5) % 4 == 0:
            assert r == recs[i]
        else:  # left out, once past the records the reader had already cut
            assert r is None or (i < 8 and r == recs[i])


def _damage(path, index, out):
    raw = bytearray(path.read_bytes())
    offset = 0
    for _ in range(index):
        offset += struct.unpack_from("<Q", raw, offset)[0] + 16
    raw[offset + 12] ^= 0x40  # a data byte: the data CRC no longer matches
    out.write_bytes(bytes(raw))
    return offset


def test_damage_raises_in_the_part_that_owns_the_record(records, tmp_path):
    path, recs = records
    bad = tmp_path / "bad.tfrecord"
    index = next(i for i in range(1, 100, 2) if recs[i])  # a non-empty record of part 1
    offset = _damage(path, index, bad)
    assert _part(bad, 0, 2).to_list() == recs[0::2]
    with pytest.raises(CorruptRecordError) as info:
        _part(bad, 1, 2).to_list()
    assert info.value.index == index and info.value.offset == offset


def test_skip_mode_parts_agree_on_which_records_are_dropped(records, tmp_path):
    path, recs = records
    bad = tmp_path / "bad.tfrecord"
    index = next(i for i in range(1, 100, 2) if recs[i])
    _damage(path, index, bad)
    with pytest.warns(Warning):
        parts = [_part(bad, r, 2, on_error="warn").to_list() for r in range(2)]
    kept = recs[:index] + recs[index + 1:]
    assert parts == [kept[0::2], kept[1::2]]


def test_hint_options_are_checked(records):
    path, _ = records
    reader = TFRecordReader(path)
    with pytest.raises(ValueError, match="`first` must be"):
        reader.hint_stride(-1, 2)
    with pytest.raises(ValueError, match="`step` must be"):
        reader.hint_stride(0, 0)
    reader.close()
