"""pack_images(..., backend="ray") on a 2-node local Ray cluster: tasks write the shards.

One cluster for the whole module: :mod:`ray_cluster` runs :mod:`ray_pack_scenarios` in
a loopback-only network namespace (head + a second node on 127.0.0.1), which packs with
Ray tasks and with local processes and reports; each test checks one scenario. Nothing
of Ray runs outside that namespace, and every Ray process is gone when the fixture
returns.
"""

from __future__ import annotations

import pytest

import ray_cluster

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return ray_cluster.scenario_report("ray_pack_scenarios.py", tmp_path_factory, timeout=300)


def _byte_identical(case: dict) -> None:
    local, ray = case["names"]
    assert local == ray
    assert case["equal"] and all(case["equal"].values()), case["equal"]


def test_folder_pack_on_ray_is_byte_identical_to_a_local_pack(report):
    case = report["folder"]
    _byte_identical(case)
    names = case["names"][0]
    assert ".train-of-00003.manifest.json" in names and "train.lst" in names
    assert sum(n.endswith(".rec") for n in names) == 3 == sum(n.endswith(".idx") for n in names)
    assert case["ray"] == case["process"] and case["ray"]["count"] == 24


def test_feedline_pack_ray_on_the_command_line_writes_the_same_files(report):
    case = report["cli"]
    assert case["returncode"] == 0, case["stderr"]
    _byte_identical(case)


def test_tasks_not_the_driver_write_the_files(report):
    writers = report["folder_writers"]
    kinds = [kind for kind, _, _ in writers]
    assert kinds.count("wrote") == 3 and kinds.count("encoded") >= 2
    assert all(pid != report["driver_pid"] for _, pid, _ in writers)
    assert {node for _, _, node in writers} <= set(report["nodes"])


def test_list_with_skipped_images_packs_identically_to_tfrecord(report):
    case = report["list"]
    _byte_identical(case)
    assert case["ray"] == case["process"]
    assert [index for index, _, _ in case["ray"]["skipped"]] == [5, 17]
    assert case["ray"]["counts"] == [11, 11]


def test_failing_image_leaves_no_manifest_no_shard_no_temporary(report):
    failed = report["raise"]
    assert failed["type"] == "FileNotFoundError" and "emu/missing.jpg" in failed["message"]
    assert any("stage 'pack'" in note and "item 5" in note for note in failed["notes"])
    assert "_encode_item" in failed["remote_tb"]  # the task's own traceback
    assert failed["left"] == []


def test_second_node_killed_while_encoding_changes_no_byte(report):
    case = report["node_killed"]
    assert case["killed"] and "error" not in case["outcome"], case["outcome"]
    assert case["outcome"]["written"] == case["items"]
    assert case["nodes"] == 2
    assert case["calls"] > case["items"], case  # a task lost with the node ran again
    _byte_identical(case)
