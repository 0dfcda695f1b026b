"""A Spark DataFrame to torch through the Spark dataset converter."""

import torch
from petastorm.spark import SparkDatasetConverter, make_spark_converter
from pyspark.sql import SparkSession


def train(cache_dir_url="file:///tmp/converter_cache", epochs=1):
    spark = SparkSession.builder.master("local[2]").appName("petastorm.spark torch").getOrCreate()
    spark.conf.set(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, cache_dir_url)
    df = spark.range(256).selectExpr("cast(id % 2 as float) as label",
                                     "array(cast(id as float), cast(id * 3 as float)) as features")
    converter = make_spark_converter(df)
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    with converter.make_torch_dataloader(batch_size=32, num_epochs=epochs) as loader:
        for batch in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(batch["features"]).squeeze(1), batch["label"])
            loss.backward()
            optimizer.step()
    converter.delete()
