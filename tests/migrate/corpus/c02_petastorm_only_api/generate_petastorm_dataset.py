"""Hello-world style ETL: a Petastorm (Unischema) dataset written from Spark."""

import numpy as np
from petastorm.codecs import CompressedImageCodec, NdarrayCodec, ScalarCodec
from petastorm.etl.dataset_metadata import materialize_dataset
from petastorm.unischema import Unischema, UnischemaField, dict_to_spark_row
from pyspark.sql import SparkSession
from pyspark.sql.types import IntegerType

HelloWorldSchema = Unischema("HelloWorldSchema", [
    UnischemaField("id", np.int32, (), ScalarCodec(IntegerType()), False),
    UnischemaField("image1", np.uint8, (128, 256, 3), CompressedImageCodec("png"), False),
    UnischemaField("array_4d", np.uint8, (None, 128, 30, None), NdarrayCodec(), False),
])


def row_generator(x):
    return {
        "id": x,
        "image1": np.random.randint(0, 255, dtype=np.uint8, size=(128, 256, 3)),
        "array_4d": np.random.randint(0, 255, dtype=np.uint8, size=(4, 128, 30, 3)),
    }


def generate_petastorm_dataset(output_url="file:///tmp/hello_world_dataset"):
    spark = SparkSession.builder.config("spark.driver.memory", "2g").master("local[2]").getOrCreate()
    sc = spark.sparkContext
    with materialize_dataset(spark, output_url, HelloWorldSchema, 256):
        rows_rdd = sc.parallelize(range(10)).map(row_generator).map(
            lambda x: dict_to_spark_row(HelloWorldSchema, x)
        )
        spark.createDataFrame(rows_rdd, HelloWorldSchema.as_spark_schema()).coalesce(10).write.mode(
            "overwrite"
        ).parquet(output_url)
