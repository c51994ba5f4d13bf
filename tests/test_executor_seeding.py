"""Random draws in a mapped function come from (seed, epoch, position): the same on every
backend, for any worker count or order, and after a resume (the local backends; Ray's
are in test_ray_map.py)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from feedline import Dataset
from feedline.runtime.executor import ThreadExecutor
from feedline.runtime.seeding import item_rng


def rng_draw(x: int) -> tuple[int, int]:
    return x, int(item_rng().integers(1 << 30))


def global_draw(x: int) -> tuple[int, float, int]:
    return x, random.random(), int(np.random.randint(1 << 30))


def run(fn, **kw) -> list:
    ds = Dataset.range(30).map(fn, seed=11, **kw)
    try:
        return ds.to_list()
    finally:
        ds.close()


def test_item_rng_is_identical_on_threads_and_processes_for_any_worker_count():
    want = run(rng_draw, num_workers=1, backend="thread")
    assert len({d for _, d in want}) == 30
    assert run(rng_draw, num_workers=3, backend="thread") == want
    assert run(rng_draw, num_workers=2, backend="process") == want
    assert sorted(run(rng_draw, num_workers=3, backend="process", ordered=False)) == want


def test_global_generators_in_processes_do_not_depend_on_the_worker_count():
    assert run(global_draw, num_workers=1) == run(global_draw, num_workers=3)


@pytest.mark.parametrize("backend", ["thread", "process"])
def test_draws_after_a_resume_are_those_of_the_uninterrupted_run(backend):
    def make():
        return Dataset.range(30).map(rng_draw, num_workers=2, backend=backend, seed=4)

    full = run_closed(make(), lambda ds: ds.to_list())

    def save(ds):
        it = ds.iterator()
        for _ in range(12):
            next(it)
        state = it.get_state()
        it.close()
        return state

    state = run_closed(make(), save)
    assert run_closed(make(), lambda ds: list(ds.iterator(state))) == full[12:]


def run_closed(ds, body):
    try:
        return body(ds)
    finally:
        ds.close()


def test_the_thread_executor_leaves_the_global_generators_alone():
    random.seed(1)
    expected = random.random()
    random.seed(1)
    ex = ThreadExecutor(lambda x: x, None, workers=1, stage="doc")
    ex.reseed(0, (5, 0, True))
    ex.submit(0, ex.new_generation(), 0, [0], [1])
    assert ex.ready([0], timeout=10) == [0]
    ex.collect(0)
    ex.shutdown()
    assert random.random() == expected
