"""A minimal reader of Unischema datasets for the tests: every row group in Petastorm's order,
partition keys added, decoded with compat's codecs. (The real reader is compat's make_reader.)"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from petastream.compat._decode import decode_table, make_rows
from petastream.compat.etl import dataset_metadata, metadata_files
from petastream.parquet.discover import locate


def read_rows(url: str, schema: Any = None) -> list[Any]:
    location = locate(url)
    schema = schema or dataset_metadata.get_schema(url)
    rows: list[Any] = []
    for piece in dataset_metadata.load_row_groups(url):
        with metadata_files.open_file(location, piece.path) as f:
            table = pq.ParquetFile(f).read_row_group(piece.row_group)
        for name, value in piece.partition_keys:
            table = table.append_column(name, pa.array([value] * table.num_rows))
        rows += make_rows(schema, decode_table(schema, table))
    return rows
