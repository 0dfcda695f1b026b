# Databricks notebook source
import glob
import os

from petastorm.spark import SparkDatasetConverter, make_spark_converter

CACHE_URL = os.environ.get("PETASTORM_CACHE_URL", "file:///dbfs/tmp/petastorm/cache")
spark.conf.set(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, CACHE_URL)
df = spark.range(40).selectExpr("id", "cast(id * 2 as double) as value")
converter = make_spark_converter(df)

# COMMAND ----------

# sanity checks on what the converter cached
cache_path = converter.cache_dir_url.replace("file://", "")
parquet_files = glob.glob(cache_path + "/*.parquet")
cached = spark.read.parquet(converter.cache_dir_url)
assert cached.count() == len(converter)
