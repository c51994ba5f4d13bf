"""Dataset.cache(path) / snapshot(path): write while yielding, read later, never half-read."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from feedline import Dataset
from feedline.dataset.cache import pipeline_fingerprint

from resume_helpers import _norm, assert_resumes_everywhere

CALLS: list[int] = []
FAIL_AT: list[int] = []


def _decode(x):
    CALLS.append(x)
    if x in FAIL_AT:
        raise RuntimeError(f"decode failed at {x}")
    return {"id": x, "pixels": np.full((2, 3), x, dtype=np.uint8)}


def _pipeline(path, n=10, shard_size=4):
    return Dataset.range(n).map(_decode).cache(path, shard_size=shard_size)


def _staging(path):
    return [e for e in os.listdir(path) if e.startswith(".staging-")]


def test_first_pass_writes_later_passes_read(tmp_path):
    CALLS.clear()
    ds = _pipeline(tmp_path / "c")
    first = [_norm(x) for x in ds]
    assert len(CALLS) == 10 and ds.is_cached()
    directory = ds.directory
    assert sorted(os.listdir(directory)) == [
        "manifest.json", "part-00000.tfrecord", "part-00001.tfrecord", "part-00002.tfrecord"]
    manifest = json.loads(open(os.path.join(directory, "manifest.json")).read())
    assert [p["count"] for p in manifest["parts"]] == [4, 4, 2] and manifest["count"] == 10
    CALLS.clear()
    assert [_norm(x) for x in ds] == first and CALLS == []
    again = _pipeline(tmp_path / "c")  # another process would build the same pipeline
    assert [_norm(x) for x in again] == first and CALLS == []
    assert _staging(tmp_path / "c") == []


def test_exact_resume_while_the_cache_is_being_written(tmp_path):
    full = [_norm(x) for x in _pipeline(tmp_path / "ref")]
    for k in range(11):
        ds = _pipeline(tmp_path / f"c{k}")
        it = ds.iterator()
        head = [_norm(next(it)) for _ in range(k)]
        state = json.loads(json.dumps(it.get_state()))
        it.close()
        assert not ds.is_cached()
        rest = [_norm(x) for x in ds.iterator(state)]
        assert head + rest == full, k
        assert ds.is_cached(), k  # the resumed iterator finished the cache ...
        CALLS.clear()
        assert [_norm(x) for x in ds] == full and CALLS == []  # ... with every element


def test_a_write_state_still_resumes_after_the_cache_was_completed(tmp_path):
    ds = _pipeline(tmp_path / "c")
    it = ds.iterator()
    head = [_norm(next(it)) for _ in range(3)]
    state = it.get_state()
    rest = [_norm(x) for x in it]
    assert ds.is_cached()
    assert [_norm(x) for x in ds.iterator(state)] == rest and len(head + rest) == 10


def test_reading_resumes_exactly_everywhere(tmp_path):
    ds = Dataset.range(9).shuffle(3, seed=1).map(_decode).cache(tmp_path / "c", shard_size=2)
    ds.to_list()
    assert ds.is_cached()
    assert len(assert_resumes_everywhere(ds)) == 9


def test_a_job_killed_while_writing_leaves_nothing_readable(tmp_path):
    path = tmp_path / "c"
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_cache import _pipeline
        it = iter(_pipeline({str(path)!r}))
        for _ in range(6):
            next(it)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], env=os.environ.copy())
    assert proc.returncode == -9
    ds = _pipeline(path)
    assert not ds.is_cached() and len(_staging(path)) == 1  # half-written, not read
    CALLS.clear()
    out = [_norm(x) for x in ds]
    assert [x["id"] for x in out] == list(range(10)) and len(CALLS) == 10  # rebuilt
    assert ds.is_cached() and _staging(path) == []  # the dead job's files are gone


def test_an_exception_while_writing_then_a_rebuild(tmp_path):
    ds = _pipeline(tmp_path / "c")
    FAIL_AT[:] = [6]
    try:
        with pytest.raises(RuntimeError, match="decode failed at 6"):
            ds.to_list()
    finally:
        FAIL_AT.clear()
    assert not ds.is_cached()
    assert [x["id"] for x in ds.to_list()] == list(range(10)) and ds.is_cached()
    CALLS.clear()
    assert len(ds.to_list()) == 10 and CALLS == []


def _plus_one(x):
    return x + 1


def _plus_two(x):
    return x + 2


def test_a_changed_pipeline_invalidates_the_cache(tmp_path):
    path = tmp_path / "c"
    one = Dataset.range(5).map(_plus_one).cache(path)
    assert one.to_list() == [1, 2, 3, 4, 5] and one.is_cached()
    two = Dataset.range(5).map(_plus_two).cache(path)
    assert two.fingerprint != one.fingerprint
    assert two.to_list() == [2, 3, 4, 5, 6]
    assert not one.is_cached()  # cache() keeps only the current pipeline's cache
    assert Dataset.range(6).map(_plus_two).cache(path).to_list() == [2, 3, 4, 5, 6, 7]
    snap = tmp_path / "s"
    a, b = Dataset.range(5).map(_plus_one).snapshot(snap), Dataset.range(5).snapshot(snap)
    a.to_list(), b.to_list()
    assert a.is_cached() and b.is_cached()  # snapshot() keeps both
    assert pipeline_fingerprint(Dataset.range(5).map(_plus_one)) == a.fingerprint


def test_a_damaged_cache_is_rebuilt(tmp_path, caplog):
    ds = _pipeline(tmp_path / "c")
    full = [_norm(x) for x in ds]
    part = os.path.join(ds.directory, "part-00001.tfrecord")
    with open(part, "r+b") as f:
        f.truncate(10)
    with caplog.at_level(logging.WARNING, logger="feedline.dataset.cache"):
        assert not ds.is_cached()
    assert "damaged cache" in caplog.text
    CALLS.clear()
    assert [_norm(x) for x in ds] == full and len(CALLS) == 10 and ds.is_cached()


def test_two_writers_at_once(tmp_path):
    ds = _pipeline(tmp_path / "c")
    a, b = ds.iterator(), ds.iterator()
    out_a, out_b = [], []
    for _ in range(10):
        out_a.append(_norm(next(a)))
        out_b.append(_norm(next(b)))
    assert list(a) == [] and list(b) == [] and out_a == out_b
    assert ds.is_cached() and [_norm(x) for x in ds] == out_a
    assert _staging(tmp_path / "c") == []


def test_in_memory_cache_and_arguments():
    ds = Dataset.range(3).map(_plus_one).cache()
    assert ds.to_list() == ds.to_list() == [1, 2, 3]
    with pytest.raises(ValueError, match="`shard_size` must be a positive int, got 0"):
        Dataset.range(3).cache("x", shard_size=0)
    with pytest.raises(TypeError, match="`path` must be a directory path, got int"):
        Dataset.range(3).cache(3)


def test_cache_after_worker_map_and_per_rank_under_sharding(tmp_path):
    ds = Dataset.range(12).map(_plus_one, num_workers=2)
    try:
        cached = ds.cache(tmp_path / "w", shard_size=5)
        assert cached.to_list() == list(range(1, 13)) and cached.is_cached()
        assert cached.to_list() == list(range(1, 13))
    finally:
        ds.close()
    # every rank caches its own shard: snapshot() keys them by fingerprint in one directory
    parts = [Dataset.range(10).shard(r, 2).map(_plus_one).snapshot(tmp_path / "s")
             for r in range(2)]
    assert parts[0].fingerprint != parts[1].fingerprint
    first = [p.to_list() for p in parts]
    assert sorted(first[0] + first[1]) == list(range(1, 11))
    assert all(p.is_cached() for p in parts)
    assert [p.to_list() for p in parts] == first
    # cache() keeps one pipeline per directory: ranks sharing one would evict each other
    shared = [Dataset.range(10).shard(r, 2).map(_plus_one).cache(tmp_path / "c")
              for r in range(2)]
    [p.to_list() for p in shared]
    assert [p.is_cached() for p in shared] == [False, True]
