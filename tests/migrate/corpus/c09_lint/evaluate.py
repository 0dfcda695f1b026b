"""Held-out evaluation; the model URL may be on HDFS, hence Petastorm's resolver."""

import os

import torch
from petastorm import NoDataAvailableError, TransformSpec
from petastorm.fs_utils import FilesystemResolver
from petastorm.spark import make_spark_converter


def evaluate(df, model: torch.nn.Module) -> float:
    resolver = FilesystemResolver(os.environ["MODEL_URL"])
    model.load_state_dict(torch.load(resolver.get_dataset_path()))
    spec = TransformSpec(lambda pdf: pdf[["features", "label"]])
    total = 0.0
    converter = make_spark_converter(df)
    with converter.make_torch_dataloader(transform_spec=spec, num_epochs=1) as loader:
        try:
            for batch in loader:
                total += float(model(batch["features"]).sum())
        except NoDataAvailableError:
            pass
    return total
