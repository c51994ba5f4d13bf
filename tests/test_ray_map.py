"""map(fn, num_workers=N, backend="ray") on a 2-node local Ray cluster.

One cluster for the whole module: :mod:`ray_cluster` runs :mod:`ray_scenarios` in a
loopback-only network namespace (head + a second node on 127.0.0.1), which runs every
scenario and reports; each test checks one of them. Nothing of Ray runs outside that
namespace, and every Ray process is gone when the fixture returns.
"""

from __future__ import annotations

import pytest

import ray_cluster

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    reason = ray_cluster.skip_reason()
    if reason:
        pytest.skip(reason)
    workdir = tmp_path_factory.mktemp("ray")
    result = ray_cluster.run_in_namespace("ray_scenarios.py", str(workdir), timeout=600)
    assert "crash" not in result, result.get("crash")
    return result


def test_ray_output_is_bit_identical_to_processes(report):
    assert len(report["ray"]) == 12
    assert report["ray"] == report["process"]
    assert report["ray"] != report["local"]  # the crops are random: the test can tell


def test_image_record_iter_decodes_on_ray_as_on_processes(report):
    got = report["image_iter"]
    assert len(got["ray"]) == -(-48 // 8) and got["ray"] == got["process"]


def test_stream_inputs_and_unordered_maps_run_on_ray(report):
    assert report["stream"] == [abs(i) for i in range(-20, 20)]
    assert report["unordered"] == list(range(30))


def test_every_epoch_of_every_pipeline_runs_on_both_nodes(report):
    # 3 pipelines one after another, 4 epochs each: the number of nodes that mapped items
    assert report["spread"] == [[2, 2, 2, 2]] * 3


def test_each_epoch_draws_anew_and_identically_on_both_backends(report):
    assert report["ray_epoch2"] == report["process_epoch2"]
    assert report["ray_epoch2"] != report["ray"]


def test_state_resumes_in_a_new_process_exactly(report):
    assert report["before_save"] == report["ray"][:5]
    assert report["resumed"] == report["ray"][5:]


def test_two_ranks_saved_mid_epoch_resume_on_one_rank_exactly_once(report):
    got = report["ranks_before"] + report["ranks_resumed"]
    assert sorted(got) == report["all_items"]


def test_pack_on_ray_is_byte_identical_to_a_local_pack(report):
    pack = report["pack"]
    assert pack.pop("names") is True, pack
    assert pack and all(pack.values()), pack
    assert any(name.endswith(".rec") for name in pack) and any(n.endswith(".idx") for n in pack)


def test_exception_in_fn_surfaces_at_its_position_and_is_not_retried(report):
    err = report["error"]
    assert err["type"] == "ArithmeticError" and err["message"] == "record 7 is cursed"
    assert err["batches_before"] == 7 // 4  # batch 0 came through; position 7 is in batch 1
    assert err["remote_tb"]
    assert any("while mapping item 7" in note for note in err["notes"])
    assert err["calls"] == 1


def test_second_node_killed_mid_epoch_changes_nothing(report):
    assert report["node_killed"] == report["ray"]
    calls = report["node_killed_calls"]
    assert calls["nodes"] == 2, calls  # both nodes mapped items before the kill
    assert calls["calls"] > 48, calls  # a task lost with the node was run again


def test_cluster_stopped_under_a_pipeline_is_a_named_error(report):
    stopped = report["stopped"]
    assert "stage '" in ray_cluster.cluster_unavailable_line(stopped)  # names the stage


def test_datasources_read_what_feedline_and_the_peers_wrote(report):
    checks = report["datasources"]
    assert checks and all(checks.values()), checks
