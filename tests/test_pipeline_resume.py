"""The whole input pipeline over real files resumes exactly, worker processes included."""

from __future__ import annotations

import collections

import pytest

from feedline import Dataset, files, tfrecord

from resume_helpers import assert_resumes_everywhere


def decode(record: bytes) -> int:
    return int(record.decode())


@pytest.fixture
def record_files(tmp_path):
    label = 0
    for f in range(4):
        with tfrecord.TFRecordWriter(str(tmp_path / f"part-{f}.tfrecord")) as w:
            for _ in range(5 + 2 * f):
                w.write(str(label).encode())
                label += 1
    return str(tmp_path / "part-*.tfrecord"), label


def pipeline(pattern: str, rank: int, world: int, *, workers: int):
    return (files(pattern, shuffle=True, seed=3)
            .shard(rank, world, policy="none")
            .interleave(lambda p: Dataset.from_source(lambda: tfrecord.read(p)), cycle_length=2)
            .shuffle(6, seed=4)
            .map(decode, num_workers=workers)
            .batch(4))


@pytest.mark.parametrize("workers", [0, 2])
def test_files_shard_interleave_shuffle_map_batch_resumes_at_every_step(record_files, workers):
    pattern, total = record_files
    seen = []
    for rank in range(2):
        ds = pipeline(pattern, rank, 2, workers=workers)
        try:
            batches = assert_resumes_everywhere(ds)
        finally:
            ds.close()
        seen.extend(x for b in batches for x in b)
    assert sorted(seen) == list(range(total))  # every record once across the two ranks


def test_each_epoch_reshuffles_files_and_records(record_files):
    pattern, total = record_files
    ds = pipeline(pattern, 0, 1, workers=0)
    first = [x for b in ds for x in b]
    second = [x for b in ds for x in b]
    assert collections.Counter(first) == collections.Counter(second) == collections.Counter(
        range(total))
    assert first != second
