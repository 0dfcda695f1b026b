"""Training on a Spark DataFrame through the converter (the part that migrates)."""

import os

import torch
from petastorm.spark import SparkDatasetConverter, make_spark_converter
from pyspark.sql import SparkSession

spark = SparkSession.builder.getOrCreate()
spark.conf.set(
    SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF,
    os.environ.get("PETASTORM_CACHE_URL", "file:///dbfs/tmp/petastorm/cache"),
)
df = spark.range(64).selectExpr(
    "id", "array(cast(id as float), cast(id * 2 as float)) as features", "cast(id % 2 as float) as label"
)
converter = make_spark_converter(df)
model = torch.nn.Linear(2, 1)
with converter.make_torch_dataloader(batch_size=16, num_epochs=1) as loader:
    for batch in loader:
        loss = torch.nn.functional.mse_loss(model(batch["features"]).squeeze(1), batch["label"])
RESULT = {"rows": len(converter), "loss": loss.item()}
converter.delete()
