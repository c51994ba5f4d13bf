"""Every file feedline writes gets the usual mode under the user's umask (``0o666 & ~umask``),
as ``open()`` gives it — never the ``0o600`` of a bare temporary file — whether it is
written in place or under a temporary name and renamed."""

from __future__ import annotations

import importlib.util
import os
import stat

import numpy as np
import pytest
import torch

from feedline import idx, ndarray_file, recordio, sharded, tfrecord
from feedline._internal.atomic import atomic_open, file_mode, replace_file
from feedline.image.listfile import ListItem, write_list
from feedline.train.checkpoint import atomic_write, save_params


@pytest.fixture(params=[0o022, 0o027, 0o002])
def umask(request):
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def written_files(d) -> list[str]:
    """Every file feedline wrote into ``d`` (and how), each made by a public writer."""
    out = []
    # TFRecord, its sidecar .index
    p = os.path.join(d, "a.tfrecord")
    tfrecord.write(p, [b"x", b"yy"])
    tfrecord.build_index(p)
    out += [p, p + ".index"]
    # RecordIO with .idx
    rec, ix = os.path.join(d, "b.rec"), os.path.join(d, "b.idx")
    with recordio.IndexedRecordIO(ix, rec, "w") as w:
        w.write_idx(0, b"payload")
    out += [rec, ix]
    # a .idx built afterwards by scanning
    rec2 = os.path.join(d, "c.rec")
    with recordio.RecordIOWriter(rec2) as w:
        w.write(b"z")
    recordio.build_index(rec2)
    out += [rec2, recordio.default_idx_path(rec2)]
    # shard sets (tfrecord and recordio + .idx)
    with sharded.ShardedWriter(os.path.join(d, "shards"), 2) as w:
        for i in range(4):
            w.write(b"%d" % i)
        out += list(w.paths)
    with sharded.ShardedWriter(os.path.join(d, "rshards"), 2, format="recordio") as w:
        for i in range(4):
            w.write(b"%d" % i)
        out += list(w.paths) + [os.path.splitext(q)[0] + ".idx" for q in w.paths]
    # .lst
    lst = os.path.join(d, "x.lst")
    write_list(lst, [ListItem(0, 1.0, "a.jpg")])
    out.append(lst)
    # MNIST IDX, MXNet NDArray files
    ip = os.path.join(d, "labels.idx1-ubyte")
    idx.write_idx(ip, np.arange(3, dtype=np.uint8))
    out.append(ip)
    nd = os.path.join(d, "mean.bin")
    ndarray_file.save(nd, {"mean_img": np.zeros((3, 2, 2), np.float32)})
    out.append(nd)
    # a WebDataset tar shard with its index, a Parquet file
    from feedline.formats.webdataset.writer import TarWriter

    tar = os.path.join(d, "w.tar")
    with TarWriter(tar, index=True) as tw:
        tw.write({"__key__": "k", "txt": "hello"})
    out.append(tar)
    if importlib.util.find_spec("pyarrow") is not None:
        from feedline.formats.parquet.writer import ParquetWriter

        pq = os.path.join(d, "t.parquet")
        with ParquetWriter(pq) as pw:
            pw.write({"x": 1})
        out.append(pq)
    # checkpoints and parameter files
    ck = os.path.join(d, "ckpt", "checkpoint-p0-s1.flc")
    atomic_write(ck, b"state")
    out.append(ck)
    params = os.path.join(d, "model.flp")
    save_params(params, torch.nn.Linear(2, 1))
    out.append(params)
    return out


def test_every_written_file_has_the_umask_mode(tmp_path, umask):
    expected = 0o666 & ~umask
    files = written_files(str(tmp_path))
    assert all(os.path.exists(p) for p in files)
    assert {p: oct(mode(p)) for p in files if mode(p) != expected} == {}
    leftovers = [n for _, _, names in os.walk(tmp_path) for n in names if n.endswith(".tmp")]
    assert leftovers == []


def test_file_mode_follows_the_current_umask(umask):
    assert file_mode() == 0o666 & ~umask


def test_atomic_open_keeps_the_old_file_on_error(tmp_path, umask):
    path = tmp_path / "keep.bin"
    replace_file(path, b"old")
    with pytest.raises(RuntimeError, match="disk full"), atomic_open(path) as f:
        f.write(b"half of the new")
        raise RuntimeError("disk full")
    assert path.read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["keep.bin"]
    assert mode(path) == 0o666 & ~umask


def test_atomic_open_never_follows_a_planted_symlink(tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    target = tmp_path / "out.index"
    # whatever temporary names an attacker guesses, the writer creates its own exclusively
    for guess in (".out.index.tmp", "out.index.tmp"):
        os.symlink(victim, tmp_path / guess)
    replace_file(target, b"new")
    assert victim.read_bytes() == b"precious"
    assert target.read_bytes() == b"new"
