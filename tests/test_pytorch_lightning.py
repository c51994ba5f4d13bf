"""Lightning: a fit stopped mid-epoch and resumed from its checkpoint sees exactly the
remaining batches and ends with the uninterrupted fit's weights (1 process and DDP)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from feedline import Dataset
from feedline.pytorch.lightning import FeedlineDataModule, PrefetchAwareLoader, stateful_loader

HELPER = pathlib.Path(__file__).with_name("lightning_fit_helper.py")
N, BATCH = 48, 4


def _run(tmp_path, devices: int, workers: int, k: int) -> list[dict]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    res = subprocess.run([sys.executable, str(HELPER), str(tmp_path), str(devices),
                          str(workers), str(k)], capture_output=True, text=True, timeout=400,
                         env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(devices)]


def _check(run: dict, k: int, per_epoch: int) -> None:
    assert len(run["full"]) == 2 * per_epoch
    assert run["first"] == run["full"][:k]
    assert run["resumed"] == run["full"][k:]  # exactly the remaining batches
    assert run["same_weights"] and run["first_differs"]


@pytest.mark.timeout(420)
@pytest.mark.parametrize(("workers", "k"), [(0, 15), (2, 12)])
def test_single_process_fit_resumes_mid_epoch(tmp_path, workers, k):
    # k=12 is the last batch of epoch 0 (nothing prefetched); 15 is mid-epoch 1
    (run,) = _run(tmp_path, 1, workers, k)
    per_epoch = N // BATCH
    _check(run, k, per_epoch)
    epochs = [sorted(i for b in run["full"][e * per_epoch:(e + 1) * per_epoch] for i in b)
              for e in range(2)]
    assert epochs == [list(range(N))] * 2
    assert run["full"][:per_epoch] != run["full"][per_epoch:]  # reshuffled


@pytest.mark.timeout(420)
def test_ddp_two_processes_fit_resumes_mid_epoch(tmp_path):
    k = 4
    runs = _run(tmp_path, 2, 0, k)
    per_epoch = N // 2 // BATCH
    for run in runs:
        _check(run, k, per_epoch)
    for e in range(2):  # the ranks' parts cover each epoch exactly once
        ids = sorted(i for run in runs for b in run["full"][e * per_epoch:(e + 1) * per_epoch]
                     for i in b)
        assert ids == list(range(N))


def test_datamodule_and_loader_options_are_checked():
    with pytest.raises(TypeError, match="`train` must be a feedline Dataset or None, got list"):
        FeedlineDataModule(train=[1, 2])
    with pytest.raises(ValueError, match="`batch_size` must be a positive int, got 0"):
        FeedlineDataModule(train=Dataset.range(3), batch_size=0)
    with pytest.raises(ValueError, match="`num_workers` must be a non-negative int, got -1"):
        stateful_loader(Dataset.range(3), num_workers=-1)
    with pytest.raises(ValueError, match="no `train` pipeline was given"):
        FeedlineDataModule(val=Dataset.range(3)).train_dataloader()
    assert FeedlineDataModule(train=Dataset.range(3)).val_dataloader() == []


def test_prefetch_aware_state_leaves_out_the_prefetched_batch():
    def make() -> PrefetchAwareLoader:
        return stateful_loader(Dataset.range(10).filter(bool).shuffle(4, seed=2), batch_size=2,
                               prefetched=1)

    reference = make()
    epochs = [[b.tolist() for b in reference] for _ in range(2)]
    loader = make()
    it = iter(loader)
    got = [next(it).tolist() for _ in range(3)]
    assert got == epochs[0][:3]
    again = make()
    again.load_state_dict(loader.state_dict())
    assert [b.tolist() for b in again] == epochs[0][2:]  # batch 2 was only prefetched
    assert [b.tolist() for b in it] == epochs[0][3:]
    ended = make()  # exhausted: the state is the loader's own, the end of epoch 0
    ended.load_state_dict(loader.state_dict())
    assert [b.tolist() for b in ended] == epochs[1]
