"""Generic checks that a pipeline resumes exactly from every position."""

from __future__ import annotations

import json

import numpy as np


def _norm(x):
    """Make items comparable with ==, whatever containers and arrays they hold."""
    if isinstance(x, np.ndarray):
        return ("ndarray", x.dtype.str, x.shape, x.tobytes())
    if isinstance(x, dict):
        return {k: _norm(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_norm(v) for v in x)
    if isinstance(x, np.generic):
        return x.item()
    return x


def assert_resumes_everywhere(ds, *, max_steps: int | None = None) -> list:
    """For every k, the state after k items, restored into a fresh iterator (after a JSON
    round trip), yields exactly the uninterrupted run's remainder. Returns the full run."""
    it = ds.iterator()
    epoch_state = it.get_state()
    full = [_norm(x) for x in it]
    it.close()
    steps = len(full) if max_steps is None else min(len(full), max_steps)
    for k in range(steps + 1):
        probe = ds.iterator(epoch_state)
        for _ in range(k):
            next(probe)
        state = json.loads(json.dumps(probe.get_state()))
        probe.close()
        resumed = ds.iterator(state)
        rest = [_norm(x) for x in resumed]
        resumed.close()
        assert rest == full[k:], f"resume after {k} items differs: {rest[:5]} vs {full[k:k + 5]}"
    return full


def _key(x) -> str:
    return repr(_norm(x))


def assert_resumes_as_multiset(ds, *, max_steps: int | None = None) -> list:
    """Like :func:`assert_resumes_everywhere` for stages whose order is not deterministic
    (``map(..., ordered=False)``): for every k, the items yielded after a restore at k are
    exactly the uninterrupted run's items minus the k already yielded, as a multiset."""
    it = ds.iterator()
    epoch_state = it.get_state()
    full = [_norm(x) for x in it]
    it.close()
    everything = sorted(map(repr, full))
    steps = len(full) if max_steps is None else min(len(full), max_steps)
    for k in range(steps + 1):
        probe = ds.iterator(epoch_state)
        head = [_key(next(probe)) for _ in range(k)]
        state = json.loads(json.dumps(probe.get_state()))
        probe.close()
        resumed = ds.iterator(state)
        rest = [_key(x) for x in resumed]
        resumed.close()
        assert sorted(head + rest) == everything, f"resume after {k} items lost or repeated items"
    return full


def assert_set_state_goes_back(ds, n: int) -> None:
    """``ds`` maps ``x`` to ``-x`` over ``range(n)``: a state taken after 5 items and
    restored into the same iterator 3 items later (cancelling what it read ahead) yields
    exactly the items after the fifth."""
    it = ds.iterator()
    for _ in range(5):
        next(it)
    state = it.get_state()
    for _ in range(3):
        next(it)
    it.set_state(state)
    assert list(it) == [-x for x in range(5, n)]
    it.close()
