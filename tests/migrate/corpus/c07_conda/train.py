import os

from petastorm.spark import SparkDatasetConverter, make_spark_converter
from pyspark.sql import SparkSession

spark = SparkSession.builder.getOrCreate()
spark.conf.set(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, os.environ["PETASTORM_CACHE_URL"])
converter = make_spark_converter(spark.range(20).selectExpr("id", "cast(id as double) as y"))
with converter.make_torch_dataloader(batch_size=5, num_epochs=1) as loader:
    RESULT = sum(len(batch["id"]) for batch in loader)
converter.delete()
