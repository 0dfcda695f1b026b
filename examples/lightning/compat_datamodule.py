"""A LightningDataModule on the Petastorm-compatible converter, as Databricks notebooks write it.

The converter's loaders default to ``num_epochs=None`` (they never end), so the Trainer bounds
each epoch with ``limit_train_batches`` and asks for a fresh loader every epoch
(``reload_dataloaders_every_n_epochs=1``); each one is entered as a context manager and exited
when the next replaces it or at teardown. Only the import line differs from the Petastorm
version of this module.

    spark-submit examples/lightning/compat_datamodule.py
"""

from __future__ import annotations

import pytorch_lightning as pl
import torch

from petastream.compat import make_spark_converter  # was: from petastorm.spark import ...


class ConverterDataModule(pl.LightningDataModule):
    def __init__(self, train_converter, val_converter, batch_size: int = 32):
        super().__init__()
        self.train_converter, self.val_converter = train_converter, val_converter
        self.batch_size = batch_size
        self._contexts: dict[str, object] = {}

    def _enter(self, name: str, converter, **kwargs):
        old = self._contexts.pop(name, None)
        if old is not None:
            old.__exit__(None, None, None)
        self._contexts[name] = converter.make_torch_dataloader(batch_size=self.batch_size, **kwargs)
        return self._contexts[name].__enter__()

    def train_dataloader(self):
        return self._enter("train", self.train_converter, num_epochs=None)

    def val_dataloader(self):
        return self._enter("val", self.val_converter, num_epochs=1)

    def teardown(self, stage: str) -> None:
        for ctx in self._contexts.values():
            ctx.__exit__(None, None, None)
        self._contexts.clear()


class Regression(pl.LightningModule):
    """label = 2 * feature + 1; records what it trained and validated on."""

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.seen: list[list[int]] = []
        self.validated: list[list[int]] = []

    def _loss(self, batch):
        x = batch["feature"].float().unsqueeze(1)
        return torch.nn.functional.mse_loss(self.layer(x), batch["label"].float().unsqueeze(1))

    def training_step(self, batch, batch_idx):
        self.seen.append(batch["id"].tolist())
        return self._loss(batch)

    def validation_step(self, batch, batch_idx):
        self.validated.append(batch["id"].tolist())
        self.log("val_loss", self._loss(batch))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def train(spark, rows: int = 300, batch_size: int = 32, epochs: int = 2) -> Regression:
    df = spark.range(rows).selectExpr("id", "cast(id as float) / 100 as feature",
                                      "cast(id as float) / 50 + 1 as label")
    train_df, val_df = df.where("id % 5 != 0"), df.where("id % 5 = 0")
    conv_train, conv_val = make_spark_converter(train_df), make_spark_converter(val_df)
    model = Regression()
    trainer = pl.Trainer(max_epochs=epochs, limit_train_batches=len(conv_train) // batch_size,
                         reload_dataloaders_every_n_epochs=1, num_sanity_val_steps=0,
                         accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model, ConverterDataModule(conv_train, conv_val, batch_size))
    conv_train.delete()
    conv_val.delete()
    return model


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[2]").getOrCreate()
    spark.conf.set("petastorm.spark.converter.parentCacheDirUrl", "file:///tmp/petastream-cache")
    m = train(spark)
    print(f"trained {len(m.seen)} steps, validated {sum(map(len, m.validated))} rows")
