"""petastream.compat.spark mirrors petastorm.spark as a package: a literal petastorm.X ->
petastream.compat.X swap imports, and its spark_dataset_converter is the converter's module."""

import subprocess
import sys
from unittest import mock


def test_spark_package_is_the_converter_module():
    import petastream.compat.spark.spark_dataset_converter as through_package
    from petastream.compat import spark_dataset_converter
    from petastream.compat.spark import SparkDatasetConverter, make_spark_converter

    assert through_package is spark_dataset_converter
    assert make_spark_converter is spark_dataset_converter.make_spark_converter
    assert SparkDatasetConverter is spark_dataset_converter.SparkDatasetConverter
    with mock.patch("petastream.compat.spark.spark_dataset_converter._FILE_AVAILABILITY_WAIT_TIMEOUT_SECS", 7):
        assert spark_dataset_converter._FILE_AVAILABILITY_WAIT_TIMEOUT_SECS == 7


def test_spark_package_imports_without_pyspark():
    code = ("import sys, petastream.compat.spark.spark_dataset_converter, petastream.compat.fs_utils, "
            "petastream.compat.spark_utils, petastream.compat.test_util.reader_mock, "
            "petastream.compat.test_util.shuffling_analysis\n"
            "assert not {'pyspark', 'torch', 'tensorflow'} & set(sys.modules), sys.modules.keys()")
    subprocess.run([sys.executable, "-c", code], check=True)
