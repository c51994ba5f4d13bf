"""A packing process killed outright leaves its fragment folder; the next ``pack --ray``
into the same output removes it (without Ray: the sweep alone)."""

from __future__ import annotations

import os
import subprocess
import sys

from feedline._internal.pid import host_tag
from feedline.image._pack_ray import parts_folder, remove_stale_parts


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _left_by(pid: int, first: str, host: str | None = None) -> str:
    """The fragment folder's name a packing process ``pid`` on ``host`` (this machine's
    by default) gives for the set whose first shard is ``first``."""
    return f".{os.path.basename(first)}.parts-{host or host_tag()}-{pid}-0123abcd"


def test_the_name_names_this_machine_and_process(tmp_path):
    first = str(tmp_path / "a.rec")
    assert os.path.basename(parts_folder(first)).startswith(
        _left_by(os.getpid(), first)[: -len("0123abcd")])


def test_folders_of_dead_packers_go_and_live_ones_stay(tmp_path):
    first = str(tmp_path / "train-00000-of-00002.rec")
    other = str(tmp_path / "val-00000-of-00002.rec")
    dead = tmp_path / _left_by(_dead_pid(), first)
    live = tmp_path / _left_by(os.getpid(), first)
    elsewhere = tmp_path / _left_by(_dead_pid(), first, host="another_machine")
    other_set = tmp_path / _left_by(_dead_pid(), other)
    for folder in (dead, live, elsewhere, other_set):
        folder.mkdir()
        (folder / "0").write_bytes(b"fragment")
    assert remove_stale_parts(first) == [dead.name]
    assert not dead.exists()
    assert (live / "0").read_bytes() == b"fragment"
    assert elsewhere.exists()  # its pid means nothing on this machine
    assert other_set.exists()  # another shard set's folder is that pack's business


def test_a_missing_output_folder_removes_nothing(tmp_path):
    assert remove_stale_parts(str(tmp_path / "absent" / "a.rec")) == []
