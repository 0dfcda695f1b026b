"""What Petastorm names become, and what to suggest for the ones petastream.compat lacks.

:func:`resolve` is the one question every transform asks: given a dotted Petastorm path
(``petastorm.spark.make_spark_converter``, ``petastorm.spark.spark_dataset_converter.logger``,
``petastorm.make_reader``), what is its ``petastream.compat`` equivalent, if any? Import
rewriting, attribute chains and ``mock.patch`` target strings all go through it, so they agree.

Three compat modules mirror Petastorm module for module (``petastorm.spark``,
``petastorm.spark.spark_dataset_converter``, ``petastorm.pytorch``); two Petastorm modules map
name by name (``petastorm`` itself and ``petastorm.transform``: their ``TransformSpec`` and
``edit_field`` live in ``petastream.compat``). Everything else under ``petastorm`` has no
equivalent and comes back as :class:`Unsupported`, with a concrete suggestion.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from petastream.errors import InvalidArgumentError

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
    "CompatReader",
    "COMPAT_READERS",
    "CONVERTER_FILES",
    "ANY_DATASET",
    "CACHE_LAYOUT_HELPERS",
]

COMPAT = "petastream.compat"
_SDC = f"{COMPAT}.spark_dataset_converter"
_PYTORCH = f"{COMPAT}.pytorch"

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
_PYTORCH_NAMES = ("DataLoader", "BatchedDataLoader", "InMemBatchedDataLoader", "decimal_friendly_collate")


@dataclass(frozen=True)
class _ModuleMap:
    """One Petastorm module: its 1:1 compat module (or None) and its names that map."""

    target: str | None
    names: Mapping[str, str]


_MODULES: dict[str, _ModuleMap] = {
    "petastorm": _ModuleMap(None, {"TransformSpec": f"{COMPAT}.TransformSpec"}),
    "petastorm.spark": _ModuleMap(
        COMPAT,
        {
            "make_spark_converter": f"{COMPAT}.make_spark_converter",
            "SparkDatasetConverter": f"{COMPAT}.SparkDatasetConverter",
        },
    ),
    "petastorm.spark.spark_dataset_converter": _ModuleMap(_SDC, {n: f"{_SDC}.{n}" for n in _SDC_NAMES}),
    "petastorm.pytorch": _ModuleMap(_PYTORCH, {n: f"{_PYTORCH}.{n}" for n in _PYTORCH_NAMES}),
    "petastorm.transform": _ModuleMap(
        None,
        {"TransformSpec": f"{COMPAT}.TransformSpec", "edit_field": f"{COMPAT}.edit_field"},
    ),
}

# Petastorm modules (so ``from petastorm import reader`` is known to bind a module, not a name).
PETASTORM_MODULES = frozenset(
    {
        "petastorm",
        "petastorm.spark",
        "petastorm.spark.spark_dataset_converter",
        "petastorm.pytorch",
        "petastorm.transform",
        "petastorm.tf_utils",
        "petastorm.unischema",
        "petastorm.codecs",
        "petastorm.predicates",
        "petastorm.reader",
        "petastorm.fs_utils",
        "petastorm.utils",
        "petastorm.selectors",
        "petastorm.ngram",
        "petastorm.cache",
        "petastorm.local_disk_cache",
        "petastorm.errors",
        "petastorm.etl",
        "petastorm.etl.dataset_metadata",
        "petastorm.etl.rowgroup_indexing",
        "petastorm.etl.petastorm_generate_metadata",
        "petastorm.hdfs",
        "petastorm.workers_pool",
        "petastorm.reader_impl",
        "petastorm.test_util",
        "petastorm.tools",
    }
)

_MATERIALIZE = (
    "Petastorm-format (Unischema) datasets are not supported: write the DataFrame as plain "
    "Parquet (df.write.parquet(url)) and convert it with make_spark_converter, or read MDS with "
    "petastream.open(url)"
)
_UNISCHEMA = (
    "describe the columns with a Spark StructType instead of a Unischema; codec fields become plain "
    "columns (array<float> for ndarrays, binary for encoded images) decoded in a TransformSpec func"
)
_TF = "use make_spark_converter(df).make_tf_dataset(...) from petastream.compat"

# One Petastorm object reachable under several paths gets one piece of advice: paths are
# looked up under the name Petastorm documents (petastorm/__init__.py re-exports these).
_CANONICAL = {
    "petastorm.reader.make_reader": "petastorm.make_reader",
    "petastorm.reader.make_batch_reader": "petastorm.make_batch_reader",
    "petastorm.errors.NoDataAvailableError": "petastorm.NoDataAvailableError",
    "petastorm.transform.TransformSpec": "petastorm.TransformSpec",
}

# The pieces of a Petastorm read pipeline: a reader, the loaders that pull from it and the TF
# helpers that wrap it, the TransformSpec it is handed and the collate function its loader is
# given. petastream.compat.pytorch's loaders read a petastream Reader (they need
# reader.pool_type / reader.loader_kwargs), Petastorm's tf_utils need a Petastorm Reader, and a
# TransformSpec or collate function moved without its reader would make the file need both
# libraries, so a pipeline moves as one or stays as one (see petastream.migrate.pipeline).
READERS = frozenset(
    {
        "petastorm.make_reader",
        "petastorm.make_batch_reader",
        "petastorm.reader.Reader",
        "petastorm.spark.spark_dataset_converter.make_batch_reader",
    }
)
LOADERS = frozenset(
    {
        "petastorm.pytorch.DataLoader",
        "petastorm.pytorch.BatchedDataLoader",
        "petastorm.pytorch.InMemBatchedDataLoader",
    }
)
READER_CONSUMERS = LOADERS | {"petastorm.tf_utils.make_petastorm_dataset", "petastorm.tf_utils.tf_tensors"}
TRANSFORMS = frozenset({"petastorm.TransformSpec", "petastorm.transform.edit_field"})
COLLATES = frozenset({"petastorm.pytorch.decimal_friendly_collate"})
PIPELINE = READERS | READER_CONSUMERS | TRANSFORMS | COLLATES

# The Petastorm readers petastream.compat provides, and which of their calls it can take:
# CONVERTER_FILES, only a reader of the MDS files a converter wrote
# (make_batch_reader(converter.file_urls, ...)); ANY_DATASET, every call. The one place to
# change when compat reads more (make_reader or make_batch_reader on Parquet): a reader that
# moves takes its whole pipeline with it, one that stays keeps it (petastream.migrate.pipeline).
CONVERTER_FILES = "converter-files"
ANY_DATASET = "any-dataset"


@dataclass(frozen=True)
class CompatReader:
    target: str  # the compat reader a Petastorm reader's calls become
    reads: str  # CONVERTER_FILES or ANY_DATASET


COMPAT_READERS: dict[str, CompatReader] = {
    "petastorm.make_batch_reader": CompatReader(f"{COMPAT}.make_batch_reader", CONVERTER_FILES),
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

# Longest matching prefix wins; "petastorm" is the catch-all.
_SUGGESTIONS: dict[str, str] = {
    "petastorm.make_reader": (
        "materialize the data with make_spark_converter(df) and read it with "
        "converter.make_torch_dataloader()/make_tf_dataset(), or write it as MDS and read it "
        "with petastream.open(url)"
    ),
    "petastorm.make_batch_reader": (
        "for Parquet data use make_spark_converter(spark.read.parquet(url)) and "
        "converter.make_torch_dataloader()/make_tf_dataset(); petastream.compat.make_batch_reader "
        "reads only what a converter materialized (converter.file_urls); read other MDS data "
        "with petastream.open(url)"
    ),
    "petastorm.NoDataAvailableError": (
        "catch petastream.PetastreamError instead (or drop the handler)"
    ),
    "petastorm.errors": "catch petastream.PetastreamError (petastream.errors) instead",
    "petastorm.etl": _MATERIALIZE,
    "petastorm.unischema.dict_to_spark_row": (
        "build rows with pyspark.sql.Row(**values) against a plain Spark StructType schema"
    ),
    "petastorm.unischema": _UNISCHEMA,
    "petastorm.codecs": _UNISCHEMA,
    "petastorm.tf_utils": _TF,
    "petastorm.predicates": (
        "filter the Spark DataFrame before converting it (df.filter(...)), or drop rows in a "
        "TransformSpec func"
    ),
    "petastorm.selectors": "select rows with df.filter(...) before make_spark_converter",
    "petastorm.reader": (
        "use converter.make_torch_dataloader()/make_tf_dataset() from petastream.compat "
        "instead of a Reader"
    ),
    "petastorm.fs_utils": "resolve storage URLs with fsspec (fsspec.core.url_to_fs(url))",
    "petastorm.pytorch": (
        "petastream.compat.pytorch provides only DataLoader, BatchedDataLoader, "
        "InMemBatchedDataLoader and decimal_friendly_collate"
    ),
    "petastorm.transform": "petastream.compat provides only TransformSpec and edit_field",
    "petastorm.spark": (
        "petastream.compat mirrors only the documented converter API of petastorm.spark: "
        "rewrite this use by hand"
    ),
    "petastorm": (
        "rewrite this by hand with make_spark_converter (petastream.compat) or "
        "petastream.open(url)"
    ),
}


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


def suggestion_for(path: str) -> str:
    parts = canonical(path).split(".")
    for k in range(len(parts), 0, -1):
        found = _SUGGESTIONS.get(".".join(parts[:k]))
        if found is not None:
            return found
    return _SUGGESTIONS["petastorm"]


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
