"""map(..., on_error="skip"/"replace", max_skips=N) in-thread, in processes and threads."""

from __future__ import annotations

import logging

import pytest

from feedline import Dataset
from feedline.dataset.options import ErrorOptions
from feedline.exceptions import DataError, DecodeError

from resume_helpers import assert_resumes_everywhere


def _decode(x):
    if x % 3 == 1:
        raise DecodeError("bad payload", path="data.rec", index=x, offset=16 * x)
    return x * 10


MAPS = [{}, {"num_workers": 2}, {"num_workers": 2, "backend": "thread"}]


@pytest.mark.parametrize("options", MAPS, ids=["in-thread", "processes", "threads"])
def test_skip_drops_failures_and_counts_them(options, caplog):
    ds = Dataset.range(10).map(_decode, on_error="skip", **options)
    try:
        with caplog.at_level(logging.WARNING, logger="feedline._internal.on_error"):
            it = ds.iterator(stats=True)
            assert list(it) == [0, 20, 30, 50, 60, 80, 90]
        report = it.stats()
        assert report.stages[-1].skipped == 3
        assert report.stages[-1].name.startswith("skip_errors(map(_decode)")
        assert "skipped element 1: DecodeError: data.rec: record 1 at byte 16: bad payload" \
            in caplog.text
        assert "skipped element 7:" in caplog.text
        it.close()
    finally:
        ds.close()


@pytest.mark.parametrize("options", MAPS, ids=["in-thread", "processes", "threads"])
def test_max_skips_fails_loudly(options):
    ds = Dataset.range(10).map(_decode, on_error="skip", errors=ErrorOptions(max_skips=2), **options)
    try:
        got = []
        with pytest.raises(DataError, match=r"map\(_decode\): 3 elements failed, more than "
                                            r"max_skips=2; the last: element 7: DecodeError: "
                                            r"data.rec: record 7"):
            for x in ds:
                got.append(x)
        assert got == [0, 20, 30, 50, 60]
    finally:
        ds.close()
    assert Dataset.range(10).map(_decode, on_error="skip", errors=ErrorOptions(max_skips=3)).to_list()[-1] == 90


def test_the_log_stops_after_five_skips(caplog):
    with caplog.at_level(logging.WARNING, logger="feedline._internal.on_error"):
        out = Dataset.range(30).map(_decode, on_error="skip").to_list()
    assert len(out) == 20
    assert caplog.text.count("skipped element") == 5
    assert "further skips are counted, not logged" in caplog.text


def test_skip_resumes_exactly_with_its_count():
    ds = Dataset.range(12).shuffle(4, seed=1).map(_decode, on_error="skip", errors=ErrorOptions(max_skips=4))
    full = assert_resumes_everywhere(ds)
    assert len(full) == 8
    it = ds.iterator()
    for _ in range(5):
        next(it)
    state = it.get_state()
    assert state["stages"]["skipped"] >= 1
    resumed = ds.iterator(state)
    list(resumed)
    assert resumed._it.skipped == 4


def test_replace_keeps_ranks_balanced_under_pad_sharding():
    counts = []
    for rank in range(3):
        ds = Dataset.range(10).shard(rank, 3, policy="pad").map(
            _decode, on_error="replace", errors=ErrorOptions(replacement=-1)).batch(2)
        batches = ds.to_list()
        counts.append(len(batches))
        flat = [x for b in batches for x in b]
        assert all(x == -1 or x % 30 != 10 for x in flat)
    assert counts == [2, 2, 2]
    skipped = [len(Dataset.range(10).shard(r, 3).map(_decode, on_error="skip").to_list())
               for r in range(3)]
    assert len(set(skipped)) > 1  # plain skipping would have left the ranks uneven


def test_options_are_validated():
    with pytest.raises(ValueError, match="`on_error` must be one of 'raise', 'skip', 'replace', "
                                         "got 'ignore'"):
        Dataset.range(3).map(abs, on_error="ignore")
    with pytest.raises(ValueError, match="`max_skips` must be a non-negative int, got -1"):
        Dataset.range(3).map(abs, on_error="skip", errors=ErrorOptions(max_skips=-1))
    with pytest.raises(ValueError, match="`max_skips` needs on_error='skip' or 'replace'"):
        Dataset.range(3).map(abs, errors=ErrorOptions(max_skips=2))
    with pytest.raises(ValueError, match="on_error='replace' needs a `replacement` element"):
        Dataset.range(3).map(abs, on_error="replace")
    with pytest.raises(ValueError, match="`replacement` needs on_error='replace'"):
        Dataset.range(3).map(abs, on_error="skip", errors=ErrorOptions(replacement=0))
