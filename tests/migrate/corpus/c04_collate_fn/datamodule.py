"""A Lightning DataModule over a Spark DataFrame, with a custom collate function."""

import functools
import os

import pytorch_lightning as pl
import torch
from petastorm.pytorch import DataLoader
from petastorm.spark import SparkDatasetConverter, make_spark_converter


def collate_rows(rows):
    """Stack the rows' features; keep the ids as a list."""
    return {
        "features": torch.stack([torch.as_tensor(row["features"]) for row in rows]),
        "id": [int(row["id"]) for row in rows],
    }


class PetastormDataModule(pl.LightningDataModule):
    def __init__(self, spark, df, batch_size=16, cache_dir="file:///dbfs/tmp/petastorm/cache"):
        super().__init__()
        spark.conf.set(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, cache_dir)
        self.df = df
        self.batch_size = batch_size

    def setup(self, stage=None):
        self.converter_train = make_spark_converter(self.df)

    def train_dataloader(self):
        self.train_context = self.converter_train.make_torch_dataloader(
            batch_size=self.batch_size,
            num_epochs=1,
            data_loader_fn=functools.partial(DataLoader, collate_fn=collate_rows),
        )
        return self.train_context.__enter__()

    def teardown(self, stage=None):
        self.train_context.__exit__(None, None, None)
        self.converter_train.delete()


def main(spark):
    df = spark.range(48).selectExpr("id", "array(cast(id as float), cast(id as float)) as features")
    module = PetastormDataModule(spark, df, cache_dir=os.environ.get("PETASTORM_CACHE_URL", "file:///tmp/c"))
    module.setup("fit")
    batches = list(module.train_dataloader())
    module.teardown("fit")
    return batches
