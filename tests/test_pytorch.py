"""feedline.pytorch: DataLoader / StatefulDataLoader adapters, splitting, exact resume."""

from __future__ import annotations

import json
import pickle
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from feedline import Dataset
from feedline.exceptions import StateError
from feedline.pytorch import TorchIterableDataset, TorchMapDataset
from feedline.pytorch.dataset import split_pipeline

N = 53  # not a multiple of anything used below, so parts and batches are uneven


def _stream(n: int = N) -> Dataset:
    """A stream pipeline (a filter makes it non random access) of ``{"x": array, "id": int}``."""
    return (Dataset.range(n + 7).filter(lambda i: i < n).shuffle(8, seed=5)
            .map(lambda i: {"x": np.full(2, i, np.float32), "id": i}))


def _ids(batches) -> list[int]:
    out: list[int] = []
    for b in batches:
        out.extend(int(i) for i in b["id"])
    return out


def test_as_torch_picks_map_style_for_random_access_and_iterable_otherwise():
    assert isinstance(Dataset.range(5).map(lambda x: x + 1).as_torch(), TorchMapDataset)
    assert isinstance(Dataset.range(5).batch(2).as_torch(), TorchIterableDataset)
    with pytest.raises(TypeError, match="needs a random-access dataset"):
        TorchMapDataset(Dataset.range(5).batch(2))
    with pytest.raises(TypeError, match="must be a feedline Dataset"):
        TorchIterableDataset([1, 2, 3])
    with pytest.raises(ValueError, match="apply to stream pipelines"):
        Dataset.range(5).as_torch(rank=0, world_size=2)
    with pytest.raises(ValueError, match="`rank` must be below world_size=2, got 2"):
        Dataset.range(5).batch(2).as_torch(rank=2, world_size=2)


def test_issue_example_batched_pipeline_in_dataloader():
    loader = DataLoader(Dataset.range(10).batch(4, collate="numpy").as_torch(), batch_size=None)
    batches = list(loader)
    assert all(isinstance(b, torch.Tensor) for b in batches)
    assert [b.tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


@pytest.mark.parametrize("workers", [0, 2])
def test_stream_every_record_once_per_epoch(workers):
    tds = _stream().as_torch()
    loader = DataLoader(tds, batch_size=4, num_workers=workers, persistent_workers=workers > 0)
    seen_epochs = []
    for _ in range(2):
        batches = list(loader)
        assert all(b["x"].dtype == torch.float32 for b in batches)
        ids = _ids(batches)
        assert sorted(ids) == list(range(N))
        seen_epochs.append(ids)
    assert seen_epochs[0] != seen_epochs[1]  # reshuffled: the epoch advanced by itself


@pytest.mark.parametrize("workers", [0, 2])
def test_random_access_every_record_once_per_epoch(workers):
    ds = Dataset.from_arrays(np.arange(N * 2, dtype=np.float32).reshape(N, 2), np.arange(N))
    loader = DataLoader(ds.as_torch(), batch_size=5, shuffle=True, num_workers=workers)
    ids = [int(i) for _, y in loader for i in y]
    assert sorted(ids) == list(range(N))
    xs = torch.cat([x for x, _ in loader])
    assert sorted(xs[:, 0].tolist()) == [2.0 * i for i in range(N)]


def test_random_access_set_epoch_reads_that_epochs_order():
    ds = Dataset.range(10).global_shuffle(seed=3)
    tds = ds.as_torch(convert=False)
    epochs = [list(ds.iterator(epoch=e)) for e in range(2)]
    assert [tds[i] for i in range(10)] == epochs[0]
    tds.set_epoch(1)
    assert [tds[i] for i in range(10)] == epochs[1]
    assert tds[-1] == epochs[1][-1]
    with pytest.raises(IndexError, match="index 10 out of range for a dataset of 10 items"):
        tds[10]
    with pytest.raises(ValueError, match="`epoch` must be a non-negative int, got -1"):
        tds.set_epoch(-1)


@pytest.mark.parametrize("workers", [0, 2])
def test_ranks_times_workers_cover_exactly_once(workers):
    seen: list[int] = []
    for rank in range(2):
        tds = _stream().as_torch(rank=rank, world_size=2)
        seen += _ids(DataLoader(tds, batch_size=3, num_workers=workers))
    assert sorted(seen) == list(range(N))


def test_rank_comes_from_the_environment(monkeypatch):
    seen: list[int] = []
    for rank in range(3):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "3")
        part = _ids(DataLoader(_stream().as_torch(), batch_size=4))
        assert 0 < len(part) < N
        seen += part
    assert sorted(seen) == list(range(N))


def test_split_happens_at_the_source_and_keeps_take_below():
    calls: list[int] = []

    def decode(i):
        calls.append(i)
        return i

    ds = Dataset.range(20).take(15).map(decode).filter(lambda i: i % 2 == 0).batch(2)
    parts = [split_pipeline(ds, p, 3).to_list() for p in range(3)]
    assert sorted(calls) == list(range(15))  # each record decoded once, not once per part
    assert sorted(i for part in parts for b in part for i in b) == list(range(0, 15, 2))
    assert ds.to_list() == [[0, 2], [4, 6], [8, 10], [12, 14]]  # the original is unchanged
    # a random-access stage below the split is read in index mode: only its own records
    calls.clear()
    ra = Dataset.range(12).global_shuffle(seed=1).map(decode).filter(lambda i: True)
    part0 = split_pipeline(ra, 0, 4).to_list()
    assert sorted(calls) == sorted(part0) and len(part0) == 3


def test_set_epoch_and_automatic_advance():
    tds = TorchIterableDataset(_stream(), convert=False)
    first = [d["id"] for d in tds]
    second = [d["id"] for d in tds]
    assert sorted(first) == sorted(second) == list(range(N)) and first != second
    assert tds.epoch == 2
    tds.set_epoch(1)
    assert [d["id"] for d in tds] == second
    ref = [d["id"] for d in _stream().iterator(epoch=1)]
    assert second == ref
    with pytest.raises(ValueError, match="`epoch` must be a non-negative int, got -2"):
        tds.set_epoch(-2)


def test_state_errors():
    tds = TorchIterableDataset(_stream())
    with pytest.raises(StateError, match="not a TorchIterableDataset state"):
        tds.load_state_dict({"epoch": 0})
    state = tds.state_dict()
    assert state == {"version": 1, "epoch": 0, "part": 0, "parts": 1, "pipeline": None}
    with pytest.raises(StateError, match="state version 9 is not supported"):
        tds.load_state_dict({**state, "version": 9})
    tds.load_state_dict({**state, "part": 1, "parts": 2})
    with pytest.raises(StateError, match="state was taken in part 1 of 2 .* this iteration is "
                                         "part 0 of 1: resume with the same world size"):
        iter(tds)


def test_in_process_resume_from_every_step():
    tds = TorchIterableDataset(_stream(), convert=False)
    it = iter(tds)
    ref = [d["id"] for d in _stream().iterator(epoch=0)]
    for k in range(N + 1):
        state = json.loads(json.dumps(tds.state_dict()))  # JSON-able
        again = TorchIterableDataset(_stream(), convert=False)
        again.load_state_dict(state)
        assert [d["id"] for d in again] == ref[k:]
        assert again.epoch == 1  # the next iteration is epoch 1
        if k < N:
            assert next(it)["id"] == ref[k]
    assert tds.state_dict()["pipeline"] is not None  # the end of the epoch, not its start


def test_pickles_into_workers_with_the_rank_fixed(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    tds = pickle.loads(pickle.dumps(TorchIterableDataset(Dataset.range(4).batch(1))))
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("WORLD_SIZE")
    assert (tds.rank, tds.world_size) == (1, 2)
    assert list(DataLoader(tds, batch_size=None)) == [[1], [3]]


def test_pin_memory_option_is_passed_to_the_conversion():
    tds = TorchIterableDataset(Dataset.range(2).batch(2, collate="numpy"), pin_memory=True)
    if torch.cuda.is_available():
        assert next(iter(tds)).is_pinned()
    else:
        with pytest.warns(UserWarning, match="no accelerator is available; memory is not pinned"):
            assert next(iter(tds)).tolist() == [0, 1]


# ---------------------------------------------------------------- StatefulDataLoader resume
CHILD = textwrap.dedent('''
    import json, sys
    import numpy as np
    from torchdata.stateful_dataloader import StatefulDataLoader
    from feedline import Dataset

    def make_loader(workers):
        ds = (Dataset.range(N + 7).filter(lambda i: i < N).shuffle(8, seed=5)
              .map(lambda i: {"x": np.full(2, i, np.float32), "id": i}))
        return StatefulDataLoader(ds.as_torch(), batch_size=3, num_workers=workers)

    def ids(batch):
        return [int(i) for i in batch["id"]]
''')


def _child_code(n: int) -> str:
    return CHILD.replace("N + 7", f"{n} + 7").replace("i < N", f"i < {n}")


@pytest.mark.timeout(240)
@pytest.mark.parametrize("workers", [0, 2])
def test_stateful_dataloader_resumes_in_a_new_process(tmp_path, workers):
    exec_ns: dict = {}
    exec(_child_code(N), exec_ns)
    make_loader, ids = exec_ns["make_loader"], exec_ns["ids"]
    rng = random.Random(1234 + workers)
    n_batches = -(-N // 3) + (1 if workers else 0)  # each worker may end with a short batch
    ks = sorted(set(rng.sample(range(1, n_batches - 1), 3)) | {0})
    loader = make_loader(workers)
    # epoch 0 is consumed first, so the states below are taken in epoch 1 (a reshuffled one)
    epoch0 = [ids(b) for b in loader]
    states = {0: loader.state_dict()}  # taken between epochs: resuming runs all of epoch 1
    full = []
    for batch in loader:
        full.append(ids(batch))
        if len(full) in ks:
            states[len(full)] = loader.state_dict()
    assert sorted(i for b in full for i in b) == list(range(N))
    assert full != epoch0
    torch.save(states, tmp_path / "states.pt")
    script = tmp_path / "child.py"
    script.write_text(_child_code(N) + textwrap.dedent(f'''
        import torch
        states = torch.load(sys.argv[1], weights_only=False)
        out = {{}}
        for k, state in states.items():
            loader = make_loader({workers})
            loader.load_state_dict(state)
            out[k] = [ids(b) for b in loader]
            out[str(k) + "/next"] = [ids(b) for b in loader][:2]  # the following epoch starts
        print(json.dumps(out))
    '''))
    res = subprocess.run([sys.executable, str(script), str(tmp_path / "states.pt")],
                         capture_output=True, text=True, timeout=200)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert len(states) >= 3
    for k in states:
        assert out[str(k)] == full[k:], k
    # after resuming in epoch 1, the loader's next iteration runs epoch 2, as uninterrupted
    epoch2 = [ids(b) for b in loader][:2]
    assert epoch2 != full[:2]
    for k in states:
        assert out[f"{k}/next"] == epoch2
