"""Ray scenarios of tests/test_ray_prefetch.py, run inside a loopback-only namespace.

``python ray_prefetch_scenarios.py <workdir> <out.json>`` (started by
:func:`ray_cluster.run_in_namespace` only): starts a head and a second node, runs
``prefetch(n, backend="ray")`` pipelines against them next to ``process=True`` and
writes the results as JSON. ``python ray_prefetch_scenarios.py --trainer <timeout>``
is a consumer whose cluster a scenario stops under it.
"""

from __future__ import annotations

import json
import os
import sys
import time

from feedline import Dataset, RayOptions

N = 30


def square(x: int) -> int:
    return x * x


def node_of(x: int) -> tuple[int, str]:
    import ray

    return x, ray.get_runtime_context().get_node_id()


def fail_at_seven(x: int) -> int:
    if x == 7:
        raise ArithmeticError("item 7 is cursed")
    return x


def tick(x: int) -> int:
    time.sleep(0.05)
    return x


def slow(x: int) -> int:
    time.sleep(0.5)
    return x


def pipeline(**prefetch) -> Dataset:
    """A shuffle, a map with 2 worker processes (started wherever the pipeline runs),
    a batch, then the prefetch stage."""
    return (Dataset.range(N).shuffle(8, seed=3).map(square, num_workers=2).batch(4)
            .prefetch(3, **prefetch))


def trainer(timeout: str) -> None:
    """Print each item as it comes, then the error that ended the iteration."""
    import ray

    ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=False)
    ds = Dataset.range(100).map(slow).prefetch(2, backend="ray", timeout=float(timeout))
    t0 = time.monotonic()
    try:
        for item in ds:
            print("item", item, flush=True)
            t0 = time.monotonic()
    except Exception as exc:  # noqa: BLE001 - reported to the scenario
        print("error", type(exc).__name__, round(time.monotonic() - t0, 1), str(exc)[:300],
              flush=True)


def main(workdir: str, out: str) -> None:
    import ray_cluster

    ray_cluster.run_scenarios(out, scenarios)


def scenarios(cluster, results: dict) -> None:
    import ray

    import ray_cluster

    head = ray.get_runtime_context().get_node_id()
    results["nodes"] = {"head": head, "all": [n["NodeID"] for n in ray.nodes() if n["Alive"]]}

    # 1. the same items as a local background process, two epochs running
    local = pipeline(process=True)
    results["process"] = [local.to_list(), local.to_list()]
    local.close()
    ds = pipeline(backend="ray")
    results["ray"] = [ds.to_list(), ds.to_list()]
    results["name"] = ds.name
    ds.close()  # its actor holds one of the cluster's two CPUs

    # 2. a JSON state saved mid-epoch resumes exactly: on a new actor, and locally
    ds = pipeline(backend="ray")
    it = ds.iterator()
    results["before_save"] = [next(it) for _ in range(3)]
    state = json.loads(json.dumps(it.get_state()))
    it.close()
    ds.close()
    again = pipeline(backend="ray")
    results["resumed"] = list(again.iterator(state))
    again.close()
    local = pipeline(process=True)
    results["resumed_locally"] = list(local.iterator(state))
    local.close()

    # 3. the actor is placed by ray=RayOptions(...), as map's Ray tasks are
    placed = Dataset.range(4).map(node_of).prefetch(
        2, backend="ray", ray=RayOptions(resources={"second": 1}))
    results["placed"] = placed.to_list()
    placed.close()

    # 4. an exception in the pipeline: at its item, with the actor's traceback
    failing = Dataset.range(N).map(fail_at_seven).prefetch(2, backend="ray")
    got: list = []
    try:
        for x in failing:
            got.append(x)
        results["error"] = {"type": None}
    except ArithmeticError as exc:
        results["error"] = {"type": type(exc).__name__, "message": str(exc), "before": got,
                            "notes": getattr(exc, "__notes__", []),
                            "remote_tb": getattr(exc.__cause__, "tb", "")}
    failing.close()

    # 5. the actor's node killed: WorkerDiedError (not restarted); the state resumes elsewhere
    doomed = Dataset.range(N).map(tick).prefetch(2, backend="ray", timeout=20,
                                                  ray=RayOptions(resources={"second": 1}))
    it = doomed.iterator()
    seen = [next(it) for _ in range(3)]
    state = json.loads(json.dumps(it.get_state()))
    cluster.kill_node()
    try:
        seen += list(it)
        results["node_lost"] = {"type": None, "seen": seen}
    except Exception as exc:  # noqa: BLE001 - reported to the test
        results["node_lost"] = {"type": type(exc).__name__, "message": str(exc)[:500]}
    doomed.close()
    elsewhere = Dataset.range(N).map(tick).prefetch(2, backend="ray")
    results["node_lost"]["resumed"] = seen[:3] + list(elsewhere.iterator(state))
    elsewhere.close()

    # 6. the cluster stopped under a consumer: a named error within the timeout
    results["stopped"] = ray_cluster.stop_under(
        cluster, [sys.executable, __file__, "--trainer", "3"], "item")

if __name__ == "__main__":
    if sys.argv[1] == "--trainer":
        trainer(sys.argv[2])
    else:
        t0 = time.monotonic()
        main(sys.argv[1], sys.argv[2])
        print(f"scenarios took {time.monotonic() - t0:.1f} s")
