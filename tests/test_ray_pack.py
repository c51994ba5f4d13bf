"""pack_images(..., backend="ray") on a 2-node local Ray cluster: tasks write the shards.

One cluster for the whole module: :mod:`ray_cluster` runs :mod:`ray_pack_scenarios` in
a loopback-only network namespace (head + a second node on 127.0.0.1), which packs with
Ray tasks and with local processes and reports; each test checks one scenario. Nothing
of Ray runs outside that namespace, and every Ray process is gone when the fixture
returns.
"""

from __future__ import annotations

import os
import types

import numpy as np
import pytest

import ray_cluster
from feedline.image import _pack_ray
from feedline.image.pack import pack_images
from feedline.image.pack_options import EncodeOptions

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


def test_cluster_stopped_under_a_pack_is_a_named_error_and_leaves_nothing(report):
    stopped = report["stopped"]
    assert "stage 'pack'" in ray_cluster.cluster_unavailable_line(stopped)
    assert stopped["left"] == [], stopped


def test_second_node_killed_while_encoding_changes_no_byte(report):
    case = report["node_killed"]
    assert case["killed"] and "error" not in case["outcome"], case["outcome"]
    assert case["outcome"]["written"] == case["items"]
    assert case["nodes"] == 2
    assert case["calls"] > case["items"], case  # a task lost with the node ran again
    _byte_identical(case)


# ---------------------------------------------------------------- without a cluster
class _Done:
    def __init__(self, value):
        self.value = value


class _InProcess:
    """Just enough of Ray's API for :mod:`feedline.image._pack_ray` to run its tasks'
    own code synchronously in this process (each call completes when submitted)."""

    class exceptions:  # noqa: N801 - mirrors ray.exceptions
        class RayError(Exception):
            pass

        RayTaskError = RayError

    def remote(self, fn):
        return types.SimpleNamespace(
            options=lambda **kw: types.SimpleNamespace(remote=lambda *a: _Done(fn(*a))))

    def wait(self, refs, num_returns=1, timeout=None):
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref, timeout=None):
        return ref.value

    def cancel(self, ref):
        pass


@pytest.fixture()
def in_process(monkeypatch):
    monkeypatch.setattr(_pack_ray, "connect", _InProcess)
    monkeypatch.setattr(_pack_ray, "_where", lambda: {"pid": os.getpid(), "node": "here"})


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    from PIL import Image

    root = tmp_path_factory.mktemp("photos")
    rng = np.random.default_rng(5)
    for label in ("a", "b"):
        os.makedirs(root / label)
        for j in range(10):
            Image.fromarray(rng.integers(0, 255, (12 + j, 16, 3), dtype=np.uint8)).save(
                root / label / f"{j}.png")
    (root / "b" / "bad.png").write_bytes(b"not a png")
    return root


@pytest.mark.parametrize("format", ["recordio", "tfrecord"])
@pytest.mark.parametrize("num_shards", [1, 3, 4])
def test_lanes_reassembled_by_offsets_give_the_local_bytes(in_process, photos, tmp_path, format,
                                                           num_shards):
    """The tasks' code run in-process: chunks of 3 images (7 chunks) whose lanes shift
    after the skipped image, reassembled into exactly the shards of a local pack."""
    got = {}
    for backend in ("process", "ray"):
        out = tmp_path / backend / "train"
        result = pack_images(photos, out, num_shards=num_shards, encode=EncodeOptions(resize=8),
                             shuffle=True,
                             on_error="skip", format=format, num_workers=2, backend=backend)
        got[backend] = result, {p.name: p.read_bytes() for p in out.parent.iterdir()}
    (local, local_files), (ray, ray_files) = got["process"], got["ray"]
    assert ray_files == local_files and len(local_files) >= num_shards + 1
    assert (ray.counts, ray.skipped) == (local.counts, local.skipped)
    assert [entry[1] for entry in ray.skipped] == ["b/bad.png"]


def test_a_failing_image_leaves_the_output_folder_empty(in_process, photos, tmp_path):
    out = tmp_path / "out" / "train"
    with pytest.raises(Exception, match="bad.png") as info:
        pack_images(photos, out, num_shards=2, backend="ray", num_workers=2)
    assert any("stage 'pack'" in note for note in info.value.__notes__)
    assert os.listdir(out.parent) == []
