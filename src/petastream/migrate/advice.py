"""What to do instead, for each Petastorm API petastream.compat does not provide.

One sentence per Petastorm module or name, looked up by the longest matching prefix of a path
(:func:`petastream.migrate.mapping.suggestion_for`); a name missing from a module compat
mirrors gets, unless listed here, the list of what the compat module provides. Why each module
stays is in docs/migrate-tool.md ("What stays on Petastorm").
"""

from __future__ import annotations

__all__ = ["SUGGESTIONS"]

_READER_ARGS = (
    "create the reader with make_reader(url, ...) or make_batch_reader(url, ...) from "
    "petastream.compat, which take Petastorm's arguments"
)

SUGGESTIONS: dict[str, str] = {
    "petastorm": (
        "rewrite this by hand with petastream.compat (make_reader, make_batch_reader, "
        "make_spark_converter) or petastream.open(url)"
    ),
    "petastorm.NoDataAvailableError": (
        "catch petastream.PetastreamError instead (or drop the handler)"
    ),
    "petastorm.__version__": (
        "petastream.__version__ is petastream's own version: drop the Petastorm version check"
    ),
    "petastorm.errors": "catch petastream.PetastreamError (petastream.errors) instead",
    "petastorm.spark": (
        "petastream.compat mirrors only the documented converter API of petastorm.spark: "
        "rewrite this use by hand"
    ),
    "petastorm.spark.spark_dataset_converter": (
        "petastream.compat.spark_dataset_converter mirrors the converter's public API and the "
        "helpers users call; rewrite this use by hand"
    ),
    # Petastorm's reader machinery: compat's readers are configured by their arguments
    "petastorm.reader": (
        "petastream.compat.reader provides make_reader, make_batch_reader and the Reader type; "
        "pass cache and pool choices as make_reader arguments (cache_type=, reader_pool_type=)"
    ),
    "petastorm.workers_pool": (
        "choose the pool with make_reader(..., reader_pool_type='thread'|'process'|'dummy', "
        "workers_count=N) from petastream.compat; it has no pluggable worker pools"
    ),
    "petastorm.arrow_reader_worker": _READER_ARGS,
    "petastorm.py_dict_reader_worker": _READER_ARGS,
    "petastorm.reader_impl": (
        "Petastorm's shuffling buffers and serializers are reader internals: use "
        "shuffle_rows=/shuffle_row_groups= of make_reader and shuffling_queue_capacity= of the "
        "petastream.compat.pytorch loaders"
    ),
    "petastorm.pyarrow_helpers": _READER_ARGS,
    "petastorm.cache": (
        "pass cache_type='local-disk' (with cache_location=, cache_size_limit=, "
        "cache_row_size_estimate=) or 'null' to make_reader from petastream.compat; custom "
        "CacheBase subclasses have no petastream.compat equivalent"
    ),
    "petastorm.local_disk_cache": (
        "pass cache_type='local-disk' with cache_location=, cache_size_limit= and "
        "cache_row_size_estimate= to make_reader from petastream.compat instead of building the "
        "cache"
    ),
    # storage: compat reads every store through fsspec, from the URL (petastream.compat.fs_utils
    # resolves URLs as Petastorm's did)
    "petastorm.hdfs": (
        "pass the hdfs:// URL to make_reader from petastream.compat (read through fsspec and "
        "pyarrow's HadoopFileSystem); namenode HA is the Hadoop client's (core-site.xml)"
    ),
    # tools and scripts
    "petastorm.etl.petastorm_generate_metadata": (
        "write the metadata of an existing dataset with an empty "
        "`with materialize_dataset(spark, url, schema): pass` "
        "(petastream.compat.etl.dataset_metadata), giving the schema yourself"
    ),
    "petastorm.etl.legacy": "a Petastorm metadata internal: read the schema with get_schema_from_dataset_url(url) (petastream.compat.etl.dataset_metadata)",
    "petastorm.etl.metadata_util": "a Petastorm command-line script: read the schema with get_schema_from_dataset_url(url) and the indexes with get_row_group_indexes(url) from petastream.compat.etl",
    "petastorm.etl": (
        "petastream.compat.etl mirrors RowGroupIndexerBase, dataset_metadata, "
        "rowgroup_indexers and rowgroup_indexing; rewrite this use with them"
    ),
    "petastorm.utils.add_to_dataset_metadata": (
        "write Parquet key-value metadata with pyarrow (pyarrow.parquet.write_metadata) or "
        "regenerate it with materialize_dataset (petastream.compat.etl.dataset_metadata)"
    ),
    "petastorm.utils.run_in_subprocess": (
        "run the function in a subprocess yourself (multiprocessing or concurrent.futures."
        "ProcessPoolExecutor)"
    ),
    "petastorm.tools.copy_dataset": (
        "copy with Spark inside materialize_dataset (petastream.compat.etl.dataset_metadata): "
        "spark.read.parquet(src).select(fields).write.parquet(dst)"
    ),
    "petastorm.tools": "configure the SparkSession builder in your own code",
    "petastorm.tests": (
        "Petastorm's own test suite: petastream.compat.test_util has its SyntheticDataset and "
        "create_tf_graph; write other fixtures in your tests (materialize_dataset, make_reader)"
    ),
    "petastorm.benchmark": "time your loader directly; petastream.compat has no benchmark module",
}
