"""``petastorm.etl.dataset_metadata``: write and read a Petastorm dataset's metadata.

A Petastorm dataset is a directory of Parquet files written by Spark plus ``_common_metadata``,
whose key-value metadata holds the pickled :class:`~petastream.compat.unischema.Unischema`
(``dataset-toolkit.unischema.v1``) and the number of row groups of each file
(``dataset-toolkit.num_row_groups_per_file.v1``, JSON). :func:`materialize_dataset` writes both
around the user's Spark write, in a form Petastorm 0.13.1 reads; :func:`get_schema` and
:func:`load_row_groups` read them (Petastorm's or ours) without pyspark, and without unpickling
anything but Petastorm's schema vocabulary (:mod:`petastream.compat.etl._pickling`).

Where Petastorm takes a ``pyarrow.parquet.ParquetDataset`` (``get_schema``, ``load_row_groups``,
``infer_or_load_unischema``), these take the dataset's URL (or path); a legacy pyarrow dataset
object with a ``common_metadata`` attribute is accepted by ``get_schema`` too.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from types import EllipsisType
from typing import Any

from petastream.compat.etl import metadata_files as files
from petastream.compat.etl._pickling import petastorm_dumps, restricted_loads
from petastream.compat.etl.metadata_files import RowGroupPiece
from petastream.compat.unischema import Unischema
from petastream.errors import InvalidArgumentTypeError, PetastreamError
from petastream.parquet.discover import locate
from petastream.storage.location import Location

__all__ = ["materialize_dataset", "get_schema", "get_schema_from_dataset_url", "infer_or_load_unischema",
           "load_row_groups", "stored_row_groups", "PetastormMetadataError", "PetastormMetadataGenerationError",
           "ROW_GROUPS_PER_FILE_KEY", "UNISCHEMA_KEY", "RowGroupPiece"]

logger = logging.getLogger(__name__)

ROW_GROUPS_PER_FILE_KEY = b"dataset-toolkit.num_row_groups_per_file.v1"
UNISCHEMA_KEY = b"dataset-toolkit.unischema.v1"

_GENERATE_HINT = (" Use materialize_dataset(..) in petastream.compat.etl.dataset_metadata (Petastorm's "
                  "petastorm.etl.dataset_metadata) to generate this file in your ETL code.")


class PetastormMetadataError(PetastreamError):
    """The dataset's Petastorm metadata is missing, incomplete or invalid."""


class PetastormMetadataGenerationError(PetastreamError):
    """``materialize_dataset`` could not write the metadata."""


# -- writing ------------------------------------------------------------------------------------

class _ParquetSettings:
    """Parquet writer settings put in the Spark session's conf for the duration of the block.

    Petastorm sets them in the SparkContext's Hadoop configuration; Spark copies its SQL conf
    into the Hadoop configuration of every write, so the session conf has the same effect and
    also works on Spark Connect, which has no SparkContext. Former values are restored."""

    def __init__(self, spark: Any, row_group_size_mb: int | None, use_summary_metadata: bool) -> None:
        self._conf = spark.conf
        self._saved: dict[str, str | None] = {}
        self._set("parquet.summary.metadata.level", "ALL" if use_summary_metadata else "NONE")
        self._set("parquet.summary.metadata.propagate-errors", "true")
        # parquet-mr checks the row-group size only every 100 rows by default: with large rows
        # (images, tensors) a row group would overshoot row_group_size_mb by far. Petastorm
        # sets the first two keys, which parquet-mr >= 1.12 no longer reads (measured: 24 rows of
        # 200 kB with row_group_size_mb=1 stay one row group); the row-group check now follows
        # the page-size check's minimum, hence the third.
        self._set("parquet.block.size.row.check.min", "3")
        self._set("parquet.row-group.size.row.check.min", "3")
        self._set("parquet.page.size.row.check.min", "3")
        if row_group_size_mb:
            self._set("parquet.block.size", str(int(row_group_size_mb) * 1024 * 1024))

    def _set(self, key: str, value: str) -> None:
        self._saved[key] = self._conf.get(key, None)
        self._conf.set(key, value)

    def restore(self) -> None:
        for key, value in self._saved.items():
            if value is None:
                self._conf.unset(key)
            else:
                self._conf.set(key, value)


@contextmanager
def materialize_dataset(spark: Any, dataset_url: str, schema: Unischema, row_group_size_mb: int | None = None,
                        use_summary_metadata: bool = False, filesystem_factory: Any = None) -> Iterator[None]:
    """Wrap the Spark write of a Petastorm dataset; on exit, write its metadata.

    >>> with materialize_dataset(spark, url, MySchema, row_group_size_mb=64):
    ...     spark.createDataFrame(rows, MySchema.as_spark_schema()).write.parquet(url)

    :param spark: the SparkSession (classic or Spark Connect) doing the write.
    :param dataset_url: where the block writes the Parquet files (any fsspec URL or a path).
    :param schema: the dataset's Unischema, stored in ``_common_metadata``.
    :param row_group_size_mb: Parquet row-group size (``parquet.block.size``) for the block's writes.
    :param use_summary_metadata: have Spark write the ``_metadata`` summary file (row groups of
        every file) instead of storing the row-group counts in ``_common_metadata``.
    :param filesystem_factory: a callable returning the filesystem the metadata is written with:
        an fsspec filesystem or a ``pyarrow.fs.FileSystem`` (default: from the URL).
    If the block raises, the Spark settings are restored and no metadata is written.
    """
    if not isinstance(schema, Unischema):
        raise InvalidArgumentTypeError(f"materialize_dataset: schema must be a Unischema, got {type(schema).__name__}")
    settings = _ParquetSettings(spark, row_group_size_mb, use_summary_metadata)
    try:
        yield
        filesystem = filesystem_factory() if filesystem_factory is not None else None
        location = locate(dataset_url, filesystem=filesystem, argument="filesystem_factory()")
        write_dataset_metadata(location, schema, use_summary_metadata)
    finally:
        settings.restore()


def write_dataset_metadata(location: Any, schema: Unischema, use_summary_metadata: bool = False) -> None:
    """Add the Unischema (and, unless a ``_metadata`` summary lists them, the row groups per
    file) to the ``_common_metadata`` of the Parquet dataset at ``location``."""
    found = files.dataset_files(location)
    pieces = list(found)
    if not pieces:
        raise PetastormMetadataGenerationError(
            f"materialize_dataset: no Parquet files under {location.url}; write the dataset to this URL "
            "inside the with-block (e.g. df.write.parquet(url))")
    existing = next(((name, files.read_footer(location, name))
                     for name in (files.COMMON_METADATA, files.SUMMARY_METADATA) if location.exists(name)), None)
    base = (existing[1] if existing else files.read_footer(location, pieces[0])).schema.to_arrow_schema()
    entries = {UNISCHEMA_KEY: petastorm_dumps(schema)}
    summary = files.summary_counts(location) if use_summary_metadata else None
    if summary is None:
        if use_summary_metadata:
            logger.warning("materialize_dataset: Spark wrote no _metadata summary file with row groups; "
                           "storing the row groups per file in _common_metadata instead")
        counts = files.row_groups_per_file(location, found)
        entries[ROW_GROUPS_PER_FILE_KEY] = json.dumps(counts).encode()
    files.write_common_metadata(location, base, entries)


# -- reading ------------------------------------------------------------------------------------

def _key_value_metadata(dataset: Any) -> dict[bytes, bytes] | None:
    if isinstance(dataset, (str, os.PathLike)):
        found = files.read_key_value_metadata(locate(dataset))
        return None if found is None else found[1]
    if hasattr(dataset, "common_metadata"):  # pyarrow's legacy ParquetDataset
        meta = dataset.common_metadata
        return None if meta is None else dict(meta.metadata or {})
    if isinstance(dataset, Location):
        found = files.read_key_value_metadata(dataset)
        return None if found is None else found[1]
    raise InvalidArgumentTypeError(f"expected the dataset's URL or path, got {type(dataset).__name__}")


def schema_from_metadata(metadata: dict[bytes, bytes] | None) -> Unischema:
    if metadata is None:
        raise PetastormMetadataError("Could not find _common_metadata file." + _GENERATE_HINT)
    if UNISCHEMA_KEY not in metadata:
        raise PetastormMetadataError(
            "Could not find the unischema in the dataset common metadata file. Please provide or generate "
            "dataset with the unischema attached." + _GENERATE_HINT)
    return restricted_loads(metadata[UNISCHEMA_KEY])


def get_schema(dataset: Any) -> Unischema:
    """The Unischema stored in a Petastorm dataset's metadata (``dataset``: its URL or path)."""
    return schema_from_metadata(_key_value_metadata(dataset))


def _dataset_root(urls: list[str], storage_options: dict | None, filesystem: Any) -> Any:
    """The directory holding the metadata: the URL itself, or for a list of file URLs, the
    nearest directory above the first one that has a metadata file."""
    if len(urls) == 1:
        location = locate(urls[0], storage_options, filesystem)
        if not location.exists() or location.isdir():
            return location
    url = urls[0].rstrip("/")
    for _ in range(3):
        url = url.rsplit("/", 1)[0]
        location = locate(url, storage_options, filesystem)
        if location.exists(files.COMMON_METADATA) or location.exists(files.SUMMARY_METADATA):
            return location
    return locate(urls[0].rstrip("/").rsplit("/", 1)[0], storage_options, filesystem)


def get_schema_from_dataset_url(dataset_url_or_urls: Any, hdfs_driver: str = "libhdfs3",
                                storage_options: dict | None = None, filesystem: Any = None) -> Unischema:
    """The Unischema of the dataset at a URL (or of the dataset a list of its file URLs belongs to).

    ``hdfs_driver``: pyarrow reads ``hdfs://`` through libhdfs (JNI) whichever is named; its
    libhdfs3 driver no longer exists. ``storage_options`` go to fsspec; ``filesystem`` may be an
    fsspec or ``pyarrow.fs`` filesystem.
    """
    urls = [dataset_url_or_urls] if isinstance(dataset_url_or_urls, (str, os.PathLike)) else list(dataset_url_or_urls)
    if not urls:
        raise ValueError("dataset url list must be non-empty.")
    location = _dataset_root([os.fspath(u) for u in urls], storage_options, filesystem)
    found = files.read_key_value_metadata(location)
    return schema_from_metadata(None if found is None else found[1])


def infer_or_load_unischema(dataset: Any, storage_options: dict | None = None) -> Unischema:
    """The stored Unischema, or one inferred from the Parquet schema for a dataset Petastorm did
    not write (``dataset``: its URL or path)."""
    try:
        return get_schema(dataset)
    except PetastormMetadataError:
        logger.info("Failed loading Unischema from metadata in %s. Assuming the dataset was not created with "
                    "Petastorm. Will try to construct from native Parquet schema.", dataset)
    if not isinstance(dataset, (str, os.PathLike)):
        return Unischema.from_arrow_schema(dataset)
    import pyarrow.dataset as pads

    location = locate(dataset, storage_options)
    arrow_dataset = pads.dataset(location.path, filesystem=location.fs, format="parquet", partitioning="hive")
    return Unischema.from_arrow_schema(arrow_dataset)


def load_row_groups(dataset: Any, storage_options: dict | None = None, filesystem: Any = None) -> list[RowGroupPiece]:
    """The dataset's row groups in Petastorm's order (the positions row-group indexes use):
    from a ``_metadata`` summary listing them, else the row-group counts in ``_common_metadata``,
    else (no metadata file) the files' footers."""
    location = dataset if isinstance(dataset, Location) else locate(dataset, storage_options, filesystem)
    found = files.dataset_files(location)
    counts = stored_row_groups(location, list(found))
    return files.pieces_from_counts(counts if counts is not None else files.row_groups_per_file(location, found))


def stored_row_groups(location: Location, names: list[str],
                      found: tuple[str, dict[bytes, bytes]] | None | EllipsisType = ...) -> dict[str, int] | None:
    """``{file: row groups}`` for the dataset's files ``names`` (relative paths) as its metadata
    records them: a ``_metadata`` summary listing them, else the counts ``materialize_dataset``
    stored in ``_common_metadata``; None when the dataset has no metadata file (the footers
    tell). Petastorm's positions of row groups are these. ``found``: the dataset's
    :func:`~.metadata_files.read_key_value_metadata`, when already read."""
    summary = files.summary_counts(location)
    if summary is not None:
        return {p: summary[p] for p in names if p in summary}
    if isinstance(found, EllipsisType):
        found = files.read_key_value_metadata(location)
    if found is None:
        return None
    if ROW_GROUPS_PER_FILE_KEY not in found[1]:
        raise PetastormMetadataError(
            "Could not find row group metadata in _common_metadata file." + _GENERATE_HINT)
    counts = files.json_counts(found[1][ROW_GROUPS_PER_FILE_KEY])
    unknown = [p for p in names if p not in counts]
    if unknown:
        raise PetastormMetadataError(
            f"Parquet files {unknown[:3]} of {location.url} are not in the row-group metadata written by "
            "materialize_dataset (files added afterwards?); rewrite the dataset inside materialize_dataset")
    return {p: counts[p] for p in names}
