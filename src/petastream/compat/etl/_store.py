"""A Petastorm dataset's files: its Parquet pieces, row groups and ``_common_metadata``.

Petastorm (through pyarrow's legacy ``ParquetDataset``) counts as a piece every file under the
dataset directory, hive partition directories included, except names starting with ``_`` or
``.`` (``_SUCCESS``, ``_common_metadata``, Spark's ``.crc`` files, ``_temporary/``) and
``*_$folder$`` markers; pieces are ordered by path and split into row groups in file order.
That order is what Petastorm's row-group indexes (``rowgroup_selector``) refer to, so it is
reproduced exactly here.
"""

from __future__ import annotations

import io
import json
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

from petastream.errors import InvalidArgumentTypeError
from petastream.storage.location import Location, resolve

__all__ = ["Location", "RowGroupPiece", "locate", "list_pieces", "read_key_value_metadata", "row_groups_per_file",
           "footer", "open_file", "write_common_metadata", "partition_keys", "pieces_from_counts", "json_counts",
           "summary_counts", "COMMON_METADATA", "SUMMARY_METADATA"]

COMMON_METADATA = "_common_metadata"
SUMMARY_METADATA = "_metadata"


class RowGroupPiece(NamedTuple):
    """One row group of the dataset: ``path`` relative to the dataset root ('/'-separated),
    ``row_group`` in that file, ``partition_keys`` ((name, value) of its hive directories)."""

    path: str
    row_group: int
    partition_keys: tuple[tuple[str, str], ...] = ()


def _as_fsspec(filesystem: Any, argument: str) -> Any:
    """An fsspec filesystem for a ``filesystem`` argument: fsspec's own or a ``pyarrow.fs`` one."""
    import fsspec

    if isinstance(filesystem, fsspec.AbstractFileSystem):
        return filesystem
    import pyarrow.fs

    if isinstance(filesystem, pyarrow.fs.FileSystem):
        from fsspec.implementations.arrow import ArrowFSWrapper

        return ArrowFSWrapper(filesystem)
    raise InvalidArgumentTypeError(
        f"{argument}: expected an fsspec filesystem or a pyarrow.fs.FileSystem, got "
        f"{type(filesystem).__module__}.{type(filesystem).__name__} (pyarrow's legacy "
        "pyarrow.filesystem classes are gone since pyarrow 15); pass storage_options instead, or a "
        "pyarrow.fs.FileSystem")


def locate(dataset_url: str | os.PathLike, storage_options: dict | None = None,
           filesystem: Any = None, argument: str = "filesystem") -> Location:
    """The dataset directory of ``dataset_url``, on ``filesystem`` if one is given (``argument``
    names where it came from in an error)."""
    url = os.fspath(dataset_url)
    if filesystem is None:
        return resolve(url, storage_options)
    fs = _as_fsspec(filesystem, argument)
    return Location(url.rstrip("/"), fs._strip_protocol(url).rstrip("/"), fs)


def _excluded(name: str) -> bool:
    return name.startswith(("_", ".")) or name.endswith("_$folder$")


def list_pieces(location: Location) -> list[str]:
    """The dataset's Parquet files, relative to its root, in Petastorm's (path) order."""
    found: list[str] = []

    def visit(where: Location, prefix: str) -> None:
        for name in where.listdir():
            if _excluded(name):
                continue
            child = where.child(name)
            if child.isdir():
                visit(child, f"{prefix}{name}/")
            else:
                found.append(prefix + name)

    visit(location, "")
    return sorted(found)


def partition_keys(relative_path: str) -> tuple[tuple[str, str], ...]:
    """``(('split', 'train'),)`` for ``'split=train/part-0.parquet'``."""
    keys = []
    for part in relative_path.split("/")[:-1]:
        if "=" in part:
            name, value = part.split("=", 1)
            keys.append((name, value))
    return tuple(keys)


def open_file(location: Location, name: str) -> Any:
    local = location.local_file(name)
    return open(local, "rb") if local is not None else location.fs.open(location._join(name), "rb")


def footer(location: Location, name: str) -> pq.FileMetaData:
    """The Parquet footer of ``name`` (only its last bytes are read)."""
    with open_file(location, name) as f:
        return pq.read_metadata(f)


def read_key_value_metadata(location: Location) -> tuple[str, dict[bytes, bytes]] | None:
    """(file name, key-value metadata) of ``_common_metadata``, else of ``_metadata``; None if the
    dataset has neither."""
    for name in (COMMON_METADATA, SUMMARY_METADATA):
        if location.exists(name):
            return name, dict(footer(location, name).metadata or {})
    return None


def row_groups_per_file(location: Location, pieces: list[str],
                        threads: int = 16) -> dict[str, int]:
    """``{relative path: number of row groups}``, read from the footers, a few at a time."""
    if not pieces:
        return {}
    with ThreadPoolExecutor(max(1, min(threads, len(pieces)))) as pool:
        counts = list(pool.map(lambda p: footer(location, p).num_row_groups, pieces))
    return dict(zip(pieces, counts))


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
    meta = footer(location, SUMMARY_METADATA)
    if meta.num_row_groups == 0:
        return None
    counts: dict[str, int] = {}
    for i in range(meta.num_row_groups):
        path = meta.row_group(i).column(0).file_path
        counts[path] = counts.get(path, 0) + 1
    return counts

