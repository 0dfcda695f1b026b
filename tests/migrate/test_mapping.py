"""The Petastorm -> petastream.compat table, and its agreement with the compat modules."""

from __future__ import annotations

import pytest

from petastream.migrate.mapping import (
    _MODULES,
    COMPAT_READERS,
    PETASTORM_MODULES,
    READERS,
    Resolved,
    Unsupported,
    resolve,
)

from .importable import exists


@pytest.mark.parametrize(
    ("path", "new", "consumed"),
    [
        ("petastorm.spark", "petastream.compat", 2),
        ("petastorm.spark.make_spark_converter", "petastream.compat.make_spark_converter", 3),
        ("petastorm.spark.SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF", "petastream.compat.SparkDatasetConverter", 3),
        ("petastorm.spark.spark_dataset_converter", "petastream.compat.spark_dataset_converter", 3),
        (
            "petastorm.spark.spark_dataset_converter.make_batch_reader",
            "petastream.compat.spark_dataset_converter.make_batch_reader",
            4,
        ),
        ("petastorm.pytorch.decimal_friendly_collate", "petastream.compat.pytorch.decimal_friendly_collate", 3),
        ("petastorm.TransformSpec", "petastream.compat.TransformSpec", 2),
        ("petastorm.transform", "petastream.compat.transform", 2),
        ("petastorm.transform.edit_field", "petastream.compat.edit_field", 3),
        # issue 34: the modules Petastorm's users and examples import besides the reader API
        ("petastorm.fs_utils.FilesystemResolver", "petastream.compat.fs_utils.FilesystemResolver", 3),
        ("petastorm.fs_utils", "petastream.compat.fs_utils", 2),
        ("petastorm.spark_utils.dataset_as_rdd", "petastream.compat.spark_utils.dataset_as_rdd", 3),
        ("petastorm.test_util", "petastream.compat.test_util", 2),
        ("petastorm.test_util.reader_mock.ReaderMock", "petastream.compat.test_util.reader_mock.ReaderMock", 4),
        (
            "petastorm.test_util.shuffling_analysis.compute_correlation_distribution",
            "petastream.compat.test_util.shuffling_analysis.compute_correlation_distribution",
            4,
        ),
        # issue 27: the reader API, module for module
        ("petastorm.make_reader", "petastream.compat.make_reader", 2),
        ("petastorm.make_batch_reader", "petastream.compat.make_batch_reader", 2),
        ("petastorm.reader", "petastream.compat.reader", 2),
        ("petastorm.reader.make_reader", "petastream.compat.reader.make_reader", 3),
        ("petastorm.reader.Reader", "petastream.compat.reader.Reader", 3),
        ("petastorm.unischema.Unischema.as_spark_schema", "petastream.compat.unischema.Unischema", 3),
        ("petastorm.codecs.CompressedImageCodec", "petastream.compat.codecs.CompressedImageCodec", 3),
        ("petastorm.predicates.in_lambda", "petastream.compat.predicates.in_lambda", 3),
        ("petastorm.selectors.SingleIndexSelector", "petastream.compat.selectors.SingleIndexSelector", 3),
        ("petastorm.utils.decode_row", "petastream.compat.utils.decode_row", 3),
        ("petastorm.etl.RowGroupIndexerBase", "petastream.compat.etl.RowGroupIndexerBase", 3),
        (
            "petastorm.etl.dataset_metadata.materialize_dataset",
            "petastream.compat.etl.dataset_metadata.materialize_dataset",
            4,
        ),
        (
            "petastorm.etl.rowgroup_indexers.SingleFieldIndexer",
            "petastream.compat.etl.rowgroup_indexers.SingleFieldIndexer",
            4,
        ),
        (
            "petastorm.etl.rowgroup_indexing.build_rowgroup_index",
            "petastream.compat.etl.rowgroup_indexing.build_rowgroup_index",
            4,
        ),
        ("petastorm.tf_utils.make_petastorm_dataset", "petastream.compat.tf_utils.make_petastorm_dataset", 3),
        ("petastorm.ngram.NGram", "petastream.compat.ngram.NGram", 3),
        (
            "petastorm.weighted_sampling_reader.WeightedSamplingReader",
            "petastream.compat.weighted_sampling_reader.WeightedSamplingReader",
            3,
        ),
    ],
)
def test_resolved(path: str, new: str, consumed: int) -> None:
    result = resolve(path)
    assert isinstance(result, Resolved)
    assert (result.new, result.consumed) == (new, consumed)


@pytest.mark.parametrize(
    ("path", "reported", "hint"),
    [
        ("petastorm", "petastorm", "make_reader"),
        ("petastorm.NoDataAvailableError", "petastorm.NoDataAvailableError", "PetastreamError"),
        ("petastorm.spark.converter.parentCacheDirUrl", "petastorm.spark.converter", "by hand"),
        ("petastorm.spark.spark_dataset_converter._no_such_helper", "petastorm.spark.spark_dataset_converter._no_such_helper", "by hand"),
        ("petastorm.unknown.thing", "petastorm.unknown", "by hand"),
        # what compat does not mirror (docs/migrate-tool.md, "What stays on Petastorm")
        ("petastorm.reader.normalize_dataset_url_or_urls", "petastorm.reader.normalize_dataset_url_or_urls", "make_reader"),
        ("petastorm.workers_pool.thread_pool.ThreadPool", "petastorm.workers_pool.thread_pool.ThreadPool", "reader_pool_type"),
        ("petastorm.workers_pool.ventilator.ConcurrentVentilator", "petastorm.workers_pool.ventilator.ConcurrentVentilator", "reader_pool_type"),
        ("petastorm.reader_impl.shuffling_buffer.RandomShufflingBuffer", "petastorm.reader_impl.shuffling_buffer.RandomShufflingBuffer", "shuffling_queue_capacity"),
        ("petastorm.arrow_reader_worker.ArrowReaderWorker", "petastorm.arrow_reader_worker.ArrowReaderWorker", "make_batch_reader"),
        ("petastorm.cache.NullCache", "petastorm.cache.NullCache", "cache_type"),
        ("petastorm.local_disk_cache.LocalDiskCache", "petastorm.local_disk_cache.LocalDiskCache", "cache_type='local-disk'"),
        ("petastorm.hdfs.namenode.HdfsNamenodeResolver", "petastorm.hdfs.namenode.HdfsNamenodeResolver", "hdfs://"),
        ("petastorm.tools.copy_dataset.copy_dataset", "petastorm.tools.copy_dataset.copy_dataset", "materialize_dataset"),
        ("petastorm.tools.spark_session_cli.configure_spark", "petastorm.tools.spark_session_cli.configure_spark", "SparkSession"),
        (
            "petastorm.etl.petastorm_generate_metadata.generate_petastorm_metadata",
            "petastorm.etl.petastorm_generate_metadata.generate_petastorm_metadata",
            "materialize_dataset",
        ),
        ("petastorm.etl.legacy.restricted_loads", "petastorm.etl.legacy.restricted_loads", "get_schema_from_dataset_url"),
        ("petastorm.utils.add_to_dataset_metadata", "petastorm.utils.add_to_dataset_metadata", "write_metadata"),
        ("petastorm.utils.run_in_subprocess", "petastorm.utils.run_in_subprocess", "ProcessPoolExecutor"),
        ("petastorm.transform.transform_schema", "petastorm.transform.transform_schema", "TransformSpec, edit_field"),
        ("petastorm.pytorch.LoaderBase", "petastorm.pytorch.LoaderBase", "BatchedDataLoader"),
        ("petastorm.tf_utils.date_to_nsec_from_epoch", "petastorm.tf_utils.date_to_nsec_from_epoch", "tf_tensors"),
        ("petastorm.unischema._numpy_to_spark_mapping", "petastorm.unischema._numpy_to_spark_mapping", "UnischemaField"),
        ("petastorm.benchmark.throughput.reader_throughput", "petastorm.benchmark.throughput.reader_throughput", "time"),
    ],
)
def test_unsupported(path: str, reported: str, hint: str) -> None:
    result = resolve(path)
    assert isinstance(result, Unsupported)
    assert result.path == reported
    assert hint in result.suggestion


def test_non_petastorm_path_is_refused() -> None:
    with pytest.raises(ValueError, match="not a petastorm path"):
        resolve("petastream.compat")


def test_every_mirrored_module_is_a_petastorm_module() -> None:
    assert set(_MODULES) <= PETASTORM_MODULES


def test_every_pipeline_reader_is_declared() -> None:
    # COMPAT_READERS says what compat takes of each reader; an undeclared one would stay
    assert set(COMPAT_READERS) == READERS
    for reader in READERS:
        assert isinstance(resolve(reader), Resolved), reader


def _mapped() -> list[tuple[str, str]]:
    out = []
    for source, module in _MODULES.items():
        if module.target is not None:
            out.append((source, module.target))
        out += [(f"{source}.{name}", new) for name, new in module.names.items()]
    return out


@pytest.mark.parametrize(("source", "new"), _mapped(), ids=[m[0] for m in _mapped()])
def test_every_mapped_name_exists_in_compat(source: str, new: str) -> None:
    assert exists(new), f"{source} maps to missing {new}"


# Petastorm 0.13.1's public names in the modules compat mirrors (read from the installed
# release), and the ones compat does not provide (docs/migrate-tool.md).
PETASTORM_PUBLIC = {
    "petastorm": ("make_reader", "make_batch_reader", "TransformSpec", "NoDataAvailableError"),
    "petastorm.unischema": (
        "Unischema", "UnischemaField", "dict_to_spark_row", "insert_explicit_nulls", "match_unischema_fields",
    ),
    "petastorm.codecs": (
        "CompressedImageCodec", "CompressedNdarrayCodec", "DataframeColumnCodec", "NdarrayCodec", "ScalarCodec",
    ),
    "petastorm.predicates": (
        "PredicateBase", "in_intersection", "in_lambda", "in_negate", "in_pseudorandom_split", "in_reduce", "in_set",
    ),
    "petastorm.selectors": ("IntersectIndexSelector", "RowGroupSelectorBase", "SingleIndexSelector", "UnionIndexSelector"),
    "petastorm.utils": ("DecodeFieldError", "add_to_dataset_metadata", "decode_row", "run_in_subprocess"),
    "petastorm.etl": ("RowGroupIndexerBase",),
    "petastorm.etl.dataset_metadata": (
        "PetastormMetadataError", "PetastormMetadataGenerationError", "ROW_GROUPS_PER_FILE_KEY", "UNISCHEMA_KEY",
        "get_schema", "get_schema_from_dataset_url", "infer_or_load_unischema", "load_row_groups",
        "materialize_dataset",
    ),
    "petastorm.etl.rowgroup_indexers": ("FieldNotNullIndexer", "SingleFieldIndexer"),
    "petastorm.etl.rowgroup_indexing": (
        "PARALLEL_SLICE_NUM", "PieceInfo", "ROWGROUPS_INDEX_KEY", "build_rowgroup_index", "get_row_group_indexes",
    ),
    "petastorm.reader": (
        "LOCAL_DISK_CACHE", "NULL_CACHE", "Reader", "make_batch_reader", "make_reader", "normalize_dataset_url_or_urls",
    ),
    "petastorm.pytorch": ("BatchedDataLoader", "DataLoader", "InMemBatchedDataLoader", "LoaderBase", "decimal_friendly_collate"),
    "petastorm.tf_utils": (
        "RANDOM_SHUFFLING_QUEUE_SIZE", "date_to_nsec_from_epoch", "make_namedtuple_tf_ngram",
        "make_petastorm_dataset", "tf_tensors",
    ),
    "petastorm.transform": ("TransformSpec", "edit_field", "transform_schema"),
    "petastorm.ngram": ("NGram",),
    "petastorm.weighted_sampling_reader": ("WeightedSamplingReader",),
    "petastorm.fs_utils": ("FilesystemResolver", "get_dataset_path", "get_filesystem_and_path_or_paths",
                           "normalize_dir_url"),
    "petastorm.spark_utils": ("dataset_as_rdd",),
    "petastorm.test_util.reader_mock": ("ReaderMock", "schema_data_generator_example"),
    "petastorm.test_util.shuffling_analysis": ("compute_correlation_distribution",
                                               "generate_shuffle_analysis_dataset"),
}
NOT_MIRRORED = {
    "petastorm.NoDataAvailableError",
    "petastorm.utils.add_to_dataset_metadata",
    "petastorm.utils.run_in_subprocess",
    "petastorm.reader.LOCAL_DISK_CACHE",
    "petastorm.reader.NULL_CACHE",
    "petastorm.reader.normalize_dataset_url_or_urls",
    "petastorm.pytorch.LoaderBase",
    "petastorm.tf_utils.date_to_nsec_from_epoch",
    "petastorm.tf_utils.make_namedtuple_tf_ngram",
    "petastorm.transform.transform_schema",
}


@pytest.mark.parametrize("module", sorted(PETASTORM_PUBLIC))
def test_every_public_name_moves_unless_listed(module: str) -> None:
    for name in PETASTORM_PUBLIC[module]:
        path = f"{module}.{name}"
        expected = Unsupported if path in NOT_MIRRORED else Resolved
        assert isinstance(resolve(path), expected), path
