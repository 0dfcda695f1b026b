"""The whole-file decision (reader + loader move together or stay), cache-layout uses, custom
collate_fn and one piece of advice per Petastorm object, as before/after pairs."""

from __future__ import annotations

import pytest

from petastream.migrate import mapping
from petastream.migrate.mapping import suggestion_for

from .conftest import assert_migrates, assert_unchanged, migrate


def test_loader_fed_by_a_petastorm_reader_stays_with_it() -> None:
    # The idiom of every public file that used a petastorm.pytorch loader: reader, its
    # TransformSpec and its loader are one pipeline, which stays whole (issue #29 item 11: the
    # TransformSpec used to move alone, and the file needed both libraries).
    source = """
        from petastorm import make_reader, TransformSpec
        from petastorm.pytorch import DataLoader


        def peta_loader(data_url, schema_fields, batch_size):
            reader = make_reader(data_url, schema_fields=schema_fields, transform_spec=TransformSpec(fn))
            return DataLoader(reader, batch_size=batch_size)
        """
    result = assert_unchanged(
        source, ["unsupported-import", "kept-with-petastorm-reader", "kept-with-petastorm-reader"]
    )
    spec, kept = result.items[1:]
    assert kept.message == (
        "petastorm.pytorch.DataLoader stays on Petastorm: its read pipeline uses "
        "petastorm.make_reader, which petastream.compat does not provide, and "
        "petastream.compat's loaders read only petastream readers"
    )
    assert spec.message.startswith(
        "petastorm.TransformSpec stays on Petastorm: its read pipeline uses petastorm.make_reader"
    )
    assert kept.keeps_petastorm and kept.uses == ("7",)
    assert "make_spark_converter(df)" in kept.suggestion


def test_reader_module_path_and_context_manager_form() -> None:
    source = """
        from contextlib import contextmanager
        from petastorm.reader import make_reader
        from petastorm.pytorch import DataLoader

        @contextmanager
        def get_dataloader(path, batch_size, reader_pool_type, workers_count=5):
            with make_reader(path, reader_pool_type=reader_pool_type, workers_count=workers_count, num_epochs=1) as reader:
                yield DataLoader(reader, batch_size=batch_size)
        """
    assert_migrates(source, source, ["unsupported-import", "kept-with-petastorm-reader"])


def test_module_attribute_forms_keep_the_pipeline_too() -> None:
    assert_migrates(
        """
        import petastorm
        import petastorm.pytorch as pt

        with pt.BatchedDataLoader(petastorm.make_batch_reader(url), batch_size=64) as loader:
            for batch in loader:
                pass
        spec = petastorm.TransformSpec(fn)
        """,
        """
        import petastorm
        import petastorm.pytorch as pt

        with pt.BatchedDataLoader(petastorm.make_batch_reader(url), batch_size=64) as loader:
            for batch in loader:
                pass
        spec = petastorm.TransformSpec(fn)
        """,
        # the spec goes nowhere the file shows: it stays with the file's Petastorm reader
        ["kept-with-petastorm-reader", "unsupported-use", "kept-with-petastorm-reader"],
    )


def test_reader_on_a_converters_files_moves_with_its_loader() -> None:
    # make_batch_reader(converter.file_urls) reads MDS after the migration: compat's reader
    # takes it, so reader and loader move together and nothing is left on Petastorm.
    assert_migrates(
        """
        from petastorm import make_batch_reader
        from petastorm.pytorch import BatchedDataLoader
        from petastorm.spark import make_spark_converter

        converter = make_spark_converter(df)
        with make_batch_reader(converter.file_urls, num_epochs=1) as reader:
            loader = BatchedDataLoader(reader, batch_size=32)
        """,
        """
        from petastream.compat import make_batch_reader, make_spark_converter
        from petastream.compat.pytorch import BatchedDataLoader

        converter = make_spark_converter(df)
        with make_batch_reader(converter.file_urls, num_epochs=1) as reader:
            loader = BatchedDataLoader(reader, batch_size=32)
        """,
    )


def test_a_reader_on_other_data_keeps_the_whole_pipeline() -> None:
    source = """
        from petastorm import make_batch_reader
        from petastorm.pytorch import BatchedDataLoader

        train = BatchedDataLoader(make_batch_reader(converter.file_urls), batch_size=32)
        test = BatchedDataLoader(make_batch_reader("file:///data/test.parquet"), batch_size=32)
        """
    assert_migrates(source, source, ["unsupported-import", "kept-with-petastorm-reader"])


def test_a_loader_only_handed_to_a_converter_moves_beside_a_petastorm_reader() -> None:
    assert_migrates(
        """
        import functools
        from petastorm import make_reader
        from petastorm.pytorch import BatchedDataLoader, DataLoader
        from petastorm.spark import make_spark_converter

        peek = make_reader(url)
        with make_spark_converter(df).make_torch_dataloader(data_loader_fn=BatchedDataLoader) as a:
            pass
        fn = functools.partial(DataLoader, shuffling_queue_capacity=64)
        with make_spark_converter(df).make_torch_dataloader(data_loader_fn=fn) as b:
            pass
        """,
        """
        import functools
        from petastorm import make_reader
        from petastorm.pytorch import DataLoader
        from petastream.compat import make_spark_converter
        from petastream.compat.pytorch import BatchedDataLoader

        peek = make_reader(url)
        with make_spark_converter(df).make_torch_dataloader(data_loader_fn=BatchedDataLoader) as a:
            pass
        fn = functools.partial(DataLoader, shuffling_queue_capacity=64)
        with make_spark_converter(df).make_torch_dataloader(data_loader_fn=fn) as b:
            pass
        """,
        # partial(...) is bound to a name first: not provably converter-fed, so it stays
        ["unsupported-import", "kept-with-petastorm-reader"],
    )


def test_converter_reader_stays_beside_petastorm_tf_utils() -> None:
    source = """
        from petastorm.spark.spark_dataset_converter import make_batch_reader
        from petastorm.tf_utils import make_petastorm_dataset

        with make_batch_reader(urls) as reader:
            dataset = make_petastorm_dataset(reader)
        """
    result = assert_migrates(source, source, ["kept-with-petastorm-reader", "unsupported-import"])
    assert "Petastorm's loaders and tf_utils cannot read" in result.items[0].message


def test_patch_targets_follow_the_pipeline_decision() -> None:
    source = """
        from unittest import mock
        from petastorm import make_reader
        from petastorm.pytorch import DataLoader

        @mock.patch("petastorm.pytorch.DataLoader")
        def test_it(fake):
            DataLoader(make_reader(url))
        """
    result = assert_migrates(
        source,
        source,
        ["unsupported-import", "kept-with-petastorm-reader", "unsupported-patch-target"],
    )
    assert "'petastorm.pytorch.DataLoader': petastorm.pytorch.DataLoader stays on Petastorm" in result.items[2].message


def test_star_import_of_a_kept_loader_module_stays() -> None:
    source = "from petastorm.pytorch import *\nfrom petastorm import make_reader\nDataLoader(make_reader(u))\n"
    result = assert_migrates(source, source, ["kept-with-petastorm-reader", "unsupported-import"])
    assert result.items[0].message.startswith("from petastorm.pytorch import * stays on Petastorm")


# -- a pipeline (reader, TransformSpec, loader, collate) moves or stays as one ------------------


def test_mnist_example_pipeline_stays_whole() -> None:
    # Petastorm's examples/mnist/pytorch_example.py: the spec is bound to a name and handed to
    # make_reader inside the loader call. Nothing moves; before, TransformSpec did, alone.
    result = assert_unchanged(
        """
        from petastorm import make_reader, TransformSpec
        from petastorm.pytorch import DataLoader


        def main(url, transform_row):
            transform = TransformSpec(transform_row, removed_fields=['idx'])
            with DataLoader(make_reader(url, transform_spec=transform), batch_size=64) as loader:
                return list(loader)
        """,
        ["unsupported-import", "kept-with-petastorm-reader", "kept-with-petastorm-reader"],
    )
    assert all("its read pipeline uses petastorm.make_reader" in i.message for i in result.items[1:])


def test_collate_stays_with_its_petastorm_loader() -> None:
    # compat's decimal_friendly_collate is not Petastorm's: it used to move under a loader
    # that stays
    result = assert_unchanged(
        """
        from petastorm import make_batch_reader
        from petastorm.pytorch import DataLoader, decimal_friendly_collate

        reader = make_batch_reader("file:///data/train.parquet")
        loader = DataLoader(reader, batch_size=64, collate_fn=decimal_friendly_collate)
        """,
        ["unsupported-import", "kept-with-petastorm-reader", "kept-with-petastorm-reader"],
    )
    assert result.items[2].message.startswith(
        "petastorm.pytorch.decimal_friendly_collate stays on Petastorm: its read pipeline uses "
        "petastorm.make_batch_reader"
    )


def test_two_pipelines_in_one_file_are_decided_apart() -> None:
    assert_migrates(
        """
        from petastorm import make_batch_reader, make_reader
        from petastorm.pytorch import BatchedDataLoader, DataLoader, decimal_friendly_collate


        def train_loader(converter):
            return BatchedDataLoader(make_batch_reader(converter.file_urls), batch_size=64)


        def eval_loader(url):
            reader = make_reader(url)
            return DataLoader(reader, collate_fn=decimal_friendly_collate)
        """,
        """
        from petastorm import make_reader
        from petastorm.pytorch import DataLoader, decimal_friendly_collate
        from petastream.compat import make_batch_reader
        from petastream.compat.pytorch import BatchedDataLoader


        def train_loader(converter):
            return BatchedDataLoader(make_batch_reader(converter.file_urls), batch_size=64)


        def eval_loader(url):
            reader = make_reader(url)
            return DataLoader(reader, collate_fn=decimal_friendly_collate)
        """,
        ["unsupported-import", "kept-with-petastorm-reader", "kept-with-petastorm-reader"],
    )


def test_a_spec_for_a_converter_and_a_petastorm_reader_moves() -> None:
    # compat's converter needs compat's TransformSpec; Petastorm's reader reads it too (it uses
    # only func, edit_fields, removed_fields and selected_fields)
    assert_migrates(
        """
        from petastorm import make_reader, TransformSpec

        spec = TransformSpec(fn, removed_fields=["idx"])
        peek = make_reader(url, transform_spec=spec)
        loader = converter.make_torch_dataloader(transform_spec=spec)
        """,
        """
        from petastorm import make_reader
        from petastream.compat import TransformSpec

        spec = TransformSpec(fn, removed_fields=["idx"])
        peek = make_reader(url, transform_spec=spec)
        loader = converter.make_torch_dataloader(transform_spec=spec)
        """,
        ["unsupported-import"],
    )


def test_a_reader_compat_takes_over_moves_its_whole_pipeline(monkeypatch: pytest.MonkeyPatch) -> None:
    # What compat reads is declared in one place: the day compat reads Parquet with
    # make_reader, flipping it there moves reader, spec, loader and collate together.
    monkeypatch.setitem(
        mapping.COMPAT_READERS,
        "petastorm.make_reader",
        mapping.CompatReader("petastream.compat.make_reader", mapping.ANY_DATASET),
    )
    assert_migrates(
        """
        from petastorm import make_reader, TransformSpec
        from petastorm.pytorch import DataLoader, decimal_friendly_collate

        spec = TransformSpec(fn)
        with DataLoader(make_reader(url, transform_spec=spec), collate_fn=decimal_friendly_collate) as loader:
            pass
        """,
        """
        from petastream.compat import make_reader, TransformSpec
        from petastream.compat.pytorch import DataLoader, decimal_friendly_collate

        spec = TransformSpec(fn)
        with DataLoader(make_reader(url, transform_spec=spec), collate_fn=decimal_friendly_collate) as loader:
            pass
        """,
    )


# -- custom collate_fn --------------------------------------------------------------------------


def test_custom_collate_fn_is_kept_with_a_note() -> None:
    result = assert_migrates(
        """
        import functools
        from petastorm.pytorch import DataLoader
        from petastorm.spark import make_spark_converter

        def my_collate(rows):
            return rows

        loader = DataLoader(reader, batch_size=8, collate_fn=my_collate)
        other = DataLoader(reader, 8, my_collate)
        with make_spark_converter(df).make_torch_dataloader(
            data_loader_fn=functools.partial(DataLoader, collate_fn=my_collate)
        ) as third:
            pass
        """,
        """
        import functools
        from petastream.compat import make_spark_converter
        from petastream.compat.pytorch import DataLoader

        def my_collate(rows):
            return rows

        loader = DataLoader(reader, batch_size=8, collate_fn=my_collate)
        other = DataLoader(reader, 8, my_collate)
        with make_spark_converter(df).make_torch_dataloader(
            data_loader_fn=functools.partial(DataLoader, collate_fn=my_collate)
        ) as third:
            pass
        """,
        ["loader-reader-unchecked", "custom-collate-fn", "loader-reader-unchecked", "custom-collate-fn", "custom-collate-fn"],
    )
    note = result.items[1]
    assert (note.severity, note.line, note.keeps_petastorm) == ("info", 8, False)
    assert "per batch on a list of rows, as Petastorm does" in note.message
    assert "BatchedDataLoader" in note.suggestion and "TransformSpec" in note.suggestion


def test_default_collate_needs_no_note() -> None:
    assert_migrates(
        "from petastorm.pytorch import DataLoader\nDataLoader(reader, batch_size=8)\n",
        "from petastream.compat.pytorch import DataLoader\nDataLoader(reader, batch_size=8)\n",
        ["loader-reader-unchecked"],
    )


def test_a_moved_loader_fed_from_outside_the_file_gets_a_note() -> None:
    result = assert_migrates(
        """
        from petastorm.pytorch import DataLoader
        from petastorm.spark.spark_dataset_converter import make_batch_reader

        def loader_for(reader, urls):
            with make_batch_reader(urls) as local:
                inside = DataLoader(local)
            direct = DataLoader(make_batch_reader(urls))
            return DataLoader(reader, batch_size=8), inside, direct
        """,
        """
        from petastream.compat.pytorch import DataLoader
        from petastream.compat.spark_dataset_converter import make_batch_reader

        def loader_for(reader, urls):
            with make_batch_reader(urls) as local:
                inside = DataLoader(local)
            direct = DataLoader(make_batch_reader(urls))
            return DataLoader(reader, batch_size=8), inside, direct
        """,
        ["loader-reader-unchecked"],
    )
    note = result.items[0]
    assert (note.line, note.severity) == (8, "info")
    assert note.message == (
        "DataLoader now comes from petastream.compat and needs a petastream reader; this one is "
        "made outside this file"
    )


# -- Petastorm's cache layout -------------------------------------------------------------------


def test_reads_of_the_cache_as_parquet_are_flagged_and_still_migrated() -> None:
    result = assert_migrates(
        """
        import glob
        from pathlib import Path
        import pyarrow.parquet as pq
        from petastorm.spark import SparkDatasetConverter, make_spark_converter

        converter = make_spark_converter(df)
        cache_url = converter.cache_dir_url
        files = glob.glob(cache_url.replace("file://", "") + "/*.parquet")
        again = spark.read.parquet(converter.cache_dir_url)
        table = pq.ParquetDataset(converter.file_urls)


        class Module:
            def setup(self):
                self.cache_dir = spark.conf.get(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF)

            def count(self):
                return len(list(Path(self.cache_dir).glob("**/*.parquet")))

        dbutils.fs.rm(converter.cache_dir_url, True)
        print(converter.cache_dir_url, len(converter.file_urls))
        """,
        """
        import glob
        from pathlib import Path
        import pyarrow.parquet as pq
        from petastream.compat import SparkDatasetConverter, make_spark_converter

        converter = make_spark_converter(df)
        cache_url = converter.cache_dir_url
        files = glob.glob(cache_url.replace("file://", "") + "/*.parquet")
        again = spark.read.parquet(converter.cache_dir_url)
        table = pq.ParquetDataset(converter.file_urls)


        class Module:
            def setup(self):
                self.cache_dir = spark.conf.get(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF)

            def count(self):
                return len(list(Path(self.cache_dir).glob("**/*.parquet")))

        dbutils.fs.rm(converter.cache_dir_url, True)
        print(converter.cache_dir_url, len(converter.file_urls))
        """,
        ["cache-layout"] * 4,
    )
    assert [i.line for i in result.items] == [8, 9, 10, 18]
    assert result.items[0].message == (
        "glob.glob(...) lists the converter's cache files, but the cache holds MDS shards now "
        "(index.json + .mds files)"
    )
    assert result.items[1].message.startswith("spark.read.parquet(...) reads the converter's cache as Parquet")
    assert "converter.file_urls" in result.items[0].suggestion
    assert "petastream.open(converter.cache_dir_url)" in result.items[0].suggestion
    assert not any(i.keeps_petastorm for i in result.items)


def test_converter_use_without_cache_reads_is_not_flagged() -> None:
    assert_migrates(
        "from petastorm.spark import make_spark_converter\nc = make_spark_converter(df)\n"
        "urls = c.file_urls\nspark.read.parquet('/data/train')\n",
        "from petastream.compat import make_spark_converter\nc = make_spark_converter(df)\n"
        "urls = c.file_urls\nspark.read.parquet('/data/train')\n",
    )


# -- one piece of advice per object ----------------------------------------------------------------

ALIASES = [
    ("petastorm.reader.make_reader", "petastorm.make_reader"),
    ("petastorm.reader.make_batch_reader", "petastorm.make_batch_reader"),
    ("petastorm.errors.NoDataAvailableError", "petastorm.NoDataAvailableError"),
]


@pytest.mark.parametrize(("module_path", "top_level"), ALIASES)
def test_same_api_same_advice_whatever_the_import_path(module_path: str, top_level: str) -> None:
    assert suggestion_for(module_path) == suggestion_for(top_level)
    module, _, name = module_path.rpartition(".")
    a = migrate(f"from {module} import {name}\n").items[0]
    b = migrate(f"from {top_level.rpartition('.')[0]} import {name}\n").items[0]
    assert a.suggestion == b.suggestion


def test_todo_marks_manual_items_not_notes() -> None:
    result = migrate(
        "from petastorm.pytorch import DataLoader\nDataLoader(reader, collate_fn=f)\n", todo=True
    )
    assert "# TODO" not in result.code
    assert [i.severity for i in result.items] == ["info", "info"]


def test_converter_context_managers_built_by_hand_follow_the_files_they_read() -> None:
    """Seen in public code: TorchDatasetContextManager handed a Delta table's Parquet files.
    compat's reads only a converter's MDS files: converter.file_urls moves silently, literal
    URLs (Parquet) stay on Petastorm, anything else moves with a note."""
    assert_migrates(
        """
        from petastorm.spark.spark_dataset_converter import TorchDatasetContextManager
        cm = TorchDatasetContextManager(converter.file_urls, 32, {}, 0, None)
        """,
        """
        from petastream.compat.spark_dataset_converter import TorchDatasetContextManager
        cm = TorchDatasetContextManager(converter.file_urls, 32, {}, 0, None)
        """,
        [],
    )
    source = """
        from petastorm.spark.spark_dataset_converter import TFDatasetContextManager
        ds = TFDatasetContextManager(parquet_file_url_list=["file:///data/part-0.parquet"],
                                     batch_size=32, prefetch=None, petastorm_reader_kwargs={},
                                     shuffling_queue_capacity=None)
        """
    kept = assert_migrates(source, source, ["unsupported-use"])
    assert kept.items[0].keeps_petastorm and "reads as Parquet" in kept.items[0].message
    noted = assert_migrates(
        """
        from petastorm.spark.spark_dataset_converter import TorchDatasetContextManager

        def data_loader(parquet_files, batch_size, reader_kwargs):
            return TorchDatasetContextManager(parquet_files, batch_size, reader_kwargs, 0, None)
        """,
        """
        from petastream.compat.spark_dataset_converter import TorchDatasetContextManager

        def data_loader(parquet_files, batch_size, reader_kwargs):
            return TorchDatasetContextManager(parquet_files, batch_size, reader_kwargs, 0, None)
        """,
        ["files-unchecked"],
    )
    assert (noted.items[0].severity, noted.items[0].line, noted.items[0].keeps_petastorm) == ("info", 4, False)
