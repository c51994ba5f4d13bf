"""Data parallel: rank splits, and a two-process gloo run matching one process."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from feedline import Dataset, data_type
from feedline.train import AdamOptimizer, ModelAverage, RunnerBuilder, network
from feedline.train import checkpoint as ckpt
from feedline.train.distributed import (
    all_reduce_sum,
    init_from_env,
    is_distributed,
    rank_and_world_size,
    split_dataset,
)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 60), world=st.integers(1, 7), mode=st.sampled_from(["strided", "contiguous"]),
       remainder=st.sampled_from(["pad", "drop", "keep"]))
def test_split_gives_equal_counts_and_covers_the_data(n, world, mode, remainder):
    parts = [split_dataset(Dataset.range(n), r, world, mode=mode, remainder=remainder).to_list()
             for r in range(world)]
    sizes = [len(p) for p in parts]
    flat = [i for p in parts for i in p]
    if remainder == "pad":
        assert sizes == [-(-n // world)] * world and set(flat) == set(range(n))
        assert len(flat) - len(set(flat)) == sizes[0] * world - n  # only the padding repeats
    elif remainder == "drop":
        assert sizes == [n // world] * world and len(set(flat)) == len(flat) == n // world * world
    else:
        assert sorted(flat) == list(range(n)) and max(sizes) - min(sizes) <= 1


def test_strided_batches_of_all_ranks_form_the_global_batch():
    n, world, b = 24, 3, 2
    ranks = [split_dataset(Dataset.range(n), r, world).batch(b).to_list() for r in range(world)]
    global_batches = Dataset.range(n).batch(world * b).to_list()
    for j, batch in enumerate(global_batches):
        assert sorted(x for r in range(world) for x in ranks[r][j]) == batch


def test_split_follows_the_parents_epochs():
    shuffled = Dataset.range(10).global_shuffle(seed=3)
    split = split_dataset(shuffled, 1, 2)
    e0, e1 = split.to_list(), split.to_list()
    s0, s1 = shuffled.to_list(), shuffled.to_list()
    assert e0 == s0[1::2] and e1 == s1[1::2] and e0 != e1


def test_split_validates():
    with pytest.raises(TypeError, match="needs a random-access dataset"):
        split_dataset(Dataset.range(4).filter(bool), 0, 2)
    with pytest.raises(ValueError, match=r"`rank` must be < world_size \(2\), got 2"):
        split_dataset(Dataset.range(4), 2, 2)
    with pytest.raises(ValueError, match="`mode` must be one of 'strided', 'contiguous'"):
        split_dataset(Dataset.range(4), 0, 2, mode="random")
    with pytest.raises(ValueError, match="cannot split an empty dataset"):
        split_dataset(Dataset.range(0), 0, 2)


def test_single_process_helpers(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert init_from_env() is False and not is_distributed()
    assert rank_and_world_size() == (0, 1)
    assert all_reduce_sum([1, 2.5]) == [1.0, 2.5]


def _builder(batch_size, device_count, checkpoint_dir=None, resume=None):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(48, 5)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    net = network(inputs={"x": data_type.dense_vector(5), "label": data_type.integer_value(2)},
                  learning_rate=0.05, learning_method=AdamOptimizer(),
                  model_average=ModelAverage(0.5))(model)
    train = Dataset.from_arrays(x, y).global_shuffle(seed=4)
    builder = (RunnerBuilder(net, device_count=device_count)
               .with_std_local_trainer(train, batch_size=batch_size)
               .with_std_tester(Dataset.from_arrays(x[:45], y[:45]), batch_size=7))
    if checkpoint_dir is not None:
        builder.with_checkpoints(checkpoint_dir, every_n_batches=4, keep=None, resume=resume)
    return builder


@pytest.mark.slow
def test_two_process_gloo_run_matches_single_process_on_the_global_batch(tmp_path):
    single = _builder(batch_size=8, device_count=1).run(2)
    multi = _builder(batch_size=4, device_count=2, checkpoint_dir=tmp_path).run(2)
    assert multi.global_step == single.global_step == 12
    assert multi.samples_seen * 2 == single.samples_seen == 96
    for name, value in single.params.items():
        torch.testing.assert_close(multi.params[name], value, rtol=1e-5, atol=1e-6)
    for a, b in zip(multi.passes, single.passes):
        assert a.pass_id == b.pass_id
        assert a.cost == pytest.approx(b.cost, rel=1e-5)
        assert a.metrics["accuracy"] == pytest.approx(b.metrics["accuracy"], rel=1e-6)
        # the test set (45 samples, split unevenly) is evaluated exactly once over both ranks
        assert a.test.samples == b.test.samples == 45
        assert a.test.cost == pytest.approx(b.test.cost, rel=1e-5)
        assert a.test.metrics["accuracy"] == pytest.approx(b.test.metrics["accuracy"], rel=1e-6)
    # rank 0 wrote the checkpoints, with every rank's data position and random state
    names = sorted(os.listdir(tmp_path))
    assert names == ["checkpoint-p0000-s000000004.flc", "checkpoint-p0001-s000000006.flc",
                     "checkpoint-p0001-s000000008.flc", "checkpoint-p0001-s000000012.flc",
                     "checkpoint-p0002-s000000012.flc"]
    state = ckpt.read_checkpoint(tmp_path / names[0])
    data = state["runner"]["data"]
    assert [r["stages"] for r in data["ranks"]] == [{"type": "index", "next": 16, "len": 24}] * 2
    assert len(state["rng"]["ranks"]) == 2
    torch.testing.assert_close(ckpt.read_params(tmp_path / names[-1])["0.weight"],
                               multi.params["0.weight"])

    # a new two-process job restored from the mid-pass checkpoint (pass 1, step 8 of 12)
    # finishes with exactly the parameters and pass means of the uninterrupted job
    resumed = _builder(batch_size=4, device_count=2, checkpoint_dir=tmp_path / "resumed",
                       resume=tmp_path / "checkpoint-p0001-s000000008.flc").run(2)
    assert (resumed.global_step, resumed.samples_seen) == (12, 48)
    # it trained only the last 4 steps: its own checkpoints start after step 8
    assert sorted(os.listdir(tmp_path / "resumed")) == ["checkpoint-p0001-s000000012.flc",
                                                       "checkpoint-p0002-s000000012.flc"]
    for name, value in multi.params.items():
        assert torch.equal(resumed.params[name], value), name
    last, want = resumed.passes[-1], multi.passes[-1]
    assert (last.pass_id, last.cost, last.metrics) == (want.pass_id, want.cost, want.metrics)
    assert last.test.cost == want.test.cost


TORCHRUN_SCRIPT = '''
import json, sys
import numpy as np, torch
import torch.distributed as dist
from feedline import Dataset, data_type
from feedline.train import SGD, network, train

torch.set_num_threads(1)
rng = np.random.default_rng(1)
x = rng.normal(size=(32, 4)).astype(np.float32)
y = (x[:, 0] > 0).astype(np.int64)
torch.manual_seed(0)
net = network(inputs={"x": data_type.dense_vector(4), "label": data_type.integer_value(2)},
              learning_rate=0.1, learning_method=SGD())(torch.nn.Linear(4, 2))
batch = int(sys.argv[2])
seen = []
result = train(Dataset.from_arrays(x, y), num_passes=2, network=net, batch_size=batch,
               event_handler=lambda e: seen.append(type(e).__name__))
rank = dist.get_rank() if dist.is_initialized() else 0
world = dist.get_world_size() if dist.is_initialized() else 1
if rank == 0:
    with open(sys.argv[1], "w") as f:
        json.dump({"world": world, "weight": result.params["weight"].tolist(),
                   "costs": [p.cost for p in result.passes], "events": len(seen)}, f)
else:
    assert seen == [], "the event handler runs on rank 0 only"
'''


@pytest.mark.slow
def test_a_job_launched_by_torchrun_joins_the_process_group(tmp_path):
    import json
    import subprocess
    import sys

    script = tmp_path / "job.py"
    script.write_text(TORCHRUN_SCRIPT)
    from feedline.train.distributed import free_port

    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    env.update(OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "single.json"), "8"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
         "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
         str(script), str(tmp_path / "multi.json"), "4"],
        env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    single = json.loads((tmp_path / "single.json").read_text())
    multi = json.loads((tmp_path / "multi.json").read_text())
    assert (single["world"], multi["world"]) == (1, 2)
    np.testing.assert_allclose(multi["weight"], single["weight"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(multi["costs"], single["costs"], rtol=1e-5)
    assert multi["events"] == single["events"] == 2 * (1 + 4 * 2 + 1)



def test_leave_group_ends_the_gloo_threads_of_a_group_held_by_garbage(tmp_path):
    # destroy_process_group() alone leaves the group, and its gloo threads, running while
    # garbage in a reference cycle (a runner context) still refers to it; the group is
    # then torn down during interpreter shutdown. leave_group() ends them at once.
    import gc

    import torch.distributed as dist

    from feedline.train.distributed import _gloo_threads, leave_group

    assert _gloo_threads() == 0
    for fix in (False, True):
        dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store-{fix}", rank=0,
                                world_size=1)
        try:
            cycle = {"group": dist.group.WORLD}
            cycle["self"] = cycle
            dist.all_reduce(torch.ones(2))
            assert _gloo_threads() > 0
            del cycle
            if fix:
                leave_group()
                assert not dist.is_initialized() and _gloo_threads() == 0
            else:
                dist.destroy_process_group()
                assert _gloo_threads() > 0  # still running: garbage holds the group
                gc.collect()
                assert _gloo_threads() == 0
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()
