"""A Spark DataFrame to Keras through the Spark dataset converter."""

import tensorflow as tf
from petastorm.spark import SparkDatasetConverter, make_spark_converter
from pyspark.sql import SparkSession

BATCH_SIZE = 32


def train(cache_dir_url="file:///tmp/converter_cache"):
    spark = SparkSession.builder.master("local[2]").appName("petastorm.spark tf").getOrCreate()
    spark.conf.set(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, cache_dir_url)
    train_df, test_df = spark.range(512).selectExpr("cast(id % 2 as float) as label",
                                                    "array(cast(id as float)) as features") \
        .randomSplit([0.9, 0.1], seed=3)
    train_converter, test_converter = make_spark_converter(train_df), make_spark_converter(test_df)
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    with train_converter.make_tf_dataset(batch_size=BATCH_SIZE) as train_ds, \
            test_converter.make_tf_dataset(batch_size=BATCH_SIZE, num_epochs=1) as test_ds:
        model.fit(train_ds.map(lambda x: (x.features, x.label)), epochs=1,
                  steps_per_epoch=max(1, len(train_converter) // BATCH_SIZE),
                  validation_data=test_ds.map(lambda x: (x.features, x.label)))
    train_converter.delete()
    test_converter.delete()
