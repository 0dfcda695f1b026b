"""What cannot be migrated: left as it is, reported with line and suggestion, optionally marked."""

from __future__ import annotations

import pytest

from .conftest import assert_migrates, dedent, migrate

# What petastream.compat does not provide (docs/migrate-tool.md, "What stays on Petastorm").
UNSUPPORTED = [
    ("from petastorm import NoDataAvailableError", "petastorm.NoDataAvailableError", "PetastreamError"),
    ("from petastorm.hdfs.namenode import HdfsNamenodeResolver", "petastorm.hdfs.namenode.HdfsNamenodeResolver", "hdfs://"),
    ("from petastorm.workers_pool.thread_pool import ThreadPool", "petastorm.workers_pool.thread_pool.ThreadPool", "reader_pool_type"),
    ("from petastorm.cache import CacheBase", "petastorm.cache.CacheBase", "custom CacheBase subclasses"),
    ("from petastorm.local_disk_cache import LocalDiskCache", "petastorm.local_disk_cache.LocalDiskCache", "cache_type='local-disk'"),
    ("from petastorm.reader import normalize_dataset_url_or_urls", "petastorm.reader.normalize_dataset_url_or_urls", "cache_type="),
    ("from petastorm.pytorch import LoaderBase", "petastorm.pytorch.LoaderBase", "BatchedDataLoader"),
    ("from petastorm.tf_utils import date_to_nsec_from_epoch", "petastorm.tf_utils.date_to_nsec_from_epoch", "make_petastorm_dataset, tf_tensors"),
    ("from petastorm.transform import transform_schema", "petastorm.transform.transform_schema", "TransformSpec, edit_field"),
    ("from petastorm.utils import run_in_subprocess", "petastorm.utils.run_in_subprocess", "ProcessPoolExecutor"),
    ("from petastorm.tools.copy_dataset import copy_dataset", "petastorm.tools.copy_dataset.copy_dataset", "materialize_dataset"),
    (
        "from petastorm.etl.petastorm_generate_metadata import generate_petastorm_metadata",
        "petastorm.etl.petastorm_generate_metadata.generate_petastorm_metadata",
        "with materialize_dataset(spark, url, schema): pass",
    ),
]


@pytest.mark.parametrize(("source", "path", "hint"), UNSUPPORTED, ids=[u[1] for u in UNSUPPORTED])
def test_unsupported_names_stay_and_are_reported(source: str, path: str, hint: str) -> None:
    result = assert_migrates(source + "\n", source + "\n", ["unsupported-import"])
    item = result.items[0]
    assert item.message == f"{path} is not provided by petastream.compat"
    assert hint in item.suggestion
    assert item.line == 1


def test_unischema_dataset_script_moves_module_for_module() -> None:
    # Petastorm's hello-world ETL shape: schema, codecs, materialize_dataset, dict_to_spark_row
    assert_migrates(
        """
        import numpy as np
        from petastorm.codecs import CompressedImageCodec, NdarrayCodec, ScalarCodec
        from petastorm.etl.dataset_metadata import materialize_dataset
        from petastorm.unischema import Unischema, UnischemaField, dict_to_spark_row
        from pyspark.sql.types import IntegerType

        HelloWorldSchema = Unischema('HelloWorldSchema', [
            UnischemaField('id', np.int32, (), ScalarCodec(IntegerType()), False),
            UnischemaField('image1', np.uint8, (128, 256, 3), CompressedImageCodec('png'), False),
            UnischemaField('array_4d', np.uint8, (None, 128, 30, None), NdarrayCodec(), False),
        ])
        with materialize_dataset(spark, output_url, HelloWorldSchema, 256):
            rows = sc.parallelize(range(10)).map(row_generator).map(lambda x: dict_to_spark_row(HelloWorldSchema, x))
        """,
        """
        import numpy as np
        from petastream.compat.codecs import CompressedImageCodec, NdarrayCodec, ScalarCodec
        from petastream.compat.etl.dataset_metadata import materialize_dataset
        from petastream.compat.unischema import Unischema, UnischemaField, dict_to_spark_row
        from pyspark.sql.types import IntegerType

        HelloWorldSchema = Unischema('HelloWorldSchema', [
            UnischemaField('id', np.int32, (), ScalarCodec(IntegerType()), False),
            UnischemaField('image1', np.uint8, (128, 256, 3), CompressedImageCodec('png'), False),
            UnischemaField('array_4d', np.uint8, (None, 128, 30, None), NdarrayCodec(), False),
        ])
        with materialize_dataset(spark, output_url, HelloWorldSchema, 256):
            rows = sc.parallelize(range(10)).map(row_generator).map(lambda x: dict_to_spark_row(HelloWorldSchema, x))
        """,
    )


def test_one_item_per_unsupported_name_with_its_uses() -> None:
    source = """
        from petastorm.hdfs.namenode import HdfsNamenodeResolver, HdfsConnector
        from petastorm.local_disk_cache import LocalDiskCache

        resolver = HdfsNamenodeResolver(url)
        fs, path = HdfsConnector(url)
        cache = LocalDiskCache(path, 10 ** 9, 100)
        again = HdfsNamenodeResolver(other)
        """
    result = assert_migrates(source, source, ["unsupported-import"] * 3)
    resolver = result.items[0]
    assert (resolver.line, resolver.column, resolver.uses) == (1, 36, ("4", "7"))


def test_todo_comments_mark_each_item_once() -> None:
    result = assert_migrates(
        """
        import os
        from petastorm import TransformSpec
        from petastorm.reader import Reader

        def load(url):
            import petastorm
            try:
                return Reader(filesystem, url, transform_spec=TransformSpec(fn))
            except petastorm.NoDataAvailableError:
                return None
        """,
        """
        import os
        # TODO(petastream): petastorm.TransformSpec stays on Petastorm: its read pipeline uses petastorm.reader.Reader, which stays on Petastorm, and moving TransformSpec without its reader would make this file need petastream as well as petastorm; migrate petastorm.reader.Reader first (see its item); the rest of the pipeline moves with it on the next run; until then this file keeps petastorm (and so does the project's dependency list)
        from petastorm import TransformSpec
        # TODO(petastream): petastorm.reader.Reader is called in this file: its constructor (pyarrow_filesystem, dataset_path, worker_class, ...) is Petastorm's reader internals, which petastream.compat does not provide (it keeps the name, for annotations and isinstance); create the reader with make_reader(url, ...) or make_batch_reader(url, ...), which petastream.compat takes over with Petastorm's arguments; until then this file keeps petastorm, and so does the reader's pipeline
        from petastorm.reader import Reader

        def load(url):
            import petastorm
            try:
                return Reader(filesystem, url, transform_spec=TransformSpec(fn))
            # TODO(petastream): petastorm.NoDataAvailableError is not provided by petastream.compat; catch petastream.PetastreamError instead (or drop the handler)
            except petastorm.NoDataAvailableError:
                return None
        """,
        ["kept-with-petastorm-reader", "unsupported-use", "unsupported-use"],
        todo=True,
    )
    assert [i.line for i in result.items] == [2, 3, 9]


def test_todo_comment_on_the_first_line_and_above_a_decorator() -> None:
    assert_migrates(
        """
        # header comment
        from petastorm.hdfs.namenode import HdfsNamenodeResolver
        from unittest import mock


        class TestIt:
            @mock.patch("petastorm.hdfs.namenode.HdfsNamenodeResolver")
            def test(self, fake): ...
        """,
        """
        # header comment
        # TODO(petastream): petastorm.hdfs.namenode.HdfsNamenodeResolver is not provided by petastream.compat; pass the hdfs:// URL to make_reader from petastream.compat (read through fsspec and pyarrow's HadoopFileSystem); namenode HA is the Hadoop client's (core-site.xml)
        from petastorm.hdfs.namenode import HdfsNamenodeResolver
        from unittest import mock


        class TestIt:
            # TODO(petastream): patch target 'petastorm.hdfs.namenode.HdfsNamenodeResolver': petastorm.hdfs.namenode.HdfsNamenodeResolver is not provided by petastream.compat; pass the hdfs:// URL to make_reader from petastream.compat (read through fsspec and pyarrow's HadoopFileSystem); namenode HA is the Hadoop client's (core-site.xml)
            @mock.patch("petastorm.hdfs.namenode.HdfsNamenodeResolver")
            def test(self, fake): ...
        """,
        ["unsupported-import", "unsupported-patch-target"],
        todo=True,
    )


def test_without_the_flag_no_comment_is_added() -> None:
    source = "from petastorm.hdfs.namenode import HdfsNamenodeResolver\n"
    assert migrate(source).code == source


def test_todo_comment_already_present_is_not_added_again() -> None:
    marked = migrate("from petastorm.hdfs.namenode import HdfsNamenodeResolver\n", todo=True).code
    assert marked.count("# TODO(petastream)") == 1
    assert migrate(marked, todo=True).code == marked
    # the item is still reported: the work is not done yet
    assert [i.code for i in migrate(marked).items] == ["unsupported-import"]


def test_items_are_in_line_order_with_columns() -> None:
    result = migrate(
        dedent(
            """
            from petastorm.hdfs.namenode import (
                HdfsNamenodeResolver,
                HdfsConnector,
            )
            """
        )
    )
    assert [(i.line, i.column) for i in result.items] == [(2, 4), (3, 4)]
