"""What ``make_reader`` reads, as Petastorm 0.13.1 resolves its ``dataset_url``.

- the URL rules of Petastorm's ``normalize_dataset_url_or_urls``: a string (one trailing '/'
  dropped) or a non-empty list of them, else its ``ValueError`` (paths are also taken);
- a directory with Petastorm's metadata (``_common_metadata`` holding the Unischema): the stored
  schema, its codecs decoded, row groups in Petastorm's order
  (:func:`~petastream.compat.etl.dataset_metadata.load_row_groups`);
- anything else, a directory of plain Parquet, one ``.parquet`` file or a list of file URLs:
  Petastorm's ``UserWarning`` ("Currently make_reader supports reading only Petastorm
  datasets...") and a Unischema inferred from the Parquet schema (no codecs: values as stored,
  typed by the schema), row groups from the files' footers, in the list's order; files named
  one by one have no partition keys, as in Petastorm.
"""

from __future__ import annotations

import os
import posixpath
import warnings
from dataclasses import dataclass
from typing import Any

import pyarrow.parquet as pq

from petastream.compat._urls import normalize_dir_url
from petastream.compat.etl import _store, dataset_metadata
from petastream.compat.unischema import Unischema
from petastream.errors import DatasetNotFoundError

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
    location: Any
    schema: Unischema
    pieces: list[_store.RowGroupPiece]
    #: Whether the URL named a directory (Hive partition keys are columns), not files one by one.
    directory: bool = False


def normalize_urls(dataset_url: Any) -> list[str]:
    """Petastorm's ``normalize_dataset_url_or_urls``, as a list (a path is taken too)."""
    if isinstance(dataset_url, os.PathLike):
        dataset_url = os.fspath(dataset_url)
    if isinstance(dataset_url, list):
        if not dataset_url:
            raise ValueError("dataset url list must be non-empty.")
        return [normalize_dir_url(os.fspath(u) if isinstance(u, os.PathLike) else u) for u in dataset_url]
    return [normalize_dir_url(dataset_url)]


def open_row_source(urls: list[str], storage_options: dict | None) -> RowSource:
    if len(urls) == 1:
        location = _store.locate(urls[0], storage_options)
        if not location.exists():
            raise DatasetNotFoundError(f"make_reader: no dataset at {urls[0]}")
        if location.isdir():
            return _directory(location, storage_options)
    return _files(urls, storage_options)


def _directory(location: Any, storage_options: dict | None) -> RowSource:
    try:
        schema = dataset_metadata.get_schema(location)
    except dataset_metadata.PetastormMetadataError:
        warnings.warn(NOT_PETASTORM_WARNING, UserWarning, stacklevel=4)
        schema = dataset_metadata.infer_or_load_unischema(location.url, storage_options)
    try:
        pieces = dataset_metadata.load_row_groups(location)
    except dataset_metadata.PetastormMetadataError as e:
        raise RuntimeError("make_reader has failed. If you were trying to open a Parquet store that was not created "
                           "using Petastorm materialize_dataset and it contains only scalar columns, you may use "
                           f"make_batch_reader to read it.\nInner exception: {e}") from e
    return RowSource(location, schema, pieces, directory=True)


def _files(urls: list[str], storage_options: dict | None) -> RowSource:
    """Parquet files named one by one: relative to the deepest directory above them all."""
    warnings.warn(NOT_PETASTORM_WARNING, UserWarning, stacklevel=4)
    parts = [u.split("/") for u in urls]
    common = os.path.commonprefix([p[:-1] for p in parts])
    depth = len(common)
    root = _store.locate("/".join(common) or ".", storage_options)
    names = ["/".join(p[depth:]) for p in parts]
    counts: dict[str, int] = {}
    for name in dict.fromkeys(names):
        if not root.exists(name):
            raise DatasetNotFoundError(f"make_reader: no Parquet file at {posixpath.join(root.url, name)}")
        counts[name] = _store.footer(root, name).num_row_groups
    pieces = [_store.RowGroupPiece(name, rg, ()) for name in names for rg in range(counts[name])]
    with _store.open_file(root, names[0]) as f:
        arrow_schema = pq.ParquetFile(f).schema_arrow
    return RowSource(root, Unischema.from_arrow_schema(arrow_schema), pieces)


def warn_if_petastorm_dataset(dataset_url_or_urls: Any, storage_options: dict | None) -> None:
    """``make_batch_reader``'s warning on a directory holding Petastorm's Unischema (its codec
    columns come back undecoded); as Petastorm, not for a list of files."""
    if not isinstance(dataset_url_or_urls, (str, os.PathLike)):
        return
    location = _store.locate(dataset_url_or_urls, storage_options)
    try:
        dataset_metadata.get_schema(location)
    except (dataset_metadata.PetastormMetadataError, OSError):
        return
    warnings.warn(PETASTORM_DATASET_WARNING, UserWarning, stacklevel=3)
