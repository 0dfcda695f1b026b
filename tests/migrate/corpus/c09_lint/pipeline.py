"""Training pipeline; ruff with isort runs on it in CI."""

import os

import torch
from petastorm import TransformSpec
from petastorm.pytorch import BatchedDataLoader
from petastorm.spark import SparkDatasetConverter, make_spark_converter
from petastorm.spark.spark_dataset_converter import TorchDatasetContextManager
from pyspark.sql import DataFrame, SparkSession


def converter_for(spark: SparkSession, df: DataFrame):
    spark.conf.set(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, os.environ["CACHE_URL"])
    return make_spark_converter(df)


def batches(converter) -> TorchDatasetContextManager:
    spec = TransformSpec(lambda pdf: pdf)
    return converter.make_torch_dataloader(
        batch_size=32, transform_spec=spec, data_loader_fn=BatchedDataLoader
    )


def model() -> torch.nn.Module:
    return torch.nn.Linear(4, 1)
