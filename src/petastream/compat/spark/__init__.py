"""``petastorm.spark`` as a package, so a literal ``petastorm.X`` -> ``petastream.compat.X`` swap
works: ``petastream.compat.spark.make_spark_converter`` and
``petastream.compat.spark.spark_dataset_converter``, which is the very module object
``petastream.compat.spark_dataset_converter`` (patching a name through either path patches what
the converter uses). ``petastream.compat`` itself stays the short spelling of this package.
"""

from petastream.compat.spark import spark_dataset_converter
from petastream.compat.spark_dataset_converter import SparkDatasetConverter, make_spark_converter

__all__ = ["make_spark_converter", "SparkDatasetConverter", "spark_dataset_converter"]
