"""What cannot be migrated: left as it is, reported with line and suggestion, optionally marked."""

from __future__ import annotations

import pytest

from .conftest import assert_migrates, dedent, migrate

UNSUPPORTED = [
    ("from petastorm import make_reader", "petastorm.make_reader", "petastream.open(url)"),
    ("from petastorm import make_batch_reader", "petastorm.make_batch_reader", "spark.read.parquet"),
    (
        "from petastorm.etl.dataset_metadata import materialize_dataset",
        "petastorm.etl.dataset_metadata.materialize_dataset",
        "df.write.parquet(url)",
    ),
    ("from petastorm.unischema import Unischema", "petastorm.unischema.Unischema", "StructType"),
    ("from petastorm.unischema import UnischemaField", "petastorm.unischema.UnischemaField", "StructType"),
    ("from petastorm.unischema import dict_to_spark_row", "petastorm.unischema.dict_to_spark_row", "Row"),
    ("from petastorm.codecs import CompressedImageCodec", "petastorm.codecs.CompressedImageCodec", "binary"),
    ("from petastorm.codecs import NdarrayCodec", "petastorm.codecs.NdarrayCodec", "array<float>"),
    ("from petastorm.codecs import ScalarCodec", "petastorm.codecs.ScalarCodec", "plain columns"),
    ("from petastorm.tf_utils import make_petastorm_dataset", "petastorm.tf_utils.make_petastorm_dataset", "make_tf_dataset"),
    ("from petastorm.tf_utils import tf_tensors", "petastorm.tf_utils.tf_tensors", "make_tf_dataset"),
    ("from petastorm.predicates import in_lambda", "petastorm.predicates.in_lambda", "df.filter"),
    ("from petastorm.reader import Reader", "petastorm.reader.Reader", "make_torch_dataloader"),
    ("from petastorm import NoDataAvailableError", "petastorm.NoDataAvailableError", "PetastreamError"),
    ("from petastorm.fs_utils import FilesystemResolver", "petastorm.fs_utils.FilesystemResolver", "fsspec"),
    ("from petastorm.pytorch import LoaderBase", "petastorm.pytorch.LoaderBase", "BatchedDataLoader"),
    ("from petastorm.ngram import NGram", "petastorm.ngram.NGram", "rewrite this by hand"),
]


@pytest.mark.parametrize(("source", "path", "hint"), UNSUPPORTED, ids=[u[1] for u in UNSUPPORTED])
def test_unsupported_names_stay_and_are_reported(source: str, path: str, hint: str) -> None:
    result = assert_migrates(source + "\n", source + "\n", ["unsupported-import"])
    item = result.items[0]
    assert item.message == f"{path} is not provided by petastream.compat"
    assert hint in item.suggestion
    assert item.line == 1


def test_unischema_dataset_script_is_left_alone_with_one_item_per_name() -> None:
    source = """
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
        """
    result = assert_migrates(source, source, ["unsupported-import"] * 7)
    materialize = next(i for i in result.items if "materialize_dataset" in i.message)
    assert (materialize.line, materialize.column) == (3, 43)
    assert materialize.uses == ("12",)
    unischema_field = next(i for i in result.items if "UnischemaField" in i.message)
    assert unischema_field.uses == ("8", "9", "10")


def test_todo_comments_mark_each_item_once() -> None:
    result = assert_migrates(
        """
        import os
        from petastorm import make_reader, TransformSpec

        def load(url):
            import petastorm
            try:
                return petastorm.make_batch_reader(url)
            except petastorm.NoDataAvailableError:
                return None
        """,
        """
        import os
        # TODO(petastream): petastorm.make_reader is not provided by petastream.compat; materialize the data with make_spark_converter(df) and read it with converter.make_torch_dataloader()/make_tf_dataset(), or write it as MDS and read it with petastream.open(url)
        # TODO(petastream): petastorm.TransformSpec stays on Petastorm: this file also uses petastorm.make_reader, which petastream.compat does not provide, and moving TransformSpec without its reader would make this file need petastream as well as petastorm; migrate the reader and what reads it together: for a Spark DataFrame use make_spark_converter(df) with converter.make_torch_dataloader()/make_tf_dataset(); for MDS data use petastream.open(url); until then this file keeps petastorm (and so does the project's dependency list)
        from petastorm import make_reader, TransformSpec

        def load(url):
            import petastorm
            try:
                # TODO(petastream): petastorm.make_batch_reader is not provided by petastream.compat; for Parquet data use make_spark_converter(spark.read.parquet(url)) and converter.make_torch_dataloader()/make_tf_dataset(); petastream.compat.make_batch_reader reads only what a converter materialized (converter.file_urls); read other MDS data with petastream.open(url)
                return petastorm.make_batch_reader(url)
            # TODO(petastream): petastorm.NoDataAvailableError is not provided by petastream.compat; catch petastream.PetastreamError instead (or drop the handler)
            except petastorm.NoDataAvailableError:
                return None
        """,
        ["unsupported-import", "kept-with-petastorm-reader", "unsupported-use", "unsupported-use"],
        todo=True,
    )
    assert [i.line for i in result.items] == [2, 2, 7, 8]


def test_todo_comment_on_the_first_line_and_above_a_decorator() -> None:
    assert_migrates(
        """
        # header comment
        from petastorm import make_reader
        from unittest import mock


        class TestIt:
            @mock.patch("petastorm.make_reader")
            def test(self, fake): ...
        """,
        """
        # header comment
        # TODO(petastream): petastorm.make_reader is not provided by petastream.compat; materialize the data with make_spark_converter(df) and read it with converter.make_torch_dataloader()/make_tf_dataset(), or write it as MDS and read it with petastream.open(url)
        from petastorm import make_reader
        from unittest import mock


        class TestIt:
            # TODO(petastream): patch target 'petastorm.make_reader': petastorm.make_reader is not provided by petastream.compat; materialize the data with make_spark_converter(df) and read it with converter.make_torch_dataloader()/make_tf_dataset(), or write it as MDS and read it with petastream.open(url)
            @mock.patch("petastorm.make_reader")
            def test(self, fake): ...
        """,
        ["unsupported-import", "unsupported-patch-target"],
        todo=True,
    )


def test_without_the_flag_no_comment_is_added() -> None:
    source = "from petastorm import make_reader\n"
    assert migrate(source).code == source


def test_todo_comment_already_present_is_not_added_again() -> None:
    marked = migrate("from petastorm import make_reader\n", todo=True).code
    assert marked.count("# TODO(petastream)") == 1
    assert migrate(marked, todo=True).code == marked
    # the item is still reported: the work is not done yet
    assert [i.code for i in migrate(marked).items] == ["unsupported-import"]


def test_items_are_in_line_order_with_columns() -> None:
    result = migrate(
        dedent(
            """
            from petastorm import (
                make_reader,
                make_batch_reader,
            )
            """
        )
    )
    assert [(i.line, i.column) for i in result.items] == [(2, 4), (3, 4)]
