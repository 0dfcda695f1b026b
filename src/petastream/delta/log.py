"""One snapshot of a Delta table, from its transaction log.

The log is read by ``deltalake`` (delta-rs): JSON commits, checkpoints (classic and v2),
log compaction, time travel by version or timestamp. What we take from it is a
:class:`Snapshot`, a plain value: the table's schema (logical names), its partition columns, the
data files of that version with their partition values (typed as the schema says), the
physical-to-logical column names of column mapping, and each file's deletion vector as a keep
mask (read by :mod:`petastream.delta.deletion_vectors` from the log's descriptors). The data
files are then read by our Parquet source.

Reader features: a table whose protocol asks a reader for a feature not in
:data:`READER_FEATURES` is refused at open (:class:`UnsupportedFeatureError`, naming the table,
version and feature): serving its files as plain Parquet could serve rows a Delta reader would
not (or values it would read differently).
"""

from __future__ import annotations

import datetime
import os
import posixpath
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlparse

import numpy as np

from petastream._extras import require
from petastream.delta.deletion_vectors import (
    arrow_table,
    check_deltalake_usable,
    deltalake_keep_masks,
    log_keep_masks,
)
from petastream.errors import (
    DatasetNotFoundError,
    FormatError,
    InternalError,
    InvalidArgumentError,
    UnsupportedFeatureError,
)
from petastream.parquet.discover import is_delta_table
from petastream.storage.location import Location

__all__ = ["READER_FEATURES", "DeltaFile", "Snapshot", "UnsupportedFeatureError", "is_delta_table",
           "open_snapshot", "same_file"]

#: Reader features we honour: deletion vectors (applied), column mapping (``name`` and ``id``:
#: logical names), timestamps without time zone (read as timestamps are), v2 checkpoints and
#: the vacuum protocol check (the log's business, handled by deltalake).
READER_FEATURES = frozenset({"deletionVectors", "columnMapping", "timestampNtz", "v2Checkpoint",
                             "vacuumProtocolCheck"})
#: Highest reader version we read (3: reader features listed by name).
MAX_READER_VERSION = 3


@dataclass(frozen=True)
class DeltaFile:
    """One data file of a snapshot."""

    #: Path relative to the table root (decoded), or an absolute URL (shallow clones).
    path: str
    size: int
    #: Partition values, in :attr:`Snapshot.partition_fields` order (None: null).
    partition: tuple[Any, ...] = ()
    #: Rows kept (False: deleted by the file's deletion vector); None: no deletion vector.
    keep: np.ndarray | None = field(default=None, compare=False, repr=False)
    #: Rows it holds and its columns' null counts, from the log's statistics (``numRecords``,
    #: ``nullCount``: top-level columns, as the log names them); None / () where not recorded.
    num_records: int | None = None
    null_counts: tuple[tuple[str, int], ...] = ()


@dataclass
class Snapshot:
    """What a Delta table holds at one version (see the module doc)."""

    table: str
    version: int
    files: list[DeltaFile]
    #: The table's data columns (not partition columns): (logical name, Arrow type), in schema order.
    fields: list[tuple[str, Any]]
    partition_fields: list[tuple[str, Any]]
    #: ``{physical name: logical name}`` under column mapping (empty: none).
    column_names: dict[str, str]
    mapping_mode: str = "none"
    #: Every column (data and partition), in the table schema's order.
    columns: list[str] = field(default_factory=list)

    @property
    def deleted_rows(self) -> int:
        return sum(int((~f.keep).sum()) for f in self.files if f.keep is not None)

    def describe(self) -> str:
        return f"Delta table {self.table} at version {self.version}"


def _deltalake(url: str) -> Any:
    return require("deltalake", f"reading the Delta table at {url}")


def _load(url: str, version: int | None, timestamp: Any, options: dict[str, str] | None) -> Any:
    deltalake = _deltalake(url)
    check_deltalake_usable(url)
    if version is not None and timestamp is not None:
        raise InvalidArgumentError(f"{url}: give version= or timestamp=, not both")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 0):
        raise InvalidArgumentError(f"version={version!r}: a Delta table version is an int >= 0")
    if timestamp is not None and not isinstance(timestamp, (str, datetime.datetime)):
        raise InvalidArgumentError(
            f"timestamp={timestamp!r}: give a datetime (naive: UTC) or an ISO 8601 string")
    try:
        table = deltalake.DeltaTable(url, version=version, storage_options=options)
    except Exception as e:  # noqa: BLE001 - delta-rs raises its own classes (TableNotFoundError, DeltaError...)
        what = f"version {version} of " if version is not None else ""
        if "not supported" in str(e).lower() or "unsupported" in str(e).lower():
            raise UnsupportedFeatureError(
                f"{what}the Delta table at {url} needs a feature its log reader (delta-rs) does not "
                f"support, so petastream refuses it too: {e}") from e
        latest = _latest(deltalake, url, options) if version is not None else None
        hint = f" (its latest version is {latest})" if latest is not None else ""
        raise DatasetNotFoundError(f"cannot open {what}the Delta table at {url}{hint}: {e}") from e
    if timestamp is not None:
        try:
            table.load_as_version(timestamp)
        except Exception as e:  # noqa: BLE001 - as above
            raise DatasetNotFoundError(
                f"the Delta table at {url} has no version at or before timestamp {timestamp!r}: {e}") from e
    return table


def _latest(deltalake: Any, url: str, options: dict[str, str] | None) -> int | None:
    try:
        return int(deltalake.DeltaTable(url, storage_options=options).version())
    except Exception:  # noqa: BLE001 - only a hint for a message
        return None


def _check_protocol(table: Any, url: str) -> str:
    """The column mapping mode, once the protocol asks for nothing we do not honour."""
    version = table.version()
    protocol = table.protocol()
    config = table.metadata().configuration or {}
    where = f"Delta table {url} at version {version}"
    if protocol.min_reader_version > MAX_READER_VERSION:
        raise UnsupportedFeatureError(
            f"{where} needs reader version {protocol.min_reader_version}; petastream reads up to "
            f"{MAX_READER_VERSION}: read an older version (version=...), or upgrade petastream")
    unknown = sorted(set(protocol.reader_features or ()) - READER_FEATURES)
    if unknown:
        raise UnsupportedFeatureError(
            f"{where} needs reader feature(s) {unknown}, which petastream does not honour (it "
            f"honours {sorted(READER_FEATURES)}); serving its files could serve rows or values a "
            "Delta reader would not: read it with Spark or deltalake instead, or a version before "
            "the feature was enabled")
    mode = str(config.get("delta.columnMapping.mode", "none")).lower()
    if mode not in ("none", "name", "id"):
        raise UnsupportedFeatureError(f"{where} has delta.columnMapping.mode={mode!r}; petastream reads "
                                      "'none', 'name' and 'id'")
    return mode


def _arrow_fields(table: Any) -> list[tuple[str, Any, dict]]:
    import pyarrow as pa

    schema = pa.schema(table.schema().to_arrow())
    meta = {f.name: dict(f.metadata or {}) for f in table.schema().fields}
    return [(f.name, f.type, meta.get(f.name, {})) for f in schema]


def _renames(fields: list[tuple[str, Any, dict]], mode: str) -> dict[str, str]:
    if mode == "none":
        return {}
    out = {}
    for name, _, meta in fields:
        physical = meta.get("delta.columnMapping.physicalName")
        if physical and physical != name:
            out[str(physical)] = name
    return out


def same_file(a: str) -> str:
    """A file's location, normalized for matching one form against another (scheme dropped,
    percent-encoding undone at every level): how deltalake's URIs are matched to the log's
    paths. Its ``file_uris()`` gives disk paths, its ``deletion_vectors()`` URL-encoded URIs,
    the log URL-encoded relative paths (of disk names that are themselves escaped, ``x%2Fy``)."""
    parsed = urlparse(a)
    path = parsed.netloc + parsed.path if parsed.scheme and len(parsed.scheme) > 1 else a
    while True:
        decoded = unquote(path)
        if decoded == path:
            break
        path = decoded
    return posixpath.normpath(path.replace(os.sep, "/")).lstrip("/")


def _keep_masks(table: Any, loc: Location, files: dict[str, int | None], keys: dict[str, str],
                n: int) -> dict[str, np.ndarray]:
    """Keep masks (rows past a mask's end are kept) of those of ``files`` (add path -> rows)
    with a deletion vector, by the key of each file (``keys``: key -> add path, every file): read from the log's descriptors, or, where
    the log needs deltalake (multi-part or v2 checkpoints...), by deltalake, bounded in time."""
    version = int(table.version())
    masks, why = log_keep_masks(loc, version, files)
    if masks is not None:
        key_of = {path: key for key, path in keys.items()}
        return {key_of[path]: keep for path, keep in masks.items()}
    known = set(keys)
    out = {same_file(path): keep for path, keep in deltalake_keep_masks(table, loc.url, version, n, why).items()}
    unmatched = sorted(set(out) - known)
    if unmatched:  # a deletion vector must never be dropped for want of its file
        raise InternalError(f"Delta table {loc.url}: deletion vectors for {unmatched[:3]} match no data file "
                            "of the snapshot; please report this")
    return out


def _struct_fields(actions: Any, name: str) -> dict[str, Any]:
    """The fields of the add actions' struct column ``name`` (none: {}), each an Arrow array
    null where the struct is (a file without statistics)."""
    import pyarrow as pa

    if name not in actions.column_names or not pa.types.is_struct(actions.schema.field(name).type):
        return {}
    column = actions.column(name).combine_chunks()
    return {f.name: child for f, child in zip(column.type, column.flatten())}


def _pruned(table: Any, prune: Any) -> set[str] | None:
    """The files delta-rs keeps for the DNF filter ``prune`` (by partition values and log
    statistics); None where it keeps none (the Parquet filter then finds the source empty, with
    the schema of a file) or cannot evaluate the filter (the files' own filtering still runs)."""
    try:
        kept = {same_file(u) for u in table.file_uris(file_pruning_predicate=prune)}
    except Exception:  # noqa: BLE001 - an optimization: the row-group and row filters are exact
        return None
    return kept or None


def open_snapshot(loc: Location, *, version: int | None = None, timestamp: Any = None,
                  storage_options: dict[str, str] | None = None, prune: Any = None) -> Snapshot:
    """The snapshot of the Delta table at ``loc`` (latest, or ``version`` / ``timestamp``).
    ``prune``: a DNF filter (logical names) whose files are kept by the log's partition values
    and statistics (delta-rs's file pruning); None: every file."""
    import pyarrow as pa

    table = _load(loc.url, version, timestamp, storage_options)
    mode = _check_protocol(table, loc.url)
    partition_names = list(table.metadata().partition_columns or [])
    fields = _arrow_fields(table)
    types = {n: t for n, t, _ in fields}
    actions = arrow_table(table.get_add_actions(flatten=False))
    paths = actions.column("path").to_pylist()
    n = len(paths)
    sizes = actions.column("size_bytes").to_pylist()
    records = actions.column("num_records").to_pylist() if "num_records" in actions.column_names else [None] * n
    # Partition values and null counts a column at a time (a dict per file was most of the
    # log's share of opening 10,000 files); nested columns' counts are not kept.
    given = _struct_fields(actions, "partition")
    values_of = list(zip(*(given[p].to_pylist() if p in given else [None] * n for p in partition_names))) \
        if partition_names else [()] * n
    counts = [(name, col.to_pylist()) for name, col in _struct_fields(actions, "null_count").items()
              if pa.types.is_integer(col.type)]
    root = same_file(loc.url)
    kept = _pruned(table, prune) if prune is not None else None
    dv = "deletionVectors" in (table.protocol().reader_features or ())
    chosen, keys = [], {}
    match = dv or kept is not None  # keys only where a file is looked up (10k files: ~0.1 s)
    for i, path in enumerate(paths):
        absolute = "://" in path and bool(urlparse(path).scheme)
        rel = path if absolute else unquote(path)  # the log's paths are URL-encoded
        key = (same_file(path) if absolute else same_file(f"{root}/{path}")) if match else rel
        if key in keys:  # only names that differ in their escaping alone: never written by Delta writers
            raise FormatError(f"Delta table {loc.url}: two data files match {key}; cannot tell their "
                              "deletion vectors apart")
        keys[key] = path
        if kept is None or key in kept:
            chosen.append((i, path, rel, key))
    # Only the files kept by the pruning get their vectors read.
    masks = _keep_masks(table, loc, {path: records[i] for i, path, _, _ in chosen},
                        keys, n) if dv else {}
    files = []
    for i, _, rel, key in chosen:
        known = tuple((name, of[i]) for name, of in counts if of[i] is not None)
        count = records[i]
        files.append(DeltaFile(rel, int(sizes[i]), values_of[i], masks.get(key),
                               None if count is None else int(count), known))
    files.sort(key=lambda f: f.path)
    return Snapshot(
        table=loc.url, version=int(table.version()), files=files,
        fields=[(n, t) for n, t, _ in fields if n not in partition_names],
        partition_fields=[(n, types[n]) for n in partition_names],
        column_names=_renames(fields, mode), mapping_mode=mode, columns=[n for n, _, _ in fields])
