"""Write a small Petastorm dataset with three codecs, from an RDD of dicts."""

import numpy as np
from petastorm.codecs import CompressedImageCodec, NdarrayCodec, ScalarCodec
from petastorm.etl.dataset_metadata import materialize_dataset
from petastorm.unischema import Unischema, UnischemaField, dict_to_spark_row
from pyspark.sql import SparkSession
from pyspark.sql.types import LongType

GreetingsSchema = Unischema("GreetingsSchema", [
    UnischemaField("id", np.int64, (), ScalarCodec(LongType()), False),
    UnischemaField("photo", np.uint8, (32, 48, 3), CompressedImageCodec("png"), False),
    UnischemaField("tensor", np.float32, (4, None), NdarrayCodec(), False),
])


def make_row(i):
    return {
        "id": i,
        "photo": np.full((32, 48, 3), i % 255, dtype=np.uint8),
        "tensor": np.ones((4, i % 3 + 1), dtype=np.float32),
    }


def generate(output_url="file:///tmp/hello_world_dataset", rows=12):
    spark = SparkSession.builder.master("local[2]").getOrCreate()
    with materialize_dataset(spark, output_url, GreetingsSchema, row_group_size_mb=1):
        rdd = spark.sparkContext.parallelize(range(rows)) \
            .map(make_row) \
            .map(lambda row: dict_to_spark_row(GreetingsSchema, row))
        spark.createDataFrame(rdd, GreetingsSchema.as_spark_schema()).write.mode("overwrite").parquet(output_url)


if __name__ == "__main__":
    generate()
