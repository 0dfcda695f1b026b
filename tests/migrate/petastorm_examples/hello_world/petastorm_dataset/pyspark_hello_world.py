"""The Petastorm dataset in Spark: decoded rows as an RDD, raw columns with SQL."""

from petastorm.spark_utils import dataset_as_rdd
from pyspark.sql import SparkSession

from hello_world.petastorm_dataset.generate_petastorm_dataset import GreetingsSchema


def pyspark_hello_world(dataset_url="file:///tmp/hello_world_dataset"):
    spark = SparkSession.builder.master("local[1]").getOrCreate()
    rdd = dataset_as_rdd(dataset_url, spark, [GreetingsSchema.id, GreetingsSchema.photo])
    print("a decoded id:", rdd.first().id)
    print("rows:", spark.read.parquet(dataset_url).count())


if __name__ == "__main__":
    pyspark_hello_world()
