"""What ``make_reader`` reads, as Petastorm 0.13.1 resolves its ``dataset_url``.

- the URL rules of Petastorm's ``normalize_dataset_url_or_urls``: a string (one trailing '/'
  dropped) or a non-empty list of them, else its ``ValueError`` (paths are also taken);
- a directory with Petastorm's metadata (``_common_metadata`` holding the Unischema): the stored
  schema, its codecs decoded, row groups in Petastorm's order (the files
  :func:`petastream.parquet.discover.discover` lists, sorted by path, each with the row groups
  its metadata records: :func:`~petastream.compat.etl.dataset_metadata.stored_row_groups`);
- anything else, a directory of plain Parquet, one ``.parquet`` file or a list of file URLs:
  Petastorm's ``UserWarning`` ("Currently make_reader supports reading only Petastorm
  datasets...") and a Unischema inferred from the Parquet schema (no codecs: values as stored,
  typed by the schema), row groups from the files' footers, in the list's order; files named
  one by one have no partition keys, as in Petastorm.

Every footer is read once, by the plan of the :class:`~petastream.parquet.ParquetSource` opened
here: an inferred schema is the first file's, row groups not recorded in metadata are counted
from the footers, and the reader's selection restricts that plan (:mod:`._row_plan`).
"""

from __future__ import annotations

import os
import posixpath
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from petastream.compat._urls import normalize_dir_url
from petastream.compat.etl import dataset_metadata
from petastream.compat.etl.metadata_files import (
    RowGroupPiece,
    pieces_from_counts,
    read_key_value_metadata,
    relative_path,
)
from petastream.compat.unischema import Unischema
from petastream.errors import DatasetNotFoundError, InvalidArgumentError
from petastream.parquet.discover import locate
from petastream.storage.location import Location

if TYPE_CHECKING:
    from petastream.parquet import ParquetSource

__all__ = ["RowSource", "normalize_urls", "open_row_source", "warn_if_petastorm_dataset", "NOT_PETASTORM_WARNING",
           "SHARD_SEED_WARNING"]

# Petastorm's UserWarning texts (users filter warnings by them).
NOT_PETASTORM_WARNING = ("Currently make_reader supports reading only Petastorm datasets. "
                         "To read from a non-Petastorm Parquet store use make_batch_reader")
PETASTORM_DATASET_WARNING = ("Please use make_reader (instead of 'make_batch_dataset' function to read this dataset. "
                             "You may get unexpected results. Currently make_batch_reader supports reading only "
                             "Parquet stores that contain standard Parquet data types and do not require petastorm "
                             "decoding.")
SHARD_SEED_WARNING = ("shard_seed was deprecated and will be removed in future versions. "
                      "Use seed to apply randomization effects on sharding row groups.")


@dataclass(frozen=True)
class RowSource:
    #: The directory the pieces' paths are relative to (it holds the row-group index, if any).
    location: Location
    schema: Unischema
    #: Every row group, in Petastorm's order (the positions its indexes and shards use).
    pieces: list[RowGroupPiece]
    #: Every row group of the pieces' files, reading the fields chosen (the footers read once, here).
    source: ParquetSource
    #: Each field read's stored Arrow type (a partition key's: string, as Petastorm reads it).
    types: dict[str, Any]


def normalize_urls(dataset_url: Any) -> list[str]:
    """Petastorm's ``normalize_dataset_url_or_urls``, as a list (a path is taken too)."""
    if isinstance(dataset_url, os.PathLike):
        dataset_url = os.fspath(dataset_url)
    if isinstance(dataset_url, list):
        if not dataset_url:
            raise ValueError("dataset url list must be non-empty.")
        return [normalize_dir_url(os.fspath(u) if isinstance(u, os.PathLike) else u) for u in dataset_url]
    return [normalize_dir_url(dataset_url)]


#: The fields read, from the dataset's Unischema (stored or inferred).
Choose = Callable[[Unischema], Sequence[str]]


def open_row_source(urls: list[str], storage_options: dict | None, choose: Choose,
                    options: dict[str, Any]) -> RowSource:
    """The dataset ``urls`` name, its row groups in Petastorm's order and a
    :class:`~petastream.parquet.ParquetSource` of them all reading ``choose(schema)``
    (``options``: the source's)."""
    if len(urls) == 1:
        location = locate(urls[0], storage_options)
        if not location.exists():
            raise DatasetNotFoundError(f"make_reader: no dataset at {urls[0]}")
        if location.isdir():
            return _directory(location, choose, options)
    return _files(urls, storage_options, choose, options)


def _directory(location: Location, choose: Choose, options: dict[str, Any]) -> RowSource:
    found = read_key_value_metadata(location)  # read once: the Unischema and the row groups
    try:
        stored: Unischema | None = dataset_metadata.schema_from_metadata(None if found is None else found[1])
    except dataset_metadata.PetastormMetadataError:
        warnings.warn(NOT_PETASTORM_WARNING, UserWarning, stacklevel=4)
        stored = None
    source, schema, types = _open(location.url, stored, choose, options)
    names = [relative_path(location, f.ref) for f in source.plan.files]
    try:
        counts = dataset_metadata.stored_row_groups(location, names, found)
    except dataset_metadata.PetastormMetadataError as e:
        source.close()
        raise RuntimeError("make_reader has failed. If you were trying to open a Parquet store that was not created "
                           "using Petastorm materialize_dataset and it contains only scalar columns, you may use "
                           f"make_batch_reader to read it.\nInner exception: {e}") from e
    if counts is None:  # no metadata file: the footers the source read
        counts = {name: f.row_groups for name, f in zip(names, source.plan.files)}
    return RowSource(location, schema, pieces_from_counts(counts), source, types)


def _files(urls: list[str], storage_options: dict | None, choose: Choose, options: dict[str, Any]) -> RowSource:
    """Parquet files named one by one: relative to the deepest directory above them all."""
    warnings.warn(NOT_PETASTORM_WARNING, UserWarning, stacklevel=4)
    parts = [u.split("/") for u in urls]
    common = os.path.commonprefix([p[:-1] for p in parts])
    depth = len(common)
    root = locate("/".join(common) or ".", storage_options)
    names = ["/".join(p[depth:]) for p in parts]
    unique = list(dict.fromkeys(names))
    for name in unique:
        if not root.exists(name):
            raise DatasetNotFoundError(f"make_reader: no Parquet file at {posixpath.join(root.url, name)}")
    source, schema, types = _open([root.child_url(name) for name in unique], None, choose, options)
    counts = {relative_path(root, f.ref): f.row_groups for f in source.plan.files}
    if any(name not in counts for name in unique):
        source.close()
        named = next(posixpath.join(root.url, name) for name in unique if name not in counts)
        raise InvalidArgumentError(f"make_reader: {named} is a directory; a list of URLs names Parquet files, "
                                   "or pass the directory's URL alone")
    pieces = [RowGroupPiece(name, rg, ()) for name in names for rg in range(counts[name])]
    return RowSource(root, schema, pieces, source, types)


def _open(target: str | list[str], stored: Unischema | None, choose: Choose,
          options: dict[str, Any]) -> tuple[ParquetSource, Unischema, dict[str, Any]]:
    """The source of every row group of ``target``, the Unischema (``stored``, else inferred from
    the first file's footer, read by the source's plan) and the stored types of the fields read."""
    import pyarrow as pa

    from petastream.parquet import ParquetSource

    seen: dict[str, Any] = {}

    def columns(file_fields: list[tuple[str, Any]], partition_fields: list[tuple[str, Any]]) -> list[str]:
        schema = stored if stored is not None else _inferred(file_fields, partition_fields)
        fields = list(choose(schema))
        partitions = {name for name, _ in partition_fields}
        found = dict(file_fields)
        seen.update(schema=schema, types={f: pa.string() if f in partitions else found[f] for f in fields})
        return fields

    source = ParquetSource(target, columns=columns, null_policy="rows", **options)
    return source, seen["schema"], seen["types"]


def _inferred(file_fields: list[tuple[str, Any]], partition_fields: list[tuple[str, Any]]) -> Unischema:
    """Petastorm's Unischema of a Parquet store it did not write: the Hive partition keys, then
    the first file's columns (:meth:`Unischema.from_arrow_schema`'s rules)."""
    import pyarrow as pa

    from petastream.compat._arrow_fields import unischema_fields_from_arrow

    schema = pa.schema([pa.field(n, t) for n, t in file_fields])
    return Unischema("inferred_schema", unischema_fields_from_arrow(schema, partition_fields=partition_fields))


def warn_if_petastorm_dataset(dataset_url_or_urls: Any, storage_options: dict | None) -> None:
    """``make_batch_reader``'s warning on a directory holding Petastorm's Unischema (its codec
    columns come back undecoded); as Petastorm, not for a list of files."""
    if not isinstance(dataset_url_or_urls, (str, os.PathLike)):
        return
    location = locate(dataset_url_or_urls, storage_options)
    try:
        dataset_metadata.get_schema(location)
    except (dataset_metadata.PetastormMetadataError, OSError):
        return
    warnings.warn(PETASTORM_DATASET_WARNING, UserWarning, stacklevel=3)
