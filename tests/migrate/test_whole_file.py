"""The whole-file decision (reader + loader move together or stay), cache-layout uses, custom
collate_fn and one piece of advice per Petastorm object, as before/after pairs."""

from __future__ import annotations

import pytest

from petastream.migrate import mapping
from petastream.migrate.mapping import suggestion_for

from .conftest import assert_migrates, assert_unchanged, migrate


def test_reader_its_spec_and_its_loader_move_together() -> None:
    # The idiom of every public file that used a petastorm.pytorch loader (issue 27: compat's
    # make_reader reads any Parquet store, Unischema datasets included)
    assert_migrates(
        """
        from petastorm import make_reader, TransformSpec
        from petastorm.pytorch import DataLoader


        def peta_loader(data_url, schema_fields, batch_size):
            reader = make_reader(data_url, schema_fields=schema_fields, transform_spec=TransformSpec(fn))
            return DataLoader(reader, batch_size=batch_size)
        """,
        """
        from petastream.compat import make_reader, TransformSpec
        from petastream.compat.pytorch import DataLoader


        def peta_loader(data_url, schema_fields, batch_size):
            reader = make_reader(data_url, schema_fields=schema_fields, transform_spec=TransformSpec(fn))
            return DataLoader(reader, batch_size=batch_size)
        """,
    )


def test_reader_module_path_and_context_manager_form() -> None:
    assert_migrates(
        """
        from contextlib import contextmanager
        from petastorm.reader import make_reader
        from petastorm.pytorch import DataLoader

        @contextmanager
        def get_dataloader(path, batch_size, reader_pool_type, workers_count=5):
            with make_reader(path, reader_pool_type=reader_pool_type, workers_count=workers_count, num_epochs=1) as reader:
                yield DataLoader(reader, batch_size=batch_size)
        """,
        """
        from contextlib import contextmanager
        from petastream.compat.reader import make_reader
        from petastream.compat.pytorch import DataLoader

        @contextmanager
        def get_dataloader(path, batch_size, reader_pool_type, workers_count=5):
            with make_reader(path, reader_pool_type=reader_pool_type, workers_count=workers_count, num_epochs=1) as reader:
                yield DataLoader(reader, batch_size=batch_size)
        """,
    )


def test_module_attribute_forms_move_too() -> None:
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
        import petastream.compat
        import petastream.compat.pytorch as pt

        with pt.BatchedDataLoader(petastream.compat.make_batch_reader(url), batch_size=64) as loader:
            for batch in loader:
                pass
        spec = petastream.compat.TransformSpec(fn)
        """,
    )


def test_readers_on_any_data_move_with_their_loaders() -> None:
    # a converter's files (MDS after the migration), a Parquet store, a Unischema dataset
    assert_migrates(
        """
        from petastorm import make_batch_reader, make_reader
        from petastorm.pytorch import BatchedDataLoader, DataLoader
        from petastorm.spark import make_spark_converter

        converter = make_spark_converter(df)
        with make_batch_reader(converter.file_urls, num_epochs=1) as reader:
            train = BatchedDataLoader(reader, batch_size=32)
        test = BatchedDataLoader(make_batch_reader("s3://bucket/test.parquet"), batch_size=32)
        images = DataLoader(make_reader("hdfs:///datasets/imagenet", cache_type="local-disk",
                                        cache_location="/tmp/cache", cache_size_limit=10 ** 10,
                                        cache_row_size_estimate=1000), batch_size=32)
        """,
        """
        from petastream.compat import make_batch_reader, make_reader, make_spark_converter
        from petastream.compat.pytorch import BatchedDataLoader, DataLoader

        converter = make_spark_converter(df)
        with make_batch_reader(converter.file_urls, num_epochs=1) as reader:
            train = BatchedDataLoader(reader, batch_size=32)
        test = BatchedDataLoader(make_batch_reader("s3://bucket/test.parquet"), batch_size=32)
        images = DataLoader(make_reader("hdfs:///datasets/imagenet", cache_type="local-disk",
                                        cache_location="/tmp/cache", cache_size_limit=10 ** 10,
                                        cache_row_size_estimate=1000), batch_size=32)
        """,
    )


def test_tf_utils_move_with_their_reader() -> None:
    assert_migrates(
        """
        from petastorm import make_batch_reader
        from petastorm.spark.spark_dataset_converter import make_batch_reader as files_reader
        from petastorm.tf_utils import make_petastorm_dataset, tf_tensors

        with make_batch_reader(url, num_epochs=None, cur_shard=hvd.rank(), shard_count=hvd.size()) as reader:
            dataset = make_petastorm_dataset(reader).map(lambda x: (x.features, x.label))
        with files_reader(urls) as reader:
            tensors = tf_tensors(reader)
        """,
        """
        from petastream.compat import make_batch_reader
        from petastream.compat.spark_dataset_converter import make_batch_reader as files_reader
        from petastream.compat.tf_utils import make_petastorm_dataset, tf_tensors

        with make_batch_reader(url, num_epochs=None, cur_shard=hvd.rank(), shard_count=hvd.size()) as reader:
            dataset = make_petastorm_dataset(reader).map(lambda x: (x.features, x.label))
        with files_reader(urls) as reader:
            tensors = tf_tensors(reader)
        """,
    )


def test_reader_type_moves_where_it_is_only_named() -> None:
    # annotations and isinstance: compat keeps the name Reader for its readers
    assert_migrates(
        """
        from petastorm import make_reader
        from petastorm.reader import Reader
        from petastorm.weighted_sampling_reader import WeightedSamplingReader


        def mixed(a_url, b_url) -> Reader:
            readers = [make_reader(a_url), make_reader(b_url)]
            mix = WeightedSamplingReader(readers, [0.3, 0.7])
            assert isinstance(readers[0], Reader)
            return mix
        """,
        """
        from petastream.compat import make_reader
        from petastream.compat.reader import Reader
        from petastream.compat.weighted_sampling_reader import WeightedSamplingReader


        def mixed(a_url, b_url) -> Reader:
            readers = [make_reader(a_url), make_reader(b_url)]
            mix = WeightedSamplingReader(readers, [0.3, 0.7])
            assert isinstance(readers[0], Reader)
            return mix
        """,
    )


# -- a reader compat does not take keeps its pipeline on Petastorm ------------------------------
# Today that is Petastorm's Reader built by hand (its internal constructor): a pipeline moves as
# one or stays as one (reader, TransformSpec, loader, collate, TF helpers, WeightedSamplingReader).


def test_loader_fed_by_a_hand_built_reader_stays_with_it() -> None:
    source = """
        from petastorm import TransformSpec
        from petastorm.pytorch import DataLoader
        from petastorm.reader import Reader


        def peta_loader(filesystem, path, batch_size):
            reader = Reader(filesystem, path, worker_class=MyWorker, transform_spec=TransformSpec(fn))
            return DataLoader(reader, batch_size=batch_size)
        """
    result = assert_unchanged(
        source, ["kept-with-petastorm-reader", "kept-with-petastorm-reader", "unsupported-use"]
    )
    spec, kept, reader = result.items
    assert kept.message == (
        "petastorm.pytorch.DataLoader stays on Petastorm: its read pipeline uses "
        "petastorm.reader.Reader, which stays on Petastorm, and petastream.compat's loaders "
        "and tf_utils read only petastream readers"
    )
    assert spec.message.startswith(
        "petastorm.TransformSpec stays on Petastorm: its read pipeline uses petastorm.reader.Reader"
    )
    assert reader.message.startswith("petastorm.reader.Reader is called in this file: its constructor")
    assert "make_reader(url, ...)" in reader.suggestion
    assert kept.keeps_petastorm and reader.keeps_petastorm and kept.uses == ("8",)
    assert kept.suggestion.startswith("migrate petastorm.reader.Reader first")


def test_a_loader_only_handed_to_a_converter_moves_beside_a_petastorm_reader() -> None:
    assert_migrates(
        """
        import functools
        from petastorm.pytorch import BatchedDataLoader, DataLoader
        from petastorm.reader import Reader
        from petastorm.spark import make_spark_converter

        peek = Reader(filesystem, path)
        with make_spark_converter(df).make_torch_dataloader(data_loader_fn=BatchedDataLoader) as a:
            pass
        fn = functools.partial(DataLoader, shuffling_queue_capacity=64)
        with make_spark_converter(df).make_torch_dataloader(data_loader_fn=fn) as b:
            pass
        """,
        """
        import functools
        from petastorm.pytorch import DataLoader
        from petastorm.reader import Reader
        from petastream.compat import make_spark_converter
        from petastream.compat.pytorch import BatchedDataLoader

        peek = Reader(filesystem, path)
        with make_spark_converter(df).make_torch_dataloader(data_loader_fn=BatchedDataLoader) as a:
            pass
        fn = functools.partial(DataLoader, shuffling_queue_capacity=64)
        with make_spark_converter(df).make_torch_dataloader(data_loader_fn=fn) as b:
            pass
        """,
        # partial(...) is bound to a name first: not provably converter-fed, so it stays
        ["kept-with-petastorm-reader", "unsupported-use"],
    )


def test_patch_targets_follow_the_pipeline_decision() -> None:
    source = """
        from unittest import mock
        from petastorm.pytorch import DataLoader
        from petastorm.reader import Reader

        @mock.patch("petastorm.pytorch.DataLoader")
        def test_it(fake):
            DataLoader(Reader(filesystem, path))
        """
    result = assert_migrates(
        source,
        source,
        ["kept-with-petastorm-reader", "unsupported-use", "unsupported-patch-target"],
    )
    assert "'petastorm.pytorch.DataLoader': petastorm.pytorch.DataLoader stays on Petastorm" in result.items[2].message


def test_star_import_of_a_kept_loader_module_stays() -> None:
    source = "from petastorm.pytorch import *\nfrom petastorm.reader import Reader\nDataLoader(Reader(fs, p))\n"
    result = assert_migrates(source, source, ["kept-with-petastorm-reader", "unsupported-use"])
    assert result.items[0].message.startswith("from petastorm.pytorch import * stays on Petastorm")


def test_collate_stays_with_its_petastorm_loader() -> None:
    # compat's decimal_friendly_collate is not Petastorm's
    result = assert_unchanged(
        """
        from petastorm.pytorch import DataLoader, decimal_friendly_collate
        from petastorm.reader import Reader

        reader = Reader(filesystem, "/data/train")
        loader = DataLoader(reader, batch_size=64, collate_fn=decimal_friendly_collate)
        """,
        ["kept-with-petastorm-reader", "kept-with-petastorm-reader", "unsupported-use"],
    )
    assert result.items[1].message.startswith(
        "petastorm.pytorch.decimal_friendly_collate stays on Petastorm: its read pipeline uses "
        "petastorm.reader.Reader"
    )


def test_weighted_sampling_reader_joins_the_pipelines_it_mixes() -> None:
    source = """
        from petastorm import make_reader
        from petastorm.pytorch import DataLoader
        from petastorm.reader import Reader
        from petastorm.weighted_sampling_reader import WeightedSamplingReader

        hand_built = Reader(filesystem, path, worker_class=MyWorker)
        mixed = WeightedSamplingReader([make_reader(url), hand_built], [0.5, 0.5])
        with DataLoader(mixed, batch_size=8) as loader:
            pass
        """
    result = assert_unchanged(source, ["kept-with-petastorm-reader"] * 2 + ["unsupported-use", "kept-with-petastorm-reader"])
    assert "WeightedSamplingReader cannot read" in result.items[0].message


def test_two_pipelines_in_one_file_are_decided_apart() -> None:
    assert_migrates(
        """
        from petastorm import make_batch_reader
        from petastorm.pytorch import BatchedDataLoader, DataLoader, decimal_friendly_collate
        from petastorm.reader import Reader


        def train_loader(url):
            return BatchedDataLoader(make_batch_reader(url), batch_size=64)


        def eval_loader(filesystem, path):
            reader = Reader(filesystem, path)
            return DataLoader(reader, collate_fn=decimal_friendly_collate)
        """,
        """
        from petastorm.pytorch import DataLoader, decimal_friendly_collate
        from petastorm.reader import Reader
        from petastream.compat import make_batch_reader
        from petastream.compat.pytorch import BatchedDataLoader


        def train_loader(url):
            return BatchedDataLoader(make_batch_reader(url), batch_size=64)


        def eval_loader(filesystem, path):
            reader = Reader(filesystem, path)
            return DataLoader(reader, collate_fn=decimal_friendly_collate)
        """,
        ["kept-with-petastorm-reader", "kept-with-petastorm-reader", "unsupported-use"],
    )


def test_a_spec_for_a_converter_and_a_petastorm_reader_moves() -> None:
    # compat's converter needs compat's TransformSpec; Petastorm's reader reads it too (it uses
    # only func, edit_fields, removed_fields and selected_fields)
    assert_migrates(
        """
        from petastorm import TransformSpec
        from petastorm.reader import Reader

        spec = TransformSpec(fn, removed_fields=["idx"])
        peek = Reader(filesystem, path, transform_spec=spec)
        loader = converter.make_torch_dataloader(transform_spec=spec)
        """,
        """
        from petastorm.reader import Reader
        from petastream.compat import TransformSpec

        spec = TransformSpec(fn, removed_fields=["idx"])
        peek = Reader(filesystem, path, transform_spec=spec)
        loader = converter.make_torch_dataloader(transform_spec=spec)
        """,
        ["unsupported-use"],
    )


def test_what_compat_takes_is_declared_in_one_place(monkeypatch: pytest.MonkeyPatch) -> None:
    # mapping.COMPAT_READERS decides: a reader it does not list stays, and its pipeline with it
    monkeypatch.delitem(mapping.COMPAT_READERS, "petastorm.make_reader")
    source = """
        from petastorm import make_reader, TransformSpec
        from petastorm.pytorch import DataLoader, decimal_friendly_collate

        spec = TransformSpec(fn)
        with DataLoader(make_reader(url, transform_spec=spec), collate_fn=decimal_friendly_collate) as loader:
            pass
        """
    result = assert_unchanged(source, ["unsupported-use"] + ["kept-with-petastorm-reader"] * 3)
    assert result.items[0].message == "petastorm.make_reader is not a reader petastream.compat takes over"


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
