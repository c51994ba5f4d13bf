"""feedline.sharded: records spread over N shards, renamed into place only on success."""

from __future__ import annotations

import gc
import os

import pytest

from feedline import recordio
from feedline.sharded import ShardedWriter, shard_paths


def _listing(directory) -> list[str]:
    return sorted(os.listdir(directory))


def test_recordio_round_robin_with_index(tmp_path):
    with ShardedWriter(tmp_path / "train", 3, format="recordio") as w:
        shards = [w.write(b"rec%d" % i) for i in range(8)]
    assert shards == [0, 1, 2, 0, 1, 2, 0, 1]
    assert w.counts == [3, 3, 2]
    assert _listing(tmp_path) == [".train-of-00003.manifest.json"] + [
        f"train-0000{i}-of-00003.{ext}" for i in range(3) for ext in ("idx", "rec")
    ]
    # each .idx maps the global record number to its record, as MXIndexedRecordIO reads it
    for k, path in enumerate(w.paths):
        ir = recordio.IndexedRecordIO(path[:-4] + ".idx", path)
        assert ir.keys == list(range(k, 8, 3))
        assert [ir.read_idx(key) for key in ir.keys] == [b"rec%d" % i for i in ir.keys]
        ir.close()


def test_routing_by_key_and_explicit_shard(tmp_path):
    with ShardedWriter(tmp_path / "k", 4, format="recordio") as w:
        assert w.write(b"a", key=6) == 2
        assert w.write(b"b", key="user-1") == w.shard_for("user-1") == w.shard_for(b"user-1")
        assert w.write(b"c", shard=3) == 3
        with pytest.raises(ValueError, match=r"`shard` must be an int in \[0, 4\), got 4"):
            w.write(b"d", shard=4)
        with pytest.raises(TypeError, match="`key` must be an int, str or bytes, got float"):
            w.write(b"e", key=1.5)
        with pytest.raises(TypeError, match="`key` must be an int or str for format 'recordio'"):
            w.write(b"f", key=b"raw")
    ir = recordio.IndexedRecordIO(tmp_path / "k-00002-of-00004.idx", tmp_path / "k-00002-of-00004.rec")
    assert ir.read_idx(6) == b"a"
    ir.close()
    shard = w.shard_for("user-1")
    rec = tmp_path / f"k-0000{shard}-of-00004.rec"
    ir = recordio.IndexedRecordIO(str(rec)[:-4] + ".idx", rec, key_type=str)
    assert ir.read_idx("user-1") == b"b"
    ir.close()


def test_tfrecord_shards(tmp_path):
    tfrecord = pytest.importorskip("feedline.tfrecord")
    with ShardedWriter(tmp_path / "out", 2) as w:
        for i in range(5):
            w.write(b"x%d" % i)
    assert w.paths == [str(tmp_path / "out-00000-of-00002"), str(tmp_path / "out-00001-of-00002")]
    assert list(tfrecord.read(w.paths[0])) == [b"x0", b"x2", b"x4"]
    assert list(tfrecord.read(w.paths[1])) == [b"x1", b"x3"]


def test_tfrecord_shards_compressed(tmp_path):
    tfrecord = pytest.importorskip("feedline.tfrecord")
    with ShardedWriter(tmp_path / "gz", 2, compression="GZIP", suffix=".tfrecord.gz") as w:
        w.write(b"zipped")
    assert list(tfrecord.read(w.paths[0])) == [b"zipped"]
    assert list(tfrecord.read(w.paths[1])) == []


@pytest.mark.parametrize("fmt", ["recordio", "tfrecord"])
def test_an_exception_inside_the_block_leaves_no_file(tmp_path, fmt):
    if fmt == "tfrecord":
        pytest.importorskip("feedline.tfrecord")
    with pytest.raises(RuntimeError, match="boom"):
        with ShardedWriter(tmp_path / "part", 4, format=fmt) as w:
            for i in range(10):
                w.write(b"r%d" % i)
            assert len(_listing(tmp_path)) == (8 if fmt == "recordio" else 4)
            assert all(name.startswith(".") for name in _listing(tmp_path))  # hidden temps
            raise RuntimeError("boom")
    assert _listing(tmp_path) == []
    with pytest.raises(ValueError, match="write to a ShardedWriter that is aborted"):
        w.write(b"late")


def test_an_unclosed_writer_never_commits(tmp_path):
    w = ShardedWriter(tmp_path / "gc", 2, format="recordio")
    w.write(b"x")
    del w
    gc.collect()
    assert _listing(tmp_path) == []


def test_empty_shards_are_written_and_names(tmp_path):
    with ShardedWriter(tmp_path, 3, format="recordio", name="cats") as w:
        w.write(b"only")
    assert [os.path.basename(p) for p in w.paths] == [f"cats-0000{i}-of-00003.rec" for i in range(3)]
    assert [list(recordio.read(p)) for p in w.paths] == [[b"only"], [], []]
    assert shard_paths("d/x-{index:02d}-of-{num_shards}.rec", 2) == [
        "d/x-00-of-2.rec",
        "d/x-01-of-2.rec",
    ]
    assert shard_paths("p", 123456)[-1] == "p-123455-of-123456"
    with pytest.raises(ValueError, match="does not give 3 distinct names"):
        shard_paths("same-{num_shards}", 3)


def test_close_is_idempotent_and_overwrites(tmp_path):
    for payload in (b"first", b"second"):
        w = ShardedWriter(tmp_path / "o", 1, format="recordio")
        w.write(payload)
        w.close()
        w.close()
        w.abort()  # after a commit, abort does nothing
    assert list(recordio.read(tmp_path / "o-00000-of-00001.rec")) == [b"second"]


def test_argument_validation(tmp_path):
    with pytest.raises(ValueError, match="`num_shards` must be a positive int, got 0"):
        ShardedWriter(tmp_path / "a", 0)
    with pytest.raises(ValueError, match="`format` must be one of 'tfrecord', 'recordio', got 'csv'"):
        ShardedWriter(tmp_path / "a", 2, format="csv")
    with pytest.raises(ValueError, match="`compression` is only for format 'tfrecord', got 'GZIP'"):
        ShardedWriter(tmp_path / "a", 2, format="recordio", compression="GZIP")
    assert _listing(tmp_path) == []
