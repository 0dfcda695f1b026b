# Databricks notebook source
# MAGIC %md
# MAGIC Materialize the features with the Spark converter and train a small model.

# COMMAND ----------

import os

from petastorm.spark import SparkDatasetConverter, make_spark_converter

spark.conf.set(
    SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF,
    os.environ.get("PETASTORM_CACHE_URL", "file:///dbfs/tmp/petastorm/cache"),
)

# COMMAND ----------

df = spark.range(100).selectExpr("id", "cast(id % 3 as int) as label_index", "array(rand(), rand()) as features")
df_train, df_val = df.randomSplit([0.9, 0.1], seed=12345)
converter_train = make_spark_converter(df_train)
converter_val = make_spark_converter(df_val)
print(f"train: {len(converter_train)}, val: {len(converter_val)}")

# COMMAND ----------

with converter_train.make_torch_dataloader(batch_size=32, num_epochs=1) as loader:
    batches = sum(1 for _ in loader)
RESULT = {"batches": batches, "rows": len(converter_train) + len(converter_val)}
converter_train.delete()
converter_val.delete()
