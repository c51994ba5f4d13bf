"""Fault injection for ShardedWriter: a writer killed between any two steps of a write
never leaves a set that a reader takes for complete, and the next writer cleans up."""

from __future__ import annotations

import json
import os

import pytest

from feedline import recordio, tfrecord
from feedline.exceptions import IncompleteShardSetError
from feedline.sharded import ShardedWriter, check_shard_sets
from feedline.storage.fs import expand

OLD = [b"old-%d" % i for i in range(8)]
NEW = [b"new-%d" % i for i in range(9)]


def _write(prefix, records, fmt):
    with ShardedWriter(prefix, 3, format=fmt) as w:
        for r in records:
            w.write(r)


def _crash_writer(prefix, records, fmt, crash_at):
    """Fork a child that writes the set and dies (``os._exit``) just before its
    ``crash_at``-th ``os.replace`` (-1: in the middle of writing records)."""
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        try:
            calls = [0]
            real_replace = os.replace

            def replace(src, dst):
                if calls[0] == crash_at:
                    os._exit(0)
                calls[0] += 1
                real_replace(src, dst)

            os.replace = replace
            w = ShardedWriter(prefix, 3, format=fmt)
            for i, r in enumerate(records):
                if crash_at == -1 and i == len(records) // 2:
                    os._exit(0)
                w.write(r)
            w.close()
            os._exit(0)
        except BaseException:  # noqa: BLE001
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def _read_set(pattern, fmt):
    out = []
    for path in expand(pattern):
        if fmt == "recordio":
            if path.endswith(".rec"):
                out.extend(recordio.read(path))
        else:
            out.extend(tfrecord.read(path))
    return out


@pytest.mark.parametrize("fmt, steps", [("tfrecord", 5), ("recordio", 8)])
@pytest.mark.parametrize("existing", [False, True])
def test_crash_between_any_two_steps(tmp_path, fmt, steps, existing):
    outcomes = set()
    for crash_at in range(-1, steps + 1):
        d = tmp_path / f"{crash_at}"
        d.mkdir()
        prefix = str(d / "train")
        pattern = prefix + "-*"
        if existing:
            _write(prefix, OLD, fmt)
        _crash_writer(prefix, NEW, fmt, crash_at)
        try:
            got = _read_set(pattern, fmt)
        except IncompleteShardSetError as exc:
            assert "incomplete shard set" in str(exc) and ".train-of-00003.manifest.json" in str(exc)
            outcomes.add("refused")
        except FileNotFoundError as exc:
            assert not existing and "no file matches" in str(exc)
            outcomes.add("nothing")
        else:  # a set that reads must be one whole set, never a mix or a part
            assert sorted(got) == sorted(NEW if crash_at == steps else OLD), crash_at
            outcomes.add("whole")
        # the next writer removes the dead writer's temporaries and commits a good set
        _write(prefix, NEW, fmt)
        assert sorted(_read_set(pattern, fmt)) == sorted(NEW)
        names = sorted(os.listdir(d))
        assert not [n for n in names if ".tmp-" in n], names
        manifest = json.loads((d / ".train-of-00003.manifest.json").read_text())
        assert manifest["complete"] and manifest["records"] == [3, 3, 3]
    assert "refused" in outcomes and "whole" in outcomes


def test_missing_or_changed_shard_is_refused(tmp_path):
    prefix = str(tmp_path / "t")
    _write(prefix, NEW, "tfrecord")
    paths = expand(prefix + "-*")
    assert len(paths) == 3
    with open(paths[1], "ab") as f:
        f.write(b"x")
    with pytest.raises(IncompleteShardSetError, match=r"t-00001-of-00003 has \d+ bytes, the manifest says \d+"):
        expand(prefix + "-*")
    os.remove(paths[1])
    with pytest.raises(IncompleteShardSetError, match=r"t-00001-of-00003 is missing \(2 of 3 files present\)"):
        expand(prefix + "-*")
    with pytest.raises(IncompleteShardSetError, match="is missing"):
        check_shard_sets([paths[0]])
    (tmp_path / ".t-of-00003.manifest.json").write_text("{not json")
    with pytest.raises(IncompleteShardSetError, match="damaged shard-set manifest"):
        expand(prefix + "-*")


def test_live_writers_temporaries_are_kept(tmp_path):
    prefix = str(tmp_path / "t")
    first = ShardedWriter(prefix, 2)
    first.write(b"a")
    with ShardedWriter(prefix, 2) as second:  # same process: alive, so not removed
        second.write(b"b")
    assert len([n for n in os.listdir(tmp_path) if ".tmp-" in n]) == 2
    first.close()
    assert sorted(_read_set(prefix + "-*", "tfrecord")) == [b"a"]
