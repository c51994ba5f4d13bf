"""Issue 27, items 1 and 4: ranks whose parts of a stream differ end every epoch
together (one all-reduce per step), and a pipeline is split by rank once, never twice.

Two gloo ranks on the CPU read a byte-range split of RecordIO files whose records
differ in size (rank 0's byte range holds far fewer records than rank 1's), through the
Runner's DataProvider, through ``as_torch()`` with ``DataLoader(num_workers=2)`` and
through the Lightning DataModule with ``strategy="ddp"``. A hang guard kills the ranks.
"""

from __future__ import annotations

import json
import time

import pytest

torch = pytest.importorskip("torch")
import torch.multiprocessing as mp  # noqa: E402

from dist_join_helpers import BATCH, N_RECORDS, write_records  # noqa: E402
from feedline import Dataset, split  # noqa: E402
from feedline.pytorch.dataset import TorchIterableDataset, split_workers  # noqa: E402
from feedline.pytorch.rank_join import END, RankJoin, count_samples, join  # noqa: E402

HANG_GUARD_S = 240


def run_ranks(tmp_path, names, world=2):
    """Run the named scenarios of dist_join_helpers on ``world`` gloo ranks; every rank's
    results. The ranks are killed (and the test fails) after HANG_GUARD_S seconds."""
    from dist_join_helpers import rank_main
    from feedline.train.distributed import free_port

    paths = write_records(tmp_path)
    out = tmp_path / "results.json"
    ctx = mp.start_processes(rank_main, args=(world, free_port(), paths, names, str(out)),
                             nprocs=world, join=False, start_method="spawn")
    deadline = time.monotonic() + HANG_GUARD_S
    try:
        while not ctx.join(timeout=1):
            if time.monotonic() > deadline:
                pytest.fail(f"the ranks did not end within {HANG_GUARD_S} s (a rank waits alone)")
    finally:
        for proc in ctx.processes:
            if proc.is_alive():
                proc.kill()
    ranks = json.loads(out.read_text())
    for rank, results in enumerate(ranks):
        for name, result in results.items():
            assert "error" not in result, f"rank {rank}, {name}:\n{result['error']}"
    return ranks, paths


def check_pad_epochs(ranks, name, epochs):
    """Same steps on every rank, every record once per epoch plus the counted repeats."""
    for e in range(epochs):
        steps = [r[name]["passes"][e] for r in ranks]
        assert len(steps[0]) == len(steps[1]), f"epoch {e}: steps per rank differ"
        real = [i for s in steps for ids, padding in s if not padding for i in ids]
        assert sorted(real) == list(range(N_RECORDS)), f"epoch {e}: not every record once"
        for rank, s in enumerate(steps):
            padded = [ids for ids, padding in s if padding]
            st = ranks[rank][name]["stats"][min(e, len(ranks[rank][name]["stats"]) - 1)]
            assert st["policy"] == "pad" and st["steps"] == len(s)
            assert st["padded_batches"] == len(padded)
            assert st["padded_samples"] == sum(len(ids) for ids in padded)
            if padded:  # repeats of the rank's last real batch
                last_real = [ids for ids, padding in s if not padding][-1]
                assert all(ids == last_real for ids in padded)
    # the byte ranges hold different numbers of records: one rank was padded
    assert any(r[name]["stats"][-1]["padded_batches"] for r in ranks)


@pytest.mark.slow
def test_ranks_end_every_epoch_together_through_runner_torch_and_lightning(tmp_path):
    ranks, _ = run_ranks(tmp_path, ["runner_pad", "runner_drop", "torch", "lightning"])
    # the Runner's DataProvider, remainder="pad": 2 passes
    check_pad_epochs(ranks, "runner_pad", 2)
    # remainder="drop": every rank stops at the shortest; the rest is read and counted
    for e in range(2):
        steps = [r["runner_drop"]["passes"][e] for r in ranks]
        stats = [r["runner_drop"]["stats"][e] for r in ranks]
        assert len(steps[0]) == len(steps[1]) == min(s["batches"] for s in stats)
        assert not any(p for s in steps for _, p in s)
        delivered = [i for s in steps for ids, _ in s for i in ids]
        assert len(delivered) == len(set(delivered))
        dropped = sum(s["dropped_samples"] for s in stats)
        assert dropped > 0 and len(delivered) + dropped == N_RECORDS
        assert all(s["policy"] == "drop_remainder" for s in stats)
    # as_torch() after split(paths, mode="bytes"): split once (by the byte range, then
    # across the 2 DataLoader workers), every record once per epoch
    check_pad_epochs(ranks, "torch", 2)
    # the Lightning DataModule under strategy="ddp"
    check_pad_epochs(ranks, "lightning", 2)


# --------------------------------------------------------------------------- one process

class _ScriptedJoin(RankJoin):
    """A RankJoin of 2 ranks whose other rank has ``other`` batches (then ends)."""

    def __init__(self, policy, other):
        super().__init__(policy)
        self.other = other

    @property
    def world_size(self):
        return 2

    def _agree(self, have, stuck):
        other_has = self.other > 0
        self.other -= 1
        return int(have) + int(other_has), int(stuck)


def _run(join_, mine):
    join_.begin()
    it = iter(mine)
    out = []
    while (got := join_.step(next(it, END), lambda: it)) is not None:
        out.append(got)
    return out


def test_pad_repeats_the_last_batch_and_drop_stops_at_the_shortest():
    pad = _ScriptedJoin("pad", other=4)
    assert _run(pad, [[1, 2], [3]]) == [([1, 2], False), ([3], False), ([3], True), ([3], True)]
    assert pad.stats() == {"policy": "pad", "steps": 4, "batches": 2, "padded_batches": 2,
                           "padded_samples": 2, "dropped_batches": 0, "dropped_samples": 0}
    drop = _ScriptedJoin("drop_remainder", other=1)
    assert _run(drop, [[1, 2], [3, 4], [5]]) == [([1, 2], False)]
    assert drop.stats()["dropped_batches"] == 2 and drop.stats()["dropped_samples"] == 3


def test_a_rank_with_an_empty_part_cannot_pad():
    with pytest.raises(RuntimeError, match=r"1 rank\(s\) have an empty part of the data and no "
                                           r"batch to repeat under policy='pad'"):
        _run(_ScriptedJoin("pad", other=2), [])
    assert _run(_ScriptedJoin("drop_remainder", other=2), []) == []


def test_join_options_and_sample_counts():
    with pytest.raises(ValueError, match="`policy` must be one of 'pad', 'drop_remainder'"):
        join([], policy="drop")
    assert count_samples(torch.zeros(5, 2)) == 5 and count_samples([torch.zeros(3)]) == 3
    assert count_samples({}) == 1


def test_a_pipeline_split_by_rank_is_split_only_across_workers(tmp_path):
    paths = write_records(tmp_path)
    # a byte range divided among workers is divided into byte ranges again
    part = split(paths, 1, 2, mode="bytes")
    workers = [split_workers(part, w, 2).to_list() for w in range(2)]
    assert sorted(sum(workers, [])) == sorted(part.to_list())
    assert [split_workers(part, w, 2).name for w in range(2)] == ["input_split(2/4)",
                                                                   "input_split(3/4)"]
    # a pipeline already split by rank is not split by rank again
    ds = Dataset.range(12).shard(1, 2).map(int)
    tds = TorchIterableDataset(ds, rank=1, world_size=2)
    assert [int(x) for x in tds] == list(range(1, 12, 2))
    assert type(ds.as_torch()).__name__ == "TorchIterableDataset"  # no DistributedSampler


def test_a_split_for_another_world_size_is_refused():
    tds = TorchIterableDataset(Dataset.range(8).shard(0, 4), rank=0, world_size=2)
    with pytest.raises(ValueError, match=r"already split into 4 parts by shard\(0/4\), but this "
                                         r"job has 2 ranks: remove that split/shard"):
        iter(tds)
    from feedline.train.items import DataProvider

    with pytest.raises(ValueError, match=r"already split into 4 parts by shard\(0/4\), but this "
                                         r"job has 2 ranks: remove that split \(the DataProvider"):
        DataProvider(Dataset.range(8))._split(Dataset.range(8).shard(0, 4), 0, 2, 4)
    # one split of the job's world size is read as it is, and joined (counts may differ)
    part = Dataset.range(7).shard(1, 2, policy="none")
    assert DataProvider(part)._split(part, 1, 2, 4) == (part, False)


def test_a_file_list_shorter_than_the_parts_is_split_by_record():
    from feedline.pytorch.dataset import split_pipeline

    ds = Dataset.from_iterable(["a"]).flat_map(lambda f: [f"{f}{i}" for i in range(5)])
    parts = [split_pipeline(ds, p, 2).to_list() for p in range(2)]
    assert parts == [["a0", "a2", "a4"], ["a1", "a3"]]
    files = Dataset.from_iterable(["a", "b"]).flat_map(lambda f: [f"{f}{i}" for i in range(2)])
    assert [split_pipeline(files, p, 2).to_list() for p in range(2)] == [["a0", "a1"],
                                                                         ["b0", "b1"]]


def test_records_are_dealt_unevenly_by_byte_range(tmp_path):
    paths = write_records(tmp_path)
    counts = [len(split(paths, r, 2, mode="bytes").to_list()) for r in range(2)]
    assert sum(counts) == N_RECORDS and abs(counts[0] - counts[1]) > BATCH


def test_a_byte_range_left_to_the_default_rank_follows_the_process_it_is_read_in(
        tmp_path, monkeypatch):
    import pickle

    paths = write_records(tmp_path)
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    part = split(paths, mode="bytes")            # made before any process group or RANK
    assert part.rank_split == (0, 1) and len(part.to_list()) == N_RECORDS
    copy = pickle.loads(pickle.dumps(part))      # as a runner's data goes to its processes
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert copy.rank_split == (1, 2) and copy.name == "input_split(1/2)"
    assert copy.to_list() == split(paths, 1, 2, mode="bytes").to_list()
