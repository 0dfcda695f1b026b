"""Convert a folder of images, one sub-folder per WordNet id, to a Petastorm dataset."""

import os

import numpy as np
from petastorm.etl.dataset_metadata import materialize_dataset
from petastorm.unischema import dict_to_spark_row
from PIL import Image
from pyspark.sql import SparkSession

from imagenet.schema import LabelledImagesSchema

ROW_GROUP_SIZE_MB = 256


def _load(item):
    wordnet_id, label, path = item
    return {"wordnet_id": wordnet_id, "label": label, "image": np.asarray(Image.open(path).convert("RGB"))}


def images_to_petastorm(images_dir, labels, output_url):
    listing = [(wid, labels[wid], os.path.join(images_dir, wid, name))
               for wid in sorted(os.listdir(images_dir))
               for name in sorted(os.listdir(os.path.join(images_dir, wid)))]
    spark = SparkSession.builder.appName("imagenet to petastorm").getOrCreate()
    with materialize_dataset(spark, output_url, LabelledImagesSchema, ROW_GROUP_SIZE_MB):
        rows = spark.sparkContext.parallelize(listing, max(1, len(listing) // 100)) \
            .map(_load) \
            .map(lambda row: dict_to_spark_row(LabelledImagesSchema, row))
        spark.createDataFrame(rows, LabelledImagesSchema.as_spark_schema()) \
            .write.mode("overwrite").option("compression", "none").parquet(output_url)
