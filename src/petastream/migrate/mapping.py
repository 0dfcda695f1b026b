"""What Petastorm names become, and what to suggest for the ones petastream.compat lacks.

:func:`resolve` is the one question every transform asks: given a dotted Petastorm path
(``petastorm.spark.make_spark_converter``, ``petastorm.unischema.Unischema``,
``petastorm.make_reader``), what is its ``petastream.compat`` equivalent, if any? Import
rewriting, attribute chains and ``mock.patch`` target strings all go through it, so they agree.

petastream.compat mirrors Petastorm's reader API module for module (``petastorm.X`` ->
``petastream.compat.X``: unischema, codecs, predicates, selectors, utils, etl and its
dataset_metadata, rowgroup_indexers and rowgroup_indexing, reader, pytorch, tf_utils,
transform, ngram, weighted_sampling_reader, fs_utils, spark_utils, test_util and its
reader_mock and shuffling_analysis), plus the converter (``petastorm.spark`` ->
``petastream.compat``, ``petastorm.spark.spark_dataset_converter``). ``petastorm`` itself maps
name by name (``make_reader``, ``make_batch_reader``, ``TransformSpec``). Each mirrored
module maps the public names its compat module provides; everything else under ``petastorm``
(Reader internals, worker pools, caches, HDFS helpers, tools, the metadata
regeneration script, ...) comes back as :class:`Unsupported`, with a concrete suggestion
(:mod:`petastream.migrate.advice`). docs/migrate-tool.md lists the decisions module by module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from petastream.errors import InvalidArgumentError

from .advice import SUGGESTIONS

__all__ = [
    "Resolved",
    "Unsupported",
    "resolve",
    "is_petastorm_path",
    "canonical",
    "suggestion_for",
    "PETASTORM_MODULES",
    "READERS",
    "LOADERS",
    "READER_CONSUMERS",
    "TRANSFORMS",
    "COLLATES",
    "PIPELINE",
    "EVERY_CALL",
    "NAME_ONLY",
    "COMPAT_READERS",
    "CACHE_LAYOUT_HELPERS",
]

COMPAT = "petastream.compat"

# Module globals of petastorm.spark.spark_dataset_converter that petastream.compat's mirror
# keeps (spec §1.2, §1.4-1.8): public API, the module globals tests patch or read, and the
# private helpers that users and tests import directly.
# tests/migrate/test_mapping.py checks every name below against the compat modules.
_SDC_NAMES = (
    "make_spark_converter",
    "SparkDatasetConverter",
    "TFDatasetContextManager",
    "TorchDatasetContextManager",
    "CachedDataFrameMeta",
    "register_delete_dir_handler",
    "DEFAULT_ROW_GROUP_SIZE_BYTES",
    "make_batch_reader",
    "logger",
    "_FILE_AVAILABILITY_WAIT_TIMEOUT_SECS",
    "_parent_cache_dir_url",
    "_cache_df_meta_list",
    "_cache_df_meta_list_lock",
    "_delete_dir_handler",
    "_default_delete_dir_handler",
    "_get_spark_session",
    "_get_parent_cache_dir_url",
    "_check_url",
    "_check_parent_cache_dir_url",
    "_normalize_databricks_dbfs_url",
    "_make_sub_dir_url",
    "_get_horovod_rank_and_size",
    "_check_rank_and_size_consistent_with_horovod",
    "_wait_file_available",
    "_check_dataset_file_median_size",
    "_cache_df_or_retrieve_cache_data_url",
    "_remove_cache_metadata_and_data",
    "_is_spark_local_mode",
    "_materialize_df",
    "_delete_cache_data_atexit",
    "vector_to_array",
    "_get_df_plan",
    "_convert_precision",
    "_convert_vector",
    "_gen_cache_dir_name",
)

# The Petastorm 0.13.1 modules compat mirrors (petastorm.X -> petastream.compat.X), each with
# the public names its compat module provides. A Petastorm name left out stays on Petastorm and
# is reported: petastorm.utils' run_in_subprocess and add_to_dataset_metadata,
# petastorm.transform's transform_schema, petastorm.pytorch's LoaderBase, petastorm.tf_utils'
# helpers other than make_petastorm_dataset, tf_tensors and RANDOM_SHUFFLING_QUEUE_SIZE,
# petastorm.reader's cache constants and normalize_dataset_url_or_urls.
_MIRRORED: dict[str, tuple[str, ...]] = {
    "petastorm.unischema": (
        "Unischema", "UnischemaField", "dict_to_spark_row", "insert_explicit_nulls", "match_unischema_fields",
    ),
    "petastorm.codecs": (
        "DataframeColumnCodec", "CompressedImageCodec", "NdarrayCodec", "CompressedNdarrayCodec", "ScalarCodec",
    ),
    "petastorm.predicates": (
        "PredicateBase", "in_set", "in_intersection", "in_lambda", "in_negate", "in_reduce", "in_pseudorandom_split",
    ),
    "petastorm.selectors": (
        "RowGroupSelectorBase", "SingleIndexSelector", "IntersectIndexSelector", "UnionIndexSelector",
    ),
    "petastorm.utils": ("DecodeFieldError", "decode_row"),
    "petastorm.etl": ("RowGroupIndexerBase",),
    "petastorm.etl.dataset_metadata": (
        "materialize_dataset", "get_schema", "get_schema_from_dataset_url", "infer_or_load_unischema",
        "load_row_groups", "PetastormMetadataError", "PetastormMetadataGenerationError",
        "ROW_GROUPS_PER_FILE_KEY", "UNISCHEMA_KEY",
    ),
    "petastorm.etl.rowgroup_indexers": ("SingleFieldIndexer", "FieldNotNullIndexer"),
    "petastorm.etl.rowgroup_indexing": (
        "build_rowgroup_index", "get_row_group_indexes", "ROWGROUPS_INDEX_KEY", "PieceInfo", "PARALLEL_SLICE_NUM",
    ),
    "petastorm.reader": ("make_reader", "make_batch_reader", "Reader"),
    "petastorm.pytorch": ("DataLoader", "BatchedDataLoader", "InMemBatchedDataLoader", "decimal_friendly_collate"),
    "petastorm.tf_utils": ("make_petastorm_dataset", "tf_tensors", "RANDOM_SHUFFLING_QUEUE_SIZE"),
    "petastorm.ngram": ("NGram",),
    "petastorm.weighted_sampling_reader": ("WeightedSamplingReader",),
    "petastorm.fs_utils": (
        "FilesystemResolver", "get_filesystem_and_path_or_paths", "get_dataset_path", "normalize_dir_url",
    ),
    "petastorm.spark_utils": ("dataset_as_rdd",),
    "petastorm.test_util": (),
    "petastorm.test_util.reader_mock": ("ReaderMock", "schema_data_generator_example"),
    "petastorm.test_util.shuffling_analysis": (
        "generate_shuffle_analysis_dataset", "compute_correlation_distribution",
    ),
}


@dataclass(frozen=True)
class _ModuleMap:
    """One Petastorm module: its 1:1 compat module (or None) and its names that map."""

    target: str | None
    names: Mapping[str, str]


def _mirror(target: str, names: Iterable[str]) -> _ModuleMap:
    return _ModuleMap(target, {n: f"{target}.{n}" for n in names})


_MODULES: dict[str, _ModuleMap] = {
    **{module: _mirror(COMPAT + module[len("petastorm") :], names) for module, names in _MIRRORED.items()},
    "petastorm.spark.spark_dataset_converter": _mirror(f"{COMPAT}.spark_dataset_converter", _SDC_NAMES),
    # petastorm/__init__ re-exports the readers and TransformSpec; so does petastream.compat
    # (NoDataAvailableError it does not: compat has no errors module)
    "petastorm": _ModuleMap(
        None,
        {name: f"{COMPAT}.{name}" for name in ("make_reader", "make_batch_reader", "TransformSpec")},
    ),
    "petastorm.spark": _ModuleMap(
        COMPAT,
        {
            "make_spark_converter": f"{COMPAT}.make_spark_converter",
            "SparkDatasetConverter": f"{COMPAT}.SparkDatasetConverter",
        },
    ),
    # the two helpers of Petastorm's own test suite its examples' tests import
    "petastorm.tests.conftest": _ModuleMap(None, {"SyntheticDataset": f"{COMPAT}.test_util.SyntheticDataset"}),
    "petastorm.tests.test_tf_utils": _ModuleMap(None, {"create_tf_graph": f"{COMPAT}.test_util.create_tf_graph"}),
    # petastream.compat re-exports these two: migrated code imports them from there, as the
    # converter's users already do
    "petastorm.transform": _ModuleMap(
        f"{COMPAT}.transform",
        {"TransformSpec": f"{COMPAT}.TransformSpec", "edit_field": f"{COMPAT}.edit_field"},
    ),
}

# Every module of Petastorm 0.13.1 (so ``from petastorm import reader`` is known to bind a
# module, not a name).
PETASTORM_MODULES = frozenset(
    {
        "petastorm",
        *_MODULES,
        "petastorm.arrow_reader_worker",
        "petastorm.benchmark",
        "petastorm.benchmark.cli",
        "petastorm.benchmark.dummy_reader",
        "petastorm.benchmark.throughput",
        "petastorm.cache",
        "petastorm.errors",
        "petastorm.etl.legacy",
        "petastorm.etl.metadata_util",
        "petastorm.etl.petastorm_generate_metadata",
        "petastorm.fs_utils",
        "petastorm.generator",
        "petastorm.hdfs",
        "petastorm.hdfs.namenode",
        "petastorm.local_disk_cache",
        "petastorm.namedtuple_gt_255_fields",
        "petastorm.py_dict_reader_worker",
        "petastorm.pyarrow_helpers",
        "petastorm.pyarrow_helpers.batching_table_queue",
        "petastorm.reader_impl",
        "petastorm.reader_impl.arrow_table_serializer",
        "petastorm.reader_impl.pickle_serializer",
        "petastorm.reader_impl.pytorch_shuffling_buffer",
        "petastorm.reader_impl.shuffling_buffer",
        "petastorm.spark_utils",
        "petastorm.test_util",
        "petastorm.test_util.reader_mock",
        "petastorm.test_util.shuffling_analysis",
        "petastorm.tools",
        "petastorm.tools.copy_dataset",
        "petastorm.tools.spark_session_cli",
        "petastorm.workers_pool",
        "petastorm.workers_pool.dummy_pool",
        "petastorm.workers_pool.exec_in_new_process",
        "petastorm.workers_pool.exec_in_new_process_entrypoint",
        "petastorm.workers_pool.process_pool",
        "petastorm.workers_pool.thread_pool",
        "petastorm.workers_pool.ventilator",
        "petastorm.workers_pool.worker_base",
    }
)

# One Petastorm object reachable under several paths gets one piece of advice and one pipeline
# role: paths are looked up under the name Petastorm documents (petastorm/__init__.py
# re-exports these).
_CANONICAL = {
    "petastorm.reader.make_reader": "petastorm.make_reader",
    "petastorm.reader.make_batch_reader": "petastorm.make_batch_reader",
    "petastorm.errors.NoDataAvailableError": "petastorm.NoDataAvailableError",
    "petastorm.transform.TransformSpec": "petastorm.TransformSpec",
}

# The pieces of a Petastorm read pipeline: a reader, the loaders that pull from it and the TF
# helpers that wrap it, the TransformSpec it is handed and the collate function its loader is
# given. petastream.compat's loaders and tf_utils read petastream readers, Petastorm's read
# Petastorm's, and a TransformSpec or collate function moved without its reader would make the
# file need both libraries, so a pipeline moves as one or stays as one (see
# petastream.migrate.pipeline). A WeightedSamplingReader is both: it reads readers, and loaders
# read it.
_WEIGHTED = "petastorm.weighted_sampling_reader.WeightedSamplingReader"
READERS = frozenset(
    {
        "petastorm.make_reader",
        "petastorm.make_batch_reader",
        "petastorm.reader.Reader",
        "petastorm.spark.spark_dataset_converter.make_batch_reader",
        _WEIGHTED,
    }
)
LOADERS = frozenset(
    {
        "petastorm.pytorch.DataLoader",
        "petastorm.pytorch.BatchedDataLoader",
        "petastorm.pytorch.InMemBatchedDataLoader",
    }
)
READER_CONSUMERS = LOADERS | {
    "petastorm.tf_utils.make_petastorm_dataset",
    "petastorm.tf_utils.tf_tensors",
    _WEIGHTED,
}
TRANSFORMS = frozenset({"petastorm.TransformSpec", "petastorm.transform.edit_field"})
COLLATES = frozenset({"petastorm.pytorch.decimal_friendly_collate"})
PIPELINE = READERS | READER_CONSUMERS | TRANSFORMS | COLLATES

# What petastream.compat takes over of each Petastorm reader; the one place to change when it
# takes more or less. EVERY_CALL: every call, on any data (Unischema datasets and plain Parquet,
# any store), with Petastorm's full argument list. NAME_ONLY: the name (annotations, isinstance)
# but not a call: ``Reader(pyarrow_filesystem, dataset_path, worker_class=...)`` is Petastorm's
# internal constructor, which compat does not have (its readers come from make_reader and
# make_batch_reader). A reader compat does not take, or a call of it compat cannot take, stays
# on Petastorm with its whole read pipeline (petastream.migrate.pipeline).
EVERY_CALL = "every-call"
NAME_ONLY = "name-only"
COMPAT_READERS: dict[str, str] = {
    "petastorm.make_reader": EVERY_CALL,
    "petastorm.make_batch_reader": EVERY_CALL,
    "petastorm.spark.spark_dataset_converter.make_batch_reader": EVERY_CALL,
    _WEIGHTED: EVERY_CALL,
    "petastorm.reader.Reader": NAME_ONLY,
}

# Private helpers of spark_dataset_converter that hand out or walk the cache's files: compat
# keeps them, but the cache they see is MDS (index.json + shards), not Petastorm's Parquet.
CACHE_LAYOUT_HELPERS = frozenset(
    f"petastorm.spark.spark_dataset_converter.{name}"
    for name in (
        "_cache_df_or_retrieve_cache_data_url",
        "_materialize_df",
        "_check_dataset_file_median_size",
        "_wait_file_available",
        "_remove_cache_metadata_and_data",
        "_make_sub_dir_url",
        "_gen_cache_dir_name",
        "_cache_df_meta_list",
        "CachedDataFrameMeta",
    )
)


@dataclass(frozen=True)
class Resolved:
    """A Petastorm path with a petastream.compat equivalent.

    ``consumed`` is how many leading components of the queried path were mapped; the rest
    (attributes of the mapped object, e.g. ``SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF``)
    carry over unchanged.
    """

    new: str
    consumed: int
    is_module: bool

    @property
    def module(self) -> str:
        """The module to import for ``new`` to be reachable as a dotted name."""
        return self.new if self.is_module else self.new.rpartition(".")[0]

    def apply(self, path: str) -> str:
        """``path`` with its mapped prefix replaced by ``new``."""
        rest = path.split(".")[self.consumed :]
        return ".".join([self.new, *rest])


@dataclass(frozen=True)
class Unsupported:
    """A Petastorm path that stays: compat does not provide it, or (with ``code`` and
    ``reason``) the file's read pipeline keeps it on Petastorm."""

    path: str
    suggestion: str
    code: str | None = None  # the manual item's code, when not the caller's default
    reason: str | None = None

    @property
    def message(self) -> str:
        return self.reason or f"{self.path} is not provided by petastream.compat"


def is_petastorm_path(path: str) -> bool:
    return path == "petastorm" or path.startswith("petastorm.")


def canonical(path: str) -> str:
    """``path`` under the name Petastorm documents it (``petastorm.reader.make_reader`` ->
    ``petastorm.make_reader``), attributes after it kept."""
    parts = path.split(".")
    for k in range(len(parts), 0, -1):
        found = _CANONICAL.get(".".join(parts[:k]))
        if found is not None:
            return ".".join([found, *parts[k:]])
    return path


# A name a mirrored module lacks: what the compat module has, unless advice.py says more.
_ADVICE = {
    **{
        module: f"{mapped.target} provides {', '.join(mapped.names)}; rewrite this use with those"
        for module, mapped in _MODULES.items()
        if mapped.target is not None
    },
    **SUGGESTIONS,
}


def suggestion_for(path: str) -> str:
    parts = canonical(path).split(".")
    for k in range(len(parts), 0, -1):
        found = _ADVICE.get(".".join(parts[:k]))
        if found is not None:
            return found
    return _ADVICE["petastorm"]


def resolve(path: str) -> Resolved | Unsupported:
    """Map a dotted Petastorm path to its petastream.compat equivalent.

    Raises InvalidArgumentError (a ValueError) for a path outside ``petastorm`` (callers check first).
    """
    if not is_petastorm_path(path):
        raise InvalidArgumentError(f"{path!r} is not a petastorm path")
    parts = path.split(".")
    k = next(k for k in range(len(parts), 0, -1) if ".".join(parts[:k]) in _MODULES)
    module = _MODULES[".".join(parts[:k])]
    if k == len(parts):
        if module.target is not None:
            return Resolved(module.target, k, is_module=True)
        return Unsupported(path, suggestion_for(path))
    name = parts[k]
    if name in module.names:
        return Resolved(module.names[name], k + 1, is_module=False)
    return Unsupported(_missing_name(parts), suggestion_for(path))


def _missing_name(parts: list[str]) -> str:
    """The deepest known Petastorm module in ``parts`` plus the name looked up in it."""
    k = max(k for k in range(1, len(parts) + 1) if ".".join(parts[:k]) in PETASTORM_MODULES)
    return ".".join(parts[: k + 1])
