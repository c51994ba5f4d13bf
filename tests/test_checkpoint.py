"""Checkpoints: exact mid-pass resume, file integrity, model mismatch, atomic writes."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
import torch

from feedline import Dataset, data_type
from feedline.exceptions import CheckpointError, StateNotSupportedError
from feedline.train import (
    AdamOptimizer,
    L2Regularization,
    ModelAverage,
    Runner,
    RunnerBuilder,
    RunnerItem,
    network,
)
from feedline.train import checkpoint as ckpt
from feedline.train.items import (
    Checkpointer,
    Counter,
    CreateModel,
    DataProvider,
    History,
    LocalUpdater,
    TrainOps,
)
from train_helpers import Crash, CrashAt

INPUTS = {"x": data_type.dense_vector(6), "label": data_type.integer_value(3)}


@network(inputs=INPUTS, learning_rate=1e-2, learning_method=AdamOptimizer(), batch_size=5,
         model_average=ModelAverage(0.3), regularization=L2Regularization(1e-3))
def resumable(x):
    return torch.nn.Sequential(torch.nn.Linear(x.dim, 16), torch.nn.ReLU(), torch.nn.Dropout(0.3),
                               torch.nn.Linear(16, 3))


def arrays(n=20):
    rng = np.random.default_rng(7)
    x = rng.normal(size=(n, 6)).astype(np.float32)
    return x, (np.abs(x[:, 0] * 3).astype(np.int64) % 3)


def pipeline():
    """Global shuffle (new order each pass), buffer shuffle, a map, a background thread."""
    x, y = arrays()
    return (Dataset.from_arrays(x, y).global_shuffle(seed=1).shuffle(6, seed=2)
            .map(lambda s: (s[0] * 2, s[1])).prefetch(2))


class Record(RunnerItem):
    """What each batch was, before any noise."""

    def __init__(self):
        self.batches = []

    def on_batch_begin(self, next_callback):
        ctx = self.context
        self.batches.append((ctx.pass_id, ctx.batch_id, ctx.inputs["x"].numpy().tobytes(),
                             ctx.inputs["label"].tolist()))
        return next_callback()


class Noise(RunnerItem):
    """Draws from numpy's and Python's global generators (torch's is used by dropout)."""

    def on_batch_begin(self, next_callback):
        x = self.context.inputs["x"]
        noise = np.random.normal(size=tuple(x.shape)).astype(np.float32) * 0.01
        self.context.inputs["x"] = x + torch.from_numpy(noise) + random.random() * 0.01
        return next_callback()


def job(*, checkpointer=None, crash_at=None, data=None, prefetch=0):
    items = [CreateModel(resumable, seed=0), LocalUpdater()]
    if checkpointer is not None:
        items.append(checkpointer)
    record = Record()
    items += [Counter(), DataProvider(pipeline() if data is None else data, prefetch=prefetch),
              History(), record, Noise()]
    if crash_at is not None:
        items.append(CrashAt(crash_at))
    items.append(TrainOps())
    return Runner(items), record


def seed_all(seed):
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)


@pytest.fixture
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_resume_mid_pass_gives_the_same_batches_and_bitwise_the_same_parameters(tmp_path, one_thread):
    seed_all(0)
    reference, ref_record = job()
    with reference:
        reference.run(3)
        ref_params = {k: v.clone() for k, v in reference.context.module.state_dict().items()}
        ref_opt = reference.context.optimizer.state_dict()
        ref_passes = reference.find(History).passes
        reference.context.updater.apply()
        ref_avg = [p.detach().clone() for p in reference.context.updater.params]
    assert len(ref_record.batches) == 12  # 3 passes of 4 batches

    seed_all(0)
    crashing, _ = job(checkpointer=Checkpointer(tmp_path, every_n_batches=3, keep=None), crash_at=7)
    with pytest.raises(Crash):
        with crashing:
            crashing.run(3)
    names = sorted(os.listdir(tmp_path))
    # every 3 batches (steps 3 and 6) and at the end of pass 0 (step 4)
    assert names == ["checkpoint-p0000-s000000003.flc", "checkpoint-p0001-s000000004.flc",
                     "checkpoint-p0001-s000000006.flc"]

    seed_all(12345)  # a different process state: every generator must come from the file
    resumed, record = job(checkpointer=Checkpointer(tmp_path, every_n_batches=3, resume="latest"))
    with resumed:
        ctx = resumed.context
        assert (ctx.pass_id, ctx.batch_id, ctx.global_step) == (1, 2, 6)
        assert resumed.run(3) == 2  # the rest of pass 1, then pass 2
        params = {k: v.clone() for k, v in resumed.context.module.state_dict().items()}
        opt = resumed.context.optimizer.state_dict()
        passes = resumed.find(History).passes
        resumed.context.updater.apply()
        avg = [p.detach().clone() for p in resumed.context.updater.params]
    assert resumed.find(Checkpointer).restored_from.endswith("checkpoint-p0001-s000000006.flc")
    assert record.batches == ref_record.batches[6:]
    for name, value in ref_params.items():
        assert torch.equal(params[name], value), name
    for a, b in zip(avg, ref_avg):
        assert torch.equal(a, b)
    for i, state in ref_opt["state"].items():
        for key, value in state.items():
            assert torch.equal(opt["state"][i][key], value)
    # the resumed pass reports the same means as the uninterrupted one
    assert passes == ref_passes[1:]


def test_resume_at_a_pass_boundary(tmp_path, one_thread):
    seed_all(0)
    reference, ref_record = job()
    with reference:
        reference.run(2)
        ref_params = reference.context.module.state_dict()
    seed_all(0)
    first, _ = job(checkpointer=Checkpointer(tmp_path))
    with first:
        first.run(1)
    state = ckpt.read_checkpoint(ckpt.latest_checkpoint(tmp_path))
    assert state["runner"]["data"] == {"iterator": None, "epoch": 1}
    assert state["metadata"] == {"pass_id": 1, "batch_id": 0, "global_step": 4}
    seed_all(99)
    second, record = job(checkpointer=Checkpointer(tmp_path, resume="latest"))
    with second:
        second.run(2)
        params = second.context.module.state_dict()
    assert record.batches == ref_record.batches[4:]
    assert all(torch.equal(params[k], v) for k, v in ref_params.items())


def write_checkpoint(path):
    runner, _ = job()
    with runner:
        runner.run_one_pass()
        ckpt.save_checkpoint(path, runner, metadata={"note": "x"})
    return path


def test_checkpoint_round_trip_holds_everything(tmp_path):
    path = write_checkpoint(tmp_path / "a.flc")
    obj = ckpt.read_checkpoint(path)
    assert obj["kind"] == "checkpoint" and obj["metadata"] == {"note": "x"}
    assert set(obj["runner"]) == {"model", "updater", "counter", "data", "train_ops"}
    assert set(obj["rng"]) >= {"python", "numpy", "torch"}
    assert obj["runner"]["updater"]["average"]["num_updates"] == 4


def test_truncated_and_corrupt_files_raise_checkpoint_error(tmp_path):
    path = write_checkpoint(tmp_path / "good.flc")
    data = path.read_bytes()
    bad = tmp_path / "bad.flc"
    for cut in (0, 7, 19):
        bad.write_bytes(data[:cut])
        with pytest.raises(CheckpointError, match=f"truncated: {cut} bytes, the header alone is 20 bytes"):
            ckpt.read_checkpoint(bad)
    for cut in (20, len(data) // 2, len(data) - 1):
        bad.write_bytes(data[:cut])
        with pytest.raises(CheckpointError, match=f"truncated: the header announces {len(data) - 20} "
                                                  f"payload bytes, the file holds {cut - 20}"):
            ckpt.read_checkpoint(bad)
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x40
    bad.write_bytes(bytes(flipped))
    with pytest.raises(CheckpointError, match="corrupt: CRC32C of the payload is 0x[0-9a-f]{8}, the header says"):
        ckpt.read_checkpoint(bad)
    bad.write_bytes(b"PK\x03\x04" + data[4:])
    with pytest.raises(CheckpointError, match="not a feedline checkpoint"):
        ckpt.read_checkpoint(bad)
    junk = b"not a torch file"
    bad.write_bytes(ckpt._HEADER.pack(ckpt.MAGIC, len(junk), __import__("google_crc32c").value(junk)) + junk)
    with pytest.raises(CheckpointError, match="the payload does not load"):
        ckpt.read_checkpoint(bad)
    runner, _ = job()
    with runner:
        bad.write_bytes(data[:-3])
        with pytest.raises(CheckpointError, match=str(bad)):
            ckpt.load_checkpoint(bad, runner)


def test_a_checkpoint_of_another_model_names_the_mismatch(tmp_path):
    path = write_checkpoint(tmp_path / "a.flc")
    other = network(inputs=INPUTS, batch_size=5, model_average=ModelAverage(0.3))(
        torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)))
    runner = Runner([CreateModel(other), LocalUpdater(), Counter(), DataProvider(pipeline()), TrainOps()])
    with runner:
        with pytest.raises(CheckpointError, match=r"a.flc: the parameters do not match the model: "
                                                  r"missing from checkpoint: '2.weight', '2.bias'; "
                                                  r"unexpected in checkpoint: '3.weight', '3.bias'; "
                                                  r"shape of '0.weight': checkpoint \(16, 6\), model \(8, 6\)"):
            ckpt.load_checkpoint(path, runner)
    fewer = Runner([CreateModel(resumable), LocalUpdater(), Counter(), DataProvider(pipeline())])
    with fewer:
        with pytest.raises(CheckpointError, match="different runner: state for items this runner lacks: 'train_ops'"):
            ckpt.load_checkpoint(path, fewer)


def test_a_failed_write_leaves_the_last_good_checkpoint(tmp_path, monkeypatch):
    path = write_checkpoint(tmp_path / "ckpt.flc")
    good = path.read_bytes()

    def half_then_fail(f, data):
        f.write(data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ckpt, "_write_all", half_then_fail)
    runner, _ = job()
    with runner:
        runner.run_one_pass()
        runner.run_one_pass()
        with pytest.raises(OSError, match="No space left"):
            ckpt.save_checkpoint(path, runner)

        def interrupted(f, data):
            f.write(data[:100])
            raise KeyboardInterrupt

        monkeypatch.setattr(ckpt, "_write_all", interrupted)
        with pytest.raises(KeyboardInterrupt):
            ckpt.save_checkpoint(path, runner)
    assert path.read_bytes() == good
    assert os.listdir(tmp_path) == ["ckpt.flc"]  # no temporary file left behind
    assert ckpt.read_checkpoint(path)["runner"]["counter"]["pass_id"] == 1


def test_latest_checkpoint_ignores_temporary_files_and_keep_prunes(tmp_path):
    assert ckpt.latest_checkpoint(tmp_path / "missing") is None
    (tmp_path / ".checkpoint-p0009-s000000099.flc.abc.tmp").write_bytes(b"partial")
    runner = RunnerBuilder(resumable).with_std_local_trainer(pipeline()) \
        .with_checkpoints(tmp_path, every_n_batches=1, keep=2).build()
    with runner:
        runner.run(2)
    names = sorted(n for n in os.listdir(tmp_path) if n.endswith(".flc"))
    assert names == ["checkpoint-p0001-s000000008.flc", "checkpoint-p0002-s000000008.flc"]
    assert ckpt.latest_checkpoint(tmp_path).endswith("checkpoint-p0002-s000000008.flc")
    assert ckpt.checkpoint_name(12, 34) == "checkpoint-p0012-s000000034.flc"


def test_data_state_checks(tmp_path):
    runner, _ = job()
    with runner:
        with pytest.raises(CheckpointError, match="saved by 2 processes, this job has 1"):
            runner.find(DataProvider).load_state_dict({"iterator": None, "ranks": [None, None], "epoch": 0})
        with pytest.raises(CheckpointError, match="the data entry lacks 'iterator' or 'epoch'"):
            runner.find(DataProvider).load_state_dict({})


def test_a_mid_pass_checkpoint_needs_a_resumable_source(tmp_path):
    x, y = arrays()

    def reader():  # a plain reader cannot report its position
        return iter(list(zip(x, y)))

    runner, _ = job(checkpointer=Checkpointer(tmp_path, every_n_batches=2), data=reader)
    with runner:
        with pytest.raises(StateNotSupportedError, match="cannot report its position"):
            runner.run_one_pass()
    assert os.listdir(tmp_path) == []


def test_params_export_for_inference(tmp_path):
    model = resumable.create_model()
    path = tmp_path / "model.flp"
    ckpt.save_params(path, model, metadata={"classes": 3})
    fresh = resumable.create_model()
    ckpt.load_params(path, fresh)
    assert all(torch.equal(a, b) for a, b in zip(fresh.parameters(), model.parameters()))
    with pytest.raises(CheckpointError, match=r"model.flp: the parameters do not match the model: "
                                              r"missing from file: '2.weight', '2.bias'; unexpected in file: '3.weight', '3.bias'"):
        ckpt.load_params(path, torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(),
                                                   torch.nn.Linear(16, 3)))
    with pytest.raises(CheckpointError, match="holds 'params', expected 'checkpoint'"):
        ckpt.read_checkpoint(path)
    # a full checkpoint's parameters load too
    full = write_checkpoint(tmp_path / "full.flc")
    ckpt.load_params(full, fresh)
    with pytest.raises(TypeError, match="`model` must be a torch.nn.Module, got int"):
        ckpt.save_params(path, 3)


def test_feeding_ahead_across_passes_keeps_batches_and_checkpoints_exact(tmp_path, one_thread):
    """prefetch=2 over data ending in its own prefetch: the feeding thread reads the next
    pass ahead, yet the batches, the pass-boundary entry and a mid-pass resume are those
    of feeding in the training thread."""
    seed_all(0)
    reference, ref_record = job()
    with reference:
        reference.run(3)
    seed_all(0)
    ahead, ahead_record = job(prefetch=2, checkpointer=Checkpointer(tmp_path / "a"))
    with ahead:
        ahead.run(1)
        boundary = ckpt.read_checkpoint(ckpt.latest_checkpoint(tmp_path / "a"))
        ahead.run(3)  # up to 3 passes in all
    assert boundary["runner"]["data"] == {"iterator": None, "epoch": 1}
    assert ahead_record.batches == ref_record.batches

    seed_all(0)
    crashing, _ = job(prefetch=2, crash_at=7,
                      checkpointer=Checkpointer(tmp_path / "b", every_n_batches=3, keep=None))
    with pytest.raises(Crash):
        with crashing:
            crashing.run(3)
    seed_all(12345)
    resumed, record = job(prefetch=2, checkpointer=Checkpointer(tmp_path / "b", every_n_batches=3,
                                                                resume="latest"))
    with resumed:
        assert resumed.run(3) == 2
    assert record.batches == ref_record.batches[6:]
