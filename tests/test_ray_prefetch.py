"""prefetch(n, backend="ray") on a 2-node local Ray cluster: the pipeline in one actor.

One cluster for the whole module: :mod:`ray_cluster` runs :mod:`ray_prefetch_scenarios`
in a loopback-only network namespace (head + a second node on 127.0.0.1), which runs
every scenario and reports; each test checks one of them. Nothing of Ray runs outside
that namespace, and every Ray process is gone when the fixture returns.
"""

from __future__ import annotations

import pickle

import pytest

import ray_cluster
from feedline import Dataset, RayOptions

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return ray_cluster.scenario_report("ray_prefetch_scenarios.py", tmp_path_factory, timeout=300)


def test_ray_prefetch_yields_the_items_of_process_prefetch_epoch_after_epoch(report):
    assert report["ray"] == report["process"]
    first, second = report["ray"]
    assert sorted(x for batch in first for x in batch) == [i * i for i in range(30)]
    assert first != second  # the shuffle draws anew each epoch: the comparison can tell
    assert report["name"] == "prefetch(3, backend='ray')"


def test_json_state_mid_epoch_resumes_exactly_on_a_new_actor_and_locally(report):
    first = report["ray"][0]
    assert report["before_save"] == first[:3]
    assert report["resumed"] == first[3:]
    assert report["resumed_locally"] == first[3:]


def test_actor_is_placed_by_ray_options(report):
    nodes = report["nodes"]
    second = [n for n in nodes["all"] if n != nodes["head"]]
    assert report["placed"] == [[i, second[0]] for i in range(4)]


def test_exception_surfaces_at_its_item_with_the_actors_traceback(report):
    err = report["error"]
    assert err["type"] == "ArithmeticError" and err["message"] == "item 7 is cursed"
    assert err["before"] == list(range(7))
    assert any("prefetch(2, backend='ray')" in note and "item 7" in note for note in err["notes"])
    assert "fail_at_seven" in err["remote_tb"]


def test_actor_lost_with_its_node_is_worker_died_and_its_state_resumes_elsewhere(report):
    lost = report["node_lost"]
    assert lost["type"] == "WorkerDiedError", lost
    assert "prefetch(2, backend='ray')" in lost["message"]
    assert lost["resumed"] == list(range(30))


def test_cluster_stopped_under_a_consumer_is_a_named_error(report):
    lines = report["stopped"]["lines"]
    errors = [line for line in lines if line.startswith("error")]
    assert errors, report["stopped"]
    assert errors[0].split()[1] == "ClusterUnavailableError"
    assert "prefetch(2, backend='ray')" in errors[0]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"backend": "gpu"}, r"`backend` must be one of"),
        ({"backend": "ray", "process": True}, r"`process=True` is backend='process'"),
        ({"backend": "ray", "nice": 3}, r"for a local process, not backend='ray'"),
        ({"backend": "ray", "ray": RayOptions(max_retries=2)}, r"max_retries are for map's tasks"),
        ({"backend": "process", "ray": RayOptions(num_cpus=1)}, r"`ray` needs backend='ray'"),
        ({"ray": RayOptions(num_cpus=1)}, r"or backend='ray'"),
    ],
)
def test_prefetch_backend_options_are_validated_without_a_cluster(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Dataset.range(3).prefetch(2, **kwargs)


def test_ray_must_be_ray_options():
    with pytest.raises(TypeError, match=r"`ray` must be a RayOptions or None"):
        Dataset.range(3).prefetch(2, backend="ray", ray={"num_cpus": 1})


def test_process_backend_is_process_true():
    ds = Dataset.range(3).prefetch(2, backend="process")
    try:
        assert ds.name == "prefetch(2, process=True)" and ds.to_list() == [0, 1, 2]
    finally:
        ds.close()


def test_a_pipeline_with_worker_stages_pickles_after_running():
    """What ships the pipeline to the actor: a stage's kept worker pool stays behind."""
    ds = Dataset.range(6).map(abs, num_workers=2)
    copy = None
    try:
        assert ds.to_list() == list(range(6))
        copy = pickle.loads(pickle.dumps(ds))
        assert copy.to_list() == list(range(6))
    finally:
        ds.close()
        if copy is not None:
            copy.close()
