"""backend="ray" options and the missing-Ray error, without starting Ray (the cluster
tests are in test_ray_map.py)."""

from __future__ import annotations

import sys

import pytest

from feedline import Dataset, ExecutionOptions, RayOptions
from feedline.runtime.ray_executor import check_ray_options


@pytest.mark.parametrize(
    "options, match",
    [
        ({"gpus": 1}, r"`ray_options` has unknown key\(s\) \['gpus'\]"),
        ({"num_cpus": 0}, r"`ray_options\['num_cpus'\]` must be a positive number, got 0"),
        ({"max_retries": -1}, r"`ray_options\['max_retries'\]` must be an int >= 0, got -1"),
        ({"depth": 0}, r"`ray_options\['depth'\]` must be an int >= 1, got 0"),
        ({"resources": ["prep"]}, r"`ray_options\['resources'\]` must map names to amounts"),
    ],
)
def test_bad_ray_options_are_named(options, match):
    with pytest.raises(ValueError, match=match):
        check_ray_options(options)
    with pytest.raises(ValueError, match=match):
        Dataset.range(3).map(abs, num_workers=2, backend="ray", ray_options=options)


def test_ray_options_need_the_ray_backend():
    ray = ExecutionOptions(ray=RayOptions(num_cpus=1))
    for backend in ("process", "thread"):
        with pytest.raises(ValueError, match=r"`execution.ray` needs backend='ray'"):
            Dataset.range(3).map(abs, num_workers=2, backend=backend, execution=ray)
        with pytest.raises(ValueError, match="`ray_options` needs backend='ray'"):  # old spelling
            Dataset.range(3).map(abs, num_workers=2, backend=backend, ray_options={"num_cpus": 1})


def test_without_ray_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    ds = Dataset.range(3).map(abs, num_workers=2, backend="ray")
    with pytest.raises(ImportError, match=r"pip install 'feedline\[ray\]'"):
        ds.to_list()
    import feedline.ray as fr

    with pytest.raises(ImportError, match=r"pip install 'feedline\[ray\]'"):
        fr.read_recordio("x.rec")


def test_no_cluster_named_is_an_error_and_nothing_is_started(monkeypatch):
    ray = pytest.importorskip("ray", reason="ray is not installed: pip install 'feedline[ray]'")
    from feedline.exceptions import ClusterUnavailableError

    if ray.is_initialized():
        pytest.skip("a Ray connection is already open in this process")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)

    def refuse(*args, **kwargs):
        raise AssertionError("feedline must not start a Ray cluster by itself")

    monkeypatch.setattr(ray, "init", refuse)
    ds = Dataset.range(3).map(abs, num_workers=2, backend="ray")
    with pytest.raises(ClusterUnavailableError, match="set RAY_ADDRESS=HOST:PORT"):
        ds.to_list()
