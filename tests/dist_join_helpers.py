"""Helpers of tests/test_dist_join.py: variable-size RecordIO records, and the scenarios
each of two gloo ranks runs (importable, so that spawned processes can run them)."""

from __future__ import annotations

import datetime
import os
import traceback

import numpy as np
import torch
import torch.distributed as dist

from feedline import recordio

N_RECORDS = 40
BATCH = 4


def write_records(directory) -> list[str]:
    """Two RecordIO files of ``N_RECORDS`` records in all: the first half large, the
    second half small, so equal byte ranges hold very different numbers of records.
    A record is its id (4 bytes) and padding."""
    paths = []
    ids = iter(range(N_RECORDS))
    for k, sizes in enumerate(([300] * 10 + [8] * 10, [300] * 4 + [8] * 16)):
        path = os.path.join(str(directory), f"part{k}.rec")
        with recordio.RecordIOWriter(path) as w:
            for size in sizes:
                w.write(next(ids).to_bytes(4, "little") + b"x" * size)
        paths.append(path)
    return paths


def record_id(record: bytes) -> int:
    return int.from_bytes(record[:4], "little")


def as_sample(record: bytes) -> tuple:
    i = record_id(record)
    return np.full(3, i / N_RECORDS, np.float32), np.int64(i % 2), i


def as_dict(record: bytes) -> dict:
    i = record_id(record)
    return {"x": np.full(3, i / N_RECORDS, np.float32), "id": i}


def _model():
    torch.manual_seed(0)
    return torch.nn.Linear(3, 2)


# --------------------------------------------------------------------------- scenarios

def runner_provider(paths, policy):
    """The Runner's DataProvider over ``split(paths, mode="bytes")``, 2 passes."""
    from feedline import data_type, split
    from feedline.train import SGD, Runner, network
    from feedline.train.items import Counter, CreateModel, DataProvider, LocalUpdater, TrainOps
    from feedline.train.runner import RunnerItem

    class Record(RunnerItem):
        def __init__(self):
            self.passes = []

        def on_pass_begin(self, next_callback):
            self.passes.append([])
            next_callback()

        def on_batch_begin(self, next_callback):
            ctx = self.context
            self.passes[-1].append(([int(s[2]) for s in ctx.batch], bool(ctx.padding)))
            return next_callback()

    net = network(inputs={"x": data_type.dense_vector(3), "label": data_type.integer_value(2)},
                  learning_rate=0.1, learning_method=SGD())(_model())
    record = Record()
    provider = DataProvider(split(paths, mode="bytes").map(as_sample), batch_size=BATCH,
                            feeding={"x": 0, "label": 1}, remainder=policy, prefetch=2)
    stats = []
    with Runner([CreateModel(net), LocalUpdater(), Counter(), provider, record, TrainOps()]) as r:
        for _ in range(2):
            r.run_one_pass()
            stats.append(provider.rank_join.stats())
    return {"passes": record.passes, "stats": stats}


def torch_loader(paths):
    """``split(paths, mode="bytes") -> as_torch() -> DataLoader(num_workers=2)``, joined,
    training a DDP model, 2 epochs."""
    from torch.nn.parallel import DistributedDataParallel

    from feedline import split
    from feedline.pytorch.rank_join import join

    loader = torch.utils.data.DataLoader(split(paths, mode="bytes").map(as_dict).as_torch(),
                                         batch_size=BATCH, num_workers=2)
    joined = join(loader, policy="pad", flag_key="padding")
    model = DistributedDataParallel(_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    epochs, stats = [], []
    for _ in range(2):
        steps = []
        for batch in joined:
            steps.append(([int(i) for i in batch["id"]], bool(batch["padding"])))
            opt.zero_grad()
            model(batch["x"]).sum().backward()
            opt.step()
        epochs.append(steps)
        stats.append(joined.stats())
    return {"passes": epochs, "stats": stats}


def lightning_fit(paths):
    """FeedlineDataModule over ``split(paths, mode="bytes")`` with strategy="ddp", 2 epochs
    (the process group exists already: Lightning joins it)."""
    import warnings

    import lightning as L

    from feedline import split
    from feedline.pytorch.lightning import FeedlineDataModule

    warnings.filterwarnings("ignore")

    class Model(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.lin = _model()
            self.epochs = []

        def on_train_epoch_start(self):
            self.epochs.append([])

        def training_step(self, batch, batch_idx):
            self.epochs[-1].append(([int(i) for i in batch["id"]], bool(batch["padding"])))
            return self.lin(batch["x"]).sum()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    dm = FeedlineDataModule(train=split(paths, mode="bytes").map(as_dict), batch_size=BATCH,
                            flag_key="padding")
    model = Model()
    L.Trainer(max_epochs=2, accelerator="cpu", devices=2, strategy="ddp", logger=False,
              enable_checkpointing=False, enable_progress_bar=False,
              enable_model_summary=False, num_sanity_val_steps=0).fit(model, datamodule=dm)
    return {"passes": model.epochs, "stats": [dm.loaders["train"].rank_join.stats()]}


SCENARIOS = {"runner_pad": lambda p: runner_provider(p, "pad"),
             "runner_drop": lambda p: runner_provider(p, "drop"),
             "torch": torch_loader, "lightning": lightning_fit}


def rank_main(rank: int, world: int, port: int, paths: list[str], names: list[str],
              out: str) -> None:
    """One rank: join the group, run the scenarios, write every rank's results (rank 0)."""
    import json
    import multiprocessing

    # a spawned process defaults to spawning its own children; a rank that torchrun
    # starts forks its DataLoader workers (Linux's default): do as torchrun's ranks do
    multiprocessing.set_start_method("fork", force=True)
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_WORLD_SIZE=str(world), NODE_RANK="0", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60))
    results = {}
    try:
        for name in names:
            try:
                results[name] = SCENARIOS[name](paths)
            except Exception:
                results[name] = {"error": traceback.format_exc()}
                break
        gathered: list = [None] * world
        dist.all_gather_object(gathered, results)
        if rank == 0:
            with open(out, "w") as f:
                json.dump(gathered, f)
    finally:
        dist.destroy_process_group()
