"""A Petastorm dataset's metadata files (``_common_metadata``, ``_metadata``) and its row
groups numbered as Petastorm numbers them.

The dataset's Parquet files are found by :func:`petastream.parquet.discover.discover`, as every
petastream read finds them (each file once, sorted by path: the order of pyarrow's legacy
``ParquetDataset``, which Petastorm's row-group positions refer to). What stays here is what
that discovery skips by design, so it cannot be ``parquet/discover``: the two metadata files
Spark and Petastorm write beside the data (``_``-prefixed names, never read as data): read for
the Unischema and the row groups per file, written by ``materialize_dataset`` and the
row-group indexers; and :class:`RowGroupPiece`, Petastorm's position of a row group, whose
partition keys are the raw directory values (Petastorm's ``filters`` and predicates type them
by their own rules, not by pyarrow's inference).
"""

from __future__ import annotations

import io
import json
import os
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

from petastream.errors import DatasetNotFoundError
from petastream.parquet.discover import ParquetFileRef, discover
from petastream.parquet.footer import read_footers
from petastream.storage.location import Location

__all__ = ["RowGroupPiece", "COMMON_METADATA", "SUMMARY_METADATA", "dataset_files", "relative_path", "partition_keys",
           "open_file", "read_footer", "read_key_value_metadata", "row_groups_per_file", "write_common_metadata",
           "pieces_from_counts", "json_counts", "summary_counts"]

COMMON_METADATA = "_common_metadata"
SUMMARY_METADATA = "_metadata"


class RowGroupPiece(NamedTuple):
    """One row group of the dataset: ``path`` relative to the dataset root ('/'-separated),
    ``row_group`` in that file, ``partition_keys`` ((name, value) of its hive directories)."""

    path: str
    row_group: int
    partition_keys: tuple[tuple[str, str], ...] = ()


def relative_path(root: Location, ref: ParquetFileRef) -> str:
    """``ref``'s path under ``root`` ('/'-separated), as Petastorm's metadata names files."""
    return ref.url.removeprefix(root.url.rstrip("/") + "/")


def dataset_files(location: Location) -> dict[str, ParquetFileRef]:
    """``{relative path: file}`` of the dataset's Parquet files in Petastorm's order; empty when
    it has none (or does not exist)."""
    try:
        found = discover(location.url, filesystem=None if location.is_local else location.fs)
    except DatasetNotFoundError:
        return {}
    return {relative_path(location, ref): ref for ref in found.files}


def partition_keys(relative: str) -> tuple[tuple[str, str], ...]:
    """``(('split', 'train'),)`` for ``'split=train/part-0.parquet'``."""
    directories = relative.split("/")[:-1]
    return tuple((name, value) for name, value in (part.split("=", 1) for part in directories if "=" in part))


def open_file(location: Location, name: str) -> Any:
    child = location.child(name)
    return open(child.path, "rb") if child.is_local else child.fs.open(child.path, "rb")


def read_footer(location: Location, name: str) -> pq.FileMetaData:
    """The Parquet footer of ``name`` (only its last bytes are read)."""
    with open_file(location, name) as f:
        return pq.read_metadata(f)


def read_key_value_metadata(location: Location) -> tuple[str, dict[bytes, bytes]] | None:
    """(file name, key-value metadata) of ``_common_metadata``, else of ``_metadata``; None if the
    dataset has neither."""
    for name in (COMMON_METADATA, SUMMARY_METADATA):
        if location.exists(name):
            return name, dict(read_footer(location, name).metadata or {})
    return None


def row_groups_per_file(location: Location, files: dict[str, ParquetFileRef]) -> dict[str, int]:
    """``{relative path: number of row groups}``, read from the files' footers."""
    footers = read_footers(list(files.values()), [location])
    return {name: footer.metadata.num_row_groups for name, footer in zip(files, footers)}


def write_common_metadata(location: Location, base: pa.Schema, entries: dict[bytes, bytes]) -> None:
    """Write ``_common_metadata``: ``base`` with ``entries`` added to its key-value metadata
    (the file a Parquet reader takes a dataset's schema from, as Petastorm writes it)."""
    metadata = dict(base.metadata or {})
    metadata.update(entries)
    out = io.BytesIO()
    pq.write_metadata(base.with_metadata(metadata), out)
    location.write_bytes_atomic(COMMON_METADATA, out.getvalue())
    # A checksum Hadoop wrote for an older _common_metadata would no longer match it.
    location.remove(f".{COMMON_METADATA}.crc")


def pieces_from_counts(counts: dict[str, int]) -> list[RowGroupPiece]:
    return [RowGroupPiece(path, rg, partition_keys(path))
            for path in sorted(counts) for rg in range(int(counts[path]))]


def json_counts(raw: bytes) -> dict[str, int]:
    """Petastorm's ``num_row_groups_per_file`` value; its keys use the writer's OS separator."""
    return {k.replace(os.sep, "/"): int(v) for k, v in json.loads(raw.decode()).items()}


def summary_counts(location: Location) -> dict[str, int] | None:
    """Row groups per file from a ``_metadata`` summary file that lists them, else None."""
    if not location.exists(SUMMARY_METADATA):
        return None
    meta = read_footer(location, SUMMARY_METADATA)
    if meta.num_row_groups == 0:
        return None
    counts: dict[str, int] = {}
    for i in range(meta.num_row_groups):
        path = meta.row_group(i).column(0).file_path
        counts[path] = counts.get(path, 0) + 1
    return counts
