"""Resuming a sharded pipeline with a worker map on a different world size: exact (nothing
lost, nothing repeated) when a stage iterates the shard before the map; a clear
StateError saying what to do when the map reads the shard by index."""

from __future__ import annotations

import pytest

from feedline import Dataset
from feedline.exceptions import StateError

N = 23


def ident(x):
    return x


def build(rank, world, *, backend="process", direct=False):
    ds = Dataset.range(N).shard(rank, world, policy="none")
    if not direct:
        ds = ds.prefetch(2)
    return ds.map(ident, num_workers=2, backend=backend)


@pytest.mark.parametrize("old, new", [(4, 2), (2, 3), (3, 1)])
@pytest.mark.parametrize("backend", ["process", "thread"])
def test_resume_on_another_world_size_is_exact(old, new, backend):
    for steps in (0, 1, 4):
        seen, states = [], []
        for rank in range(old):  # ranks run in lockstep: rank 0's state stands for all
            ds = build(rank, old, backend=backend)
            it = ds.iterator()
            seen += [next(it) for _ in range(steps)]
            states.append(it.get_state())
            it.close()
            ds.close()
        for rank in range(new):
            ds = build(rank, new, backend=backend)
            seen += list(ds.iterator(states[0]))
            ds.close()
        assert sorted(seen) == list(range(N)), (old, new, steps)


@pytest.mark.parametrize("backend", ["process", "thread"])
def test_direct_worker_map_after_shard_names_the_fix(backend):
    ds = build(0, 4, backend=backend, direct=True)
    it = ds.iterator()
    next(it)
    state = it.get_state()
    it.close()
    ds.close()
    assert list(build(0, 4, backend=backend, direct=True).iterator(state)) == list(range(4, N, 4))
    other = build(0, 2, backend=backend, direct=True)
    with pytest.raises(StateError, match=r"saved with world_size=4, this run has world_size=2: a (worker|thread) map right after shard\(\) reads the shard by index .* \.shard\(rank, world_size\)\.prefetch\(2\)\.map"):
        other.iterator(state)
    other.close()
