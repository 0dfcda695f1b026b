"""Write a digits dataset (random pixels) as a Petastorm dataset with Spark."""

import argparse

import numpy as np
from petastorm.etl.dataset_metadata import materialize_dataset
from petastorm.unischema import dict_to_spark_row
from pyspark.sql import SparkSession

from mnist.schema import DigitsSchema


def synthetic_digits(count, seed=0):
    rng = np.random.default_rng(seed)
    for row_id in range(count):
        pixels = rng.integers(0, 255, size=(28, 28), dtype=np.uint8)
        yield {"row_id": row_id, "label": row_id % 10, "pixels": pixels}


def write_digits(output_url, count=100, row_group_size_mb=16, spark=None):
    spark = spark or SparkSession.builder.master("local[2]").getOrCreate()
    with materialize_dataset(spark, output_url, DigitsSchema, row_group_size_mb):
        rows = [dict_to_spark_row(DigitsSchema, digit) for digit in synthetic_digits(count)]
        spark.createDataFrame(rows, DigitsSchema.as_spark_schema()) \
            .coalesce(2) \
            .write \
            .mode("overwrite") \
            .parquet(output_url)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output-url", default="file:///tmp/digits")
    parser.add_argument("--count", type=int, default=1000)
    args = parser.parse_args()
    write_digits(args.output_url, args.count)
