"""A packing process killed outright leaves its fragment folder; the next ``pack --ray``
into the same output removes it (without Ray: the sweep alone)."""

from __future__ import annotations

import os
import subprocess
import sys

from feedline.image._pack_ray import remove_stale_parts


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_folders_of_dead_packers_go_and_live_ones_stay(tmp_path):
    first = tmp_path / "train-00000-of-00002.rec"
    dead = tmp_path / f".{first.name}.parts-{_dead_pid()}-0123abcd"
    live = tmp_path / f".{first.name}.parts-{os.getpid()}-4567ef01"
    other_set = tmp_path / f".val-00000-of-00002.rec.parts-{_dead_pid()}-89ab"
    for folder in (dead, live, other_set):
        folder.mkdir()
        (folder / "0").write_bytes(b"fragment")
    assert remove_stale_parts(str(first)) == [dead.name]
    assert not dead.exists()
    assert (live / "0").read_bytes() == b"fragment"
    assert other_set.exists()  # another shard set's folder is that pack's business


def test_a_missing_output_folder_removes_nothing(tmp_path):
    assert remove_stale_parts(str(tmp_path / "absent" / "a.rec")) == []
