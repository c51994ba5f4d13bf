"""Dataset.mix and Dataset.choose: weighted mixing, exact resume, sharding, workers."""

from __future__ import annotations

import pytest

from feedline import Dataset

from resume_helpers import assert_resumes_everywhere


def _sources():
    return Dataset.range(8), Dataset.from_iterable([f"b{i}" for i in range(5)])


def test_mix_is_deterministic_per_seed_and_epoch():
    a, b = _sources()
    ds = Dataset.mix([a, b], [1, 1], seed=5, stop_on_empty=False)
    e0, e1 = ds.to_list(), ds.to_list()
    assert sorted(map(str, e0)) == sorted(map(str, list(range(8)) + [f"b{i}" for i in range(5)]))
    assert e0 != e1  # every iteration draws a new sequence ...
    assert list(ds.iterator(epoch=0)) == e0 and list(ds.iterator(epoch=1)) == e1  # ... repeatably
    other = Dataset.mix([a, b], [1, 1], seed=6, stop_on_empty=False)
    assert other.to_list() != e0
    # each source keeps its own order inside the mix
    assert [x for x in e0 if isinstance(x, int)] == list(range(8))
    assert [x for x in e0 if isinstance(x, str)] == [f"b{i}" for i in range(5)]


def test_mix_weights_set_the_proportions():
    a = Dataset.from_iterable(["a"]).repeat()
    b = Dataset.from_iterable(["b"]).repeat()
    out = Dataset.mix([a, b], [3, 1], seed=0).take(4000).to_list()
    assert 0.72 < out.count("a") / 4000 < 0.78
    only_b = Dataset.mix([a, b], [0, 2], seed=0).take(50).to_list()
    assert only_b == ["b"] * 50


def test_mix_stops_at_the_first_empty_source_by_default():
    a, b = Dataset.range(3), Dataset.range(100, 200)
    out = Dataset.mix([a, b], [1, 1], seed=1).to_list()
    assert sorted(x for x in out if x < 100) == [0, 1, 2]
    assert len(out) < 103  # b was not read to its end


def test_mix_cycle_restarts_exhausted_sources_with_a_new_epoch():
    a = Dataset.range(4).global_shuffle(seed=2)
    b = Dataset.from_iterable(["x", "y"])
    out = Dataset.mix([a, b], [1, 1], seed=3, cycle=True).take(60).to_list()
    ints = [x for x in out if isinstance(x, int)]
    rounds = [ints[i:i + 4] for i in range(0, len(ints) - len(ints) % 4, 4)]
    assert all(sorted(r) == [0, 1, 2, 3] for r in rounds) and len(set(map(tuple, rounds))) > 1
    strs = [x for x in out if isinstance(x, str)]
    assert strs == ["x", "y"] * (len(strs) // 2) + ["x"] * (len(strs) % 2)
    with pytest.raises(ValueError, match="mix: dataset 1 is empty, so it cannot cycle"):
        Dataset.mix([a, Dataset.from_iterable([])], [1, 1], seed=0, cycle=True).take(20).to_list()


@pytest.mark.parametrize("options", [{}, {"stop_on_empty": False}])
def test_mix_resumes_exactly_everywhere(options):
    a = Dataset.range(6).global_shuffle(seed=4)
    b = Dataset.from_iterable([f"b{i}" for i in range(4)]).shuffle(2, seed=1)
    assert_resumes_everywhere(Dataset.mix([a, b], [2, 1], seed=9, **options))


def test_mix_cycle_resumes_exactly_everywhere():
    a = Dataset.range(3).global_shuffle(seed=4)
    b = Dataset.from_iterable(["x", "y"])
    full = assert_resumes_everywhere(Dataset.mix([a, b], [1, 1], seed=2, cycle=True).take(25))
    assert len(full) == 25


def test_mix_under_sharding_reads_each_item_once():
    a, b = _sources()
    everything = sorted(map(str, Dataset.mix([a, b], [1, 2], seed=0,
                                             stop_on_empty=False).to_list()))
    before = []  # shard each source, then mix on every rank
    for r in range(3):
        before += Dataset.mix([a.shard(r, 3, policy="none"), b.shard(r, 3, policy="none")],
                              [1, 2], seed=0, stop_on_empty=False).to_list()
    assert sorted(map(str, before)) == everything
    mixed = Dataset.mix([a, b], [1, 2], seed=0, stop_on_empty=False)
    after = [x for r in range(3) for x in mixed.shard(r, 3, policy="none").iterator(epoch=0)]
    assert sorted(map(str, after)) == everything


def _double(x):
    return x * 2


def test_mix_then_worker_map_resumes_exactly():
    ds = Dataset.mix([Dataset.range(5), Dataset.range(10, 15)], [1, 1], seed=1,
                     stop_on_empty=False).map(_double, num_workers=2)
    try:
        full = assert_resumes_everywhere(ds, max_steps=4)
    finally:
        ds.close()
    assert sorted(full) == sorted(2 * x for x in [*range(5), *range(10, 15)])


def test_choose_follows_the_index_dataset():
    a, b = Dataset.range(3), Dataset.range(10, 12)
    idx = Dataset.from_iterable([0, 1, 1, 0, 1, 0, 0])
    assert Dataset.choose([a, b], idx).to_list() == [0, 10, 11, 1]  # b is empty at its 3rd pick
    assert Dataset.choose([a, b], idx, stop_on_empty=False).to_list() == [0, 10, 11, 1, 2]
    assert_resumes_everywhere(Dataset.choose([a, b.shuffle(2, seed=0)], idx))
    with pytest.raises(ValueError, match=r"choose: index 1 is 2, outside 0..1 for 2 datasets"):
        Dataset.choose([a, b], Dataset.from_iterable([0, 2])).to_list()
    with pytest.raises(TypeError, match="choose: `index_dataset` must be a Dataset, got list"):
        Dataset.choose([a, b], [0, 1])


def test_mix_validates_its_arguments():
    a, b = _sources()
    with pytest.raises(ValueError, match="`weights` has 1 entries for 2 datasets"):
        Dataset.mix([a, b], [1], seed=0)
    with pytest.raises(ValueError, match=r"`weights\[1\]` must be a finite number >= 0, got -1"):
        Dataset.mix([a, b], [1, -1], seed=0)
    with pytest.raises(ValueError, match=r"`weights` must have a positive sum, got \[0, 0\]"):
        Dataset.mix([a, b], [0, 0], seed=0)
    with pytest.raises(ValueError, match="mix: `datasets` must hold at least one dataset"):
        Dataset.mix([], [], seed=0)
    with pytest.raises(TypeError, match="mix: argument 1 must be a Dataset, got list"):
        Dataset.mix([a, [1, 2]], [1, 1], seed=0)
    with pytest.raises(TypeError, match="`cycle` must be a bool, got 1"):
        Dataset.mix([a, b], [1, 1], seed=0, cycle=1)
