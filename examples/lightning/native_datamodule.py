"""A LightningDataModule on petastream's native loader, with mid-epoch checkpoints.

The loader is ``Stateful`` (``state_dict`` / ``load_state_dict``), so Lightning saves its
position in every checkpoint and a run resumed from a mid-epoch checkpoint continues with
exactly the batches the interrupted run had not trained on. Each Lightning epoch is a new
iteration of the loader, so a new order.

    python examples/lightning/native_datamodule.py /path/to/mds-dataset
"""

from __future__ import annotations

import sys

import pytorch_lightning as pl
import torch

import petastream.torch


class PetastreamDataModule(pl.LightningDataModule):
    def __init__(self, url: str, batch_size: int = 64, seed: int = 0):
        super().__init__()
        self.url, self.batch_size, self.seed = url, batch_size, seed
        self.loader = None

    def setup(self, stage: str) -> None:
        if self.loader is None:  # one loader for the whole fit: it holds the epoch and position
            self.loader = petastream.torch.loader(self.url, self.batch_size, shuffle=True, seed=self.seed)

    def train_dataloader(self):
        return self.loader


class Regression(pl.LightningModule):
    """y = 2x + 1 from the dataset's ``x`` column; records the ids of every batch it trains on."""

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.seen: list[list[int]] = []

    def training_step(self, batch, batch_idx):
        self.seen.append(batch["id"].tolist())
        x = batch["x"].float().unsqueeze(1)
        return torch.nn.functional.mse_loss(self.layer(x), 2 * x + 1)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def trainer(**kwargs) -> pl.Trainer:
    quiet = dict(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                 enable_model_summary=False)
    return pl.Trainer(**{**quiet, **kwargs})


if __name__ == "__main__":
    model = Regression()
    trainer(max_epochs=2, enable_checkpointing=False).fit(model, PetastreamDataModule(sys.argv[1]))
    print(f"trained on {sum(map(len, model.seen))} samples in {len(model.seen)} steps")
