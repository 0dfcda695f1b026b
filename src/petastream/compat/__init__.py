"""``petastorm.spark``, on petastream: change the import, keep the code.

    from petastream.compat import make_spark_converter, SparkDatasetConverter

Module for module: ``petastream.compat`` = ``petastorm.spark`` (plus ``TransformSpec`` and
``edit_field`` from ``petastorm.transform``), ``make_reader``/``make_batch_reader`` as ``petastorm``'s,
``petastream.compat.spark_dataset_converter`` =
``petastorm.spark.spark_dataset_converter``, ``petastream.compat.pytorch`` = ``petastorm.pytorch``.
"""

from petastream.compat import spark_dataset_converter
from petastream.compat.reader import make_batch_reader
from petastream.compat.row_reader import make_reader
from petastream.compat.spark_dataset_converter import SparkDatasetConverter, make_spark_converter
from petastream.compat.transform import TransformSpec, edit_field

__all__ = ["make_spark_converter", "SparkDatasetConverter", "TransformSpec", "edit_field",
           "make_batch_reader", "make_reader", "spark_dataset_converter"]
