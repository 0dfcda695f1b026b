"""``petastorm.etl.rowgroup_indexing``: build and read row-group indexes.

An index maps values of a field to the row groups (positions in
:func:`~petastream.compat.etl.dataset_metadata.load_row_groups`' order) that hold them; a
``rowgroup_selector`` uses it to read only those row groups. The indexes are stored pickled in
``_common_metadata`` under ``dataset-toolkit.rowgroups_index.v1``, as Petastorm stores them.
"""

from __future__ import annotations

import os
from collections import namedtuple
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from petastream.compat._decode import decode_table
from petastream.compat.etl import dataset_metadata
from petastream.compat.etl import metadata_files as files
from petastream.compat.etl._pickling import petastorm_dumps, restricted_loads
from petastream.errors import InvalidArgumentError
from petastream.parquet.discover import locate
from petastream.storage.location import Location

__all__ = ["build_rowgroup_index", "get_row_group_indexes", "ROWGROUPS_INDEX_KEY", "PieceInfo"]

PARALLEL_SLICE_NUM = 2000
ROWGROUPS_INDEX_KEY = b"dataset-toolkit.rowgroups_index.v1"

PieceInfo = namedtuple("PieceInfo", ["piece_index", "path", "row_group", "partition_keys"])


def build_rowgroup_index(dataset_url: str, spark_context: Any, indexers: list[Any],
                         hdfs_driver: str = "libhdfs3", storage_options: dict | None = None) -> None:
    """Index the dataset's row groups with ``indexers`` (one Spark task per row group) and store
    the indexes in its ``_common_metadata``. ``storage_options`` (not in Petastorm) go to fsspec,
    on the driver and in the tasks."""
    url = os.fspath(dataset_url).rstrip("/")
    location = locate(url, storage_options)
    pieces = dataset_metadata.load_row_groups(location)
    schema = dataset_metadata.get_schema(location)
    if not pieces:
        raise InvalidArgumentError(f"build_rowgroup_index: the dataset at {url} has no row groups to index")
    infos = [PieceInfo(i, p.path, p.row_group, p.partition_keys) for i, p in enumerate(pieces)]
    built = (spark_context.parallelize(infos, min(len(infos), PARALLEL_SLICE_NUM))
             .map(lambda info: _index_piece(info, url, storage_options, indexers, schema))
             .reduce(_combine_indexers))
    found = files.read_key_value_metadata(location)
    base_name = found[0] if found else infos[0].path
    base = files.read_footer(location, base_name).schema.to_arrow_schema()
    files.write_common_metadata(location, base, {
        ROWGROUPS_INDEX_KEY: petastorm_dumps({indexer.index_name: indexer for indexer in built})})


def _index_piece(info: PieceInfo, url: str, storage_options: dict | None, indexers: list[Any],
                 schema: Any) -> list[Any]:
    """In a Spark task: read one row group's indexed columns, decode them, feed the indexers."""
    location = locate(url, storage_options)
    columns = sorted({c for indexer in indexers for c in indexer.column_names})
    partitions = dict(info.partition_keys)
    stored = [c for c in columns if c not in partitions]
    with files.open_file(location, info.path) as f:
        table = pq.ParquetFile(f).read_row_group(info.row_group, columns=stored)
    for name in columns:
        if name in partitions:
            table = table.append_column(name, pa.array([partitions[name]] * table.num_rows))
    decoded = decode_table(schema, table, columns)
    rows = [dict(zip(columns, values)) for values in zip(*(decoded[c] for c in columns))]
    if not rows:
        raise ValueError(f"Cannot build index with empty decoded_rows, columns: {columns}, "
                         f"partitions: {info.partition_keys}")
    for indexer in indexers:
        indexer.build_index(rows, info.piece_index)
    return indexers


def _combine_indexers(indexers1: list[Any], indexers2: list[Any]) -> list[Any]:
    if len(indexers1) != len(indexers2):
        raise ValueError("Cannot reduce results with different dimensions")
    return [a + b for a, b in zip(indexers1, indexers2)]


def get_row_group_indexes(dataset: Any, storage_options: dict | None = None) -> dict[str, Any]:
    """``{index name: indexer}`` stored in the dataset (``dataset``: its URL or path)."""
    location = dataset if isinstance(dataset, Location) else locate(dataset, storage_options)
    found = files.read_key_value_metadata(location)
    if found is None:
        raise ValueError("Could not find _metadata file. Use materialize_dataset(..) in "
                         "petastream.compat.etl.dataset_metadata to generate this file in your ETL code.")
    if ROWGROUPS_INDEX_KEY not in found[1]:
        raise ValueError("Row groups index is not available in the dataset metadata file. Build it with "
                         "petastream.compat.etl.rowgroup_indexing.build_rowgroup_index(dataset_url, "
                         "spark_context, indexers).")
    return restricted_loads(found[1][ROWGROUPS_INDEX_KEY])
