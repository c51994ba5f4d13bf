"""Sharding across ranks and workers: exactly once, equal counts, resume (even with a new world size)."""

from __future__ import annotations

import collections

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedline import Dataset
from feedline.io.split import resolve_rank_world, split

from resume_helpers import assert_resumes_everywhere


@settings(max_examples=80, deadline=None)
@given(n=st.integers(0, 200), world=st.integers(1, 8), workers=st.integers(1, 4),
       seed=st.integers(0, 1000))
def test_drop_remainder_parts_are_disjoint_and_equal(n, world, workers, seed):
    ds = Dataset.range(n).global_shuffle(seed=seed)
    parts = [split(ds, r, world, worker=w, num_workers=workers, policy="drop_remainder").to_list()
             for r in range(world) for w in range(workers)]
    flat = [x for p in parts for x in p]
    assert len(flat) == len(set(flat))
    assert len({len(p) for p in parts}) == 1
    assert len(flat) == n - n % (world * workers)


@settings(max_examples=80, deadline=None)
@given(n=st.integers(1, 200), world=st.integers(1, 8), workers=st.integers(1, 4))
def test_pad_covers_every_item_with_equal_counts(n, world, workers):
    ds = Dataset.range(n)
    parts = [split(ds, r, world, worker=w, num_workers=workers).to_list()
             for r in range(world) for w in range(workers)]
    counts = collections.Counter(x for p in parts for x in p)
    assert set(counts) == set(range(n))
    per_part = len(parts[0])
    assert len({len(p) for p in parts}) == 1
    assert sum(counts.values()) - n < world * workers
    if n >= world * workers:
        assert max(counts.values()) <= 2
    else:
        assert max(counts.values()) <= -(-per_part * world * workers // n)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 120), world=st.integers(1, 6))
def test_policy_none_is_exactly_once(n, world):
    parts = [Dataset.range(n).shard(r, world, policy="none").to_list() for r in range(world)]
    assert sorted(x for p in parts for x in p) == list(range(n))


def test_equal_batch_counts_across_ranks():
    for policy in ("pad", "drop_remainder"):
        counts = {len(Dataset.range(103).shard(r, 4, policy=policy).batch(8).to_list())
                  for r in range(4)}
        assert len(counts) == 1


def test_global_shuffle_then_shard_reshuffles_each_epoch_and_stays_disjoint():
    ds = Dataset.range(40).global_shuffle(seed=3)
    shards = [ds.shard(r, 4, policy="drop_remainder") for r in range(4)]
    epoch0 = [s.to_list() for s in shards]
    epoch1 = [s.to_list() for s in shards]
    for epoch in (epoch0, epoch1):
        assert sorted(x for p in epoch for x in p) == list(range(40))
    assert epoch0 != epoch1


def test_stream_shard_takes_every_nth_item():
    stream = Dataset.from_reader(lambda: iter(range(10)), deterministic=True)
    assert stream.shard(1, 3, policy="none").to_list() == [1, 4, 7]
    with pytest.raises(ValueError, match="policy='pad' needs a random-access dataset"):
        stream.shard(0, 2)
    assert_resumes_everywhere(stream.shard(2, 3, policy="none"))


def test_shard_resumes_everywhere():
    assert_resumes_everywhere(Dataset.range(23).global_shuffle(seed=1).shard(1, 4))


@pytest.mark.parametrize("policy", ["pad", "drop_remainder", "none"])
@pytest.mark.parametrize(("old", "new"), [(4, 2), (2, 3), (3, 1)])
def test_resume_with_a_different_world_size_loses_and_repeats_nothing(old, new, policy):
    n = 50
    ds = Dataset.range(n).global_shuffle(seed=9)
    before = []
    states = []
    for r in range(old):
        it = ds.shard(r, old, policy=policy).iterator()
        for _ in range(5):
            before.append(next(it))
        states.append(it.get_state())
    after = []
    for r in range(new):
        after.extend(ds.shard(r, new, policy=policy).iterator(states[0]))
    both = before + after
    counts = collections.Counter(both)
    if policy == "drop_remainder":
        assert max(counts.values()) == 1 and n - len(counts) < new
    elif policy == "none":
        assert sorted(both) == list(range(n))
    else:
        assert set(counts) == set(range(n)) and max(counts.values()) <= 2


def test_rank_and_world_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "3")
    assert resolve_rank_world(None, None) == (2, 3)
    assert Dataset.range(9).shard().to_list() == [2, 5, 8]
    monkeypatch.setenv("RANK", "x")
    with pytest.raises(ValueError, match="RANK must be an int, got 'x'"):
        resolve_rank_world(None, None)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rank": 3, "world_size": 3}, "`rank` must be below world_size=3, got 3"),
        ({"rank": 0, "world_size": 0}, "`world_size` must be a positive int, got 0"),
        ({"rank": 0, "world_size": 2, "worker": 2, "num_workers": 2},
         "`worker` must be below num_workers=2, got 2"),
        ({"rank": 0, "world_size": 2, "policy": "even"}, "`policy` must be one of"),
        ({"rank": 0, "world_size": 2, "mode": "lines"}, "`mode` must be one of"),
    ],
)
def test_bad_split_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        split(Dataset.range(4), **kwargs)


def write_recordio_files(directory, counts):
    from feedline import recordio

    paths = []
    label = 0
    for f, count in enumerate(counts):
        path = str(directory / f"part-{f}.rec")
        with recordio.RecordIOWriter(path) as w:
            for _ in range(count):
                w.write(b"record-%d" % label)
                label += 1
        recordio.build_index(path)
        paths.append(path)
    return paths, label


@settings(max_examples=25, deadline=None)
@given(counts=st.lists(st.integers(0, 30), min_size=1, max_size=5), world=st.integers(1, 5),
       workers=st.integers(1, 3))
def test_index_mode_over_record_files_is_exactly_once_with_equal_counts(
        tmp_path_factory, counts, world, workers):
    d = tmp_path_factory.mktemp("rec")
    paths, total = write_recordio_files(d, counts)
    if total == 0:
        return
    parts = [split(paths, r, world, worker=w, num_workers=workers, policy="drop_remainder",
                   mode="index").to_list()
             for r in range(world) for w in range(workers)]
    flat = [x for p in parts for x in p]
    assert len(flat) == len(set(flat)) == total - total % (world * workers)
    assert len({len(p) for p in parts}) == 1


@pytest.mark.parametrize("num_parts", [1, 2, 3, 4, 5, 6])
def test_byte_mode_split_gives_the_parts_mxnet_gives(fixtures_dir, num_parts):
    import json

    from feedline.recordio import unpack

    expected = json.loads((fixtures_dir / "mxnet" / "expected.json").read_text())
    parts = expected["input_split"]["parts"]
    key = next(k for k in parts if ";" in k and k.endswith(f"nsplit={num_parts}"))
    paths = [str(fixtures_dir / "mxnet" / f"part-{x}.rec") for x in "abc"]
    got = [[int(unpack(rec)[0].label) for rec in split(paths, r, num_parts, mode="bytes")]
           for r in range(num_parts)]
    assert got == parts[key]
