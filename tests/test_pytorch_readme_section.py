"""The README's "Use with PyTorch DataLoader / Lightning" section, run as written."""

from __future__ import annotations

import pytest


@pytest.mark.timeout(240)
def test_readme_pytorch_section(tmp_path):
    # --- README code begins -------------------------------------------------------
    import lightning as L
    import numpy as np
    import torch
    from torch.utils.data import DataLoader
    from torchdata.stateful_dataloader import StatefulDataLoader

    from feedline import Dataset
    from feedline.pytorch.lightning import FeedlineDataModule

    # a stream pipeline (records from TFRecord/RecordIO/CSV files work the same way)
    pipeline = (Dataset.range(1000).filter(lambda i: i % 7 != 0)
                .shuffle(256, seed=0)
                .map(lambda i: {"x": np.full(4, i, np.float32), "y": i % 2}))

    # DataLoader: each of the 2 worker processes reads its own part; every record
    # once per epoch, a new shuffle each epoch, numpy arrays arrive as tensors
    loader = DataLoader(pipeline.as_torch(), batch_size=32, num_workers=2)
    for batch in loader:
        assert batch["x"].dtype == torch.float32 and batch["x"].shape[1] == 4

    # exact resume: torchdata's StatefulDataLoader saves and restores the position
    loader = StatefulDataLoader(pipeline.as_torch(), batch_size=32, num_workers=2)
    it = iter(loader)
    for _ in range(5):
        next(it)
    state = loader.state_dict()  # store it in your checkpoint
    resumed = StatefulDataLoader(pipeline.as_torch(), batch_size=32, num_workers=2)
    resumed.load_state_dict(state)
    assert torch.equal(next(iter(resumed))["x"], next(it)["x"])  # batch 6, exactly

    # Lightning: a LightningDataModule whose checkpoints resume at the exact batch
    class Model(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            return self.lin(batch["x"] / 1000).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    datamodule = FeedlineDataModule(train=pipeline, batch_size=32, num_workers=2)
    trainer = L.Trainer(max_steps=3, accelerator="cpu", logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        default_root_dir=tmp_path)
    trainer.fit(Model(), datamodule=datamodule)
    # --- README code ends ---------------------------------------------------------
    assert trainer.global_step == 3
    seen = [int(x) for b in DataLoader(pipeline.as_torch(), batch_size=100, num_workers=2)
            for x in b["x"][:, 0]]
    assert sorted(seen) == [i for i in range(1000) if i % 7 != 0]
