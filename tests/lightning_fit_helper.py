"""Run by tests/test_pytorch_lightning.py in a fresh process (and re-run by Lightning's
DDP launcher for rank 1): an uninterrupted fit, a fit stopped mid-epoch after saving a
checkpoint, and a fit resumed from it. Writes ``<out>/rank<r>.json`` with the batches
each fit saw and whether the final weights are equal.

Usage: python lightning_fit_helper.py OUT_DIR DEVICES NUM_WORKERS STOP_STEP
"""

from __future__ import annotations

import json
import os
import sys
import warnings

import lightning as L
import numpy as np
import torch

from feedline import Dataset
from feedline.pytorch.lightning import FeedlineDataModule

N = 48
BATCH = 4


def pipeline() -> Dataset:
    # a stream (the filter), reshuffled each epoch
    return (Dataset.range(N).filter(lambda i: True).shuffle(8, seed=1)
            .map(lambda i: {"x": np.full(3, i / N, np.float32), "id": i}))


class Model(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(3, 1)
        self.seen: list[list[int]] = []

    def training_step(self, batch, batch_idx):
        self.seen.append([int(i) for i in batch["id"]])
        return (self.lin(batch["x"]) - 1).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class StopAfter(L.Callback):
    """Save a checkpoint after global step ``k`` and stop the fit there."""

    def __init__(self, k: int, path: str) -> None:
        self.k, self.path = k, path

    def on_train_batch_end(self, trainer, *args) -> None:
        if trainer.global_step == self.k:
            trainer.save_checkpoint(self.path)
            trainer.should_stop = True


def main() -> None:
    out, devices, workers, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    warnings.filterwarnings("ignore")
    options = dict(max_epochs=2, accelerator="cpu", devices=devices, logger=False,
                   enable_checkpointing=False, enable_progress_bar=False,
                   enable_model_summary=False, num_sanity_val_steps=0)
    if devices > 1:
        options["strategy"] = "ddp"

    def datamodule() -> FeedlineDataModule:
        return FeedlineDataModule(train=pipeline(), batch_size=BATCH, num_workers=workers)

    full = Model()
    L.Trainer(**options).fit(full, datamodule=datamodule())
    ckpt = os.path.join(out, "stop.ckpt")
    first = Model()
    L.Trainer(callbacks=[StopAfter(k, ckpt)], **options).fit(first, datamodule=datamodule())
    resumed = Model()
    L.Trainer(**options).fit(resumed, datamodule=datamodule(), ckpt_path=ckpt)
    rank = int(os.environ.get("LOCAL_RANK", 0))
    same = all(torch.equal(a, b) for a, b in zip(full.state_dict().values(),
                                                 resumed.state_dict().values()))
    changed = not torch.equal(first.lin.weight, full.lin.weight)
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump({"full": full.seen, "first": first.seen, "resumed": resumed.seen,
                   "same_weights": same, "first_differs": changed}, f)


if __name__ == "__main__":
    main()
