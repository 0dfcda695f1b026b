"""``DeltaSource``: one snapshot of a Delta table, read as Parquet files.

The snapshot (:mod:`petastream.delta.log`) names the data files, their partition values and
deletion vectors; the files are then planned and read by :class:`~petastream.parquet.ParquetSource`
(this class is one, with its plan made from the log instead of a directory listing), so
projection, filters, shards, the shard cache, read-ahead and pickling are the Parquet source's:

* partition values come from the log, typed as the table's schema says (not from directory
  names; dates and timestamps read as a file column of that type reads: int64 nanoseconds);
* column mapping (``name`` and ``id``): the files' physical column names are served as the
  table's logical names (``id`` mode is read by physical name, the name every writer we know
  of gives the files' columns);
* deletion vectors: each file's deleted rows are removed from the plan's row selections at
  open (as a filter's are), so a deleted row is never read into a batch;
* ``filters`` (pyarrow DNF, logical names): files are first pruned by delta-rs on the log's
  partition values and statistics, then row groups and rows as for Parquet. A
  ``pyarrow.compute`` Expression is applied to the files (not pruned by the log), and is
  refused on a column-mapped table (its names would be the files' physical ones).

The snapshot is pinned at open (``version``, recorded in :attr:`DeltaSource.snapshot` and in a
loader's ``state_dict``): later commits to the table do not change what this source serves.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from petastream.capabilities import Pinned
from petastream.delta.log import DeltaFile, Snapshot, open_snapshot
from petastream.errors import DatasetNotFoundError, InvalidArgumentError, StorageError
from petastream.parquet.discover import Discovery, ParquetFileRef, listing
from petastream.parquet.filters import to_expression
from petastream.parquet.plan import Columns, Plan, make_plan, restrict
from petastream.parquet.source import ParquetSource
from petastream.storage.location import Location, resolve

__all__ = ["DeltaSource"]


def _discovery(loc: Location, snap: Snapshot) -> Discovery:
    """The snapshot's files as a Parquet discovery (each checked present: a vacuumed file is
    an error at open, not a short epoch)."""
    tags = listing(loc)
    refs = []
    for f in snap.files:
        if "://" in f.path:
            raise DatasetNotFoundError(
                f"{snap.describe()} holds a file outside its directory ({f.path}: a shallow clone?); "
                "petastream reads files under the table's root only")
        child = loc.child(f.path)
        try:
            size, tag = tags(child.path)
        except (StorageError, OSError) as e:
            raise DatasetNotFoundError(
                f"{snap.describe()}: its data file {f.path} is missing ({e}); was the table vacuumed "
                "past this version? Read a version whose files are kept (version=...), or the latest") from e
        # The log's row count and null counts let the Parquet plan skip this file's footer at
        # open (small files, no filters: plan.make_plan), so a table of many files opens fast.
        refs.append(ParquetFileRef(child.url, child.path, 0, size, tag, f.partition, f.num_records, f.null_counts))
    return Discovery([loc], refs, list(snap.partition_fields), dict(snap.column_names))


def _physical_filters(filters: Any, snap: Snapshot) -> Any:
    """``filters`` over the files' column names (column mapping), or as given."""
    if filters is None or not snap.column_names:
        return filters
    import pyarrow.compute as pc

    if isinstance(filters, pc.Expression):
        raise InvalidArgumentError(
            f"{snap.describe()} maps its columns to physical names (delta.columnMapping.mode="
            f"{snap.mapping_mode}): pass filters as a DNF list [(column, op, value), ...] (its names "
            "are mapped), not a pyarrow.compute Expression")
    parts = {n for n, _ in snap.partition_fields}  # partition columns keep their logical names
    stored = {v: k for k, v in snap.column_names.items() if v not in parts}
    groups = filters if filters and isinstance(filters[0], list) else [filters]
    mapped = [[(stored.get(c, c), op, v) for c, op, v in group] for group in groups]
    return mapped if filters and isinstance(filters[0], list) else mapped[0]


def _dnf(filters: Any) -> Any:
    """``filters`` when a DNF list (what the log's file pruning takes), else None."""
    if isinstance(filters, Sequence) and not isinstance(filters, (str, bytes)) and filters:
        return list(filters)
    return None


def _unit_keep(file: DeltaFile, first_row: int, total_rows: int, selection: np.ndarray | None) -> bool | np.ndarray:
    """What a row group keeps of its current selection once its file's deletion vector is
    applied (True: all of it; False: none)."""
    if file.keep is None:
        return True
    seg = np.ones(total_rows, dtype=bool)
    part = file.keep[first_row:first_row + total_rows]
    seg[:len(part)] = part
    kept = seg if selection is None else seg[selection]
    return True if kept.all() else (False if not kept.any() else kept)


def _apply_deletions(plan: Plan, snap: Snapshot, rows_per_shard: int | None) -> Plan:
    if not any(f.keep is not None for f in snap.files):
        return plan
    keep = [_unit_keep(snap.files[u.file], u.first_row, u.total_rows, u.selection()) for u in plan.units]
    return restrict(plan, keep, rows_per_shard)


class DeltaSource(ParquetSource, Pinned):
    """One snapshot of a Delta table (see the module doc), read as a
    :class:`~petastream.parquet.ParquetSource`.

    ``url``: the table's root (local path or fsspec URL; ``storage_options`` for fsspec).
    ``version`` / ``timestamp``: the snapshot read (default: the latest); ``timestamp`` is a
    ``datetime`` (naive: UTC) or an ISO 8601 string, the last version committed at or before it.
    ``delta_storage_options``: options for delta-rs's object store, which reads the log
    (``AWS_ENDPOINT_URL``, ``AWS_ALLOW_HTTP``, ...; default: its environment variables).
    ``columns``, ``filters``, ``rows_per_shard``, ``array_lengths``, ``fetch`` and the rest:
    as :class:`~petastream.parquet.ParquetSource` (column names are the table's logical names).
    """

    def __init__(
        self,
        url: str | os.PathLike,
        *,
        version: int | None = None,
        timestamp: Any = None,
        columns: Columns = None,
        filters: Any = None,
        storage_options: dict | None = None,
        delta_storage_options: Mapping[str, str] | None = None,
        rows_per_shard: int | None = None,
        array_lengths: Mapping[str, int | None] | None = None,
        null_policy: str = "error",
        fetch: str = "auto",
        **options: Any,
    ):
        #: What opens this table again at another version (:meth:`at_snapshot`).
        self.options = dict(columns=columns, filters=filters, storage_options=storage_options,
                            delta_storage_options=delta_storage_options, rows_per_shard=rows_per_shard,
                            array_lengths=array_lengths, null_policy=null_policy, fetch=fetch, **options)
        loc = resolve(url, storage_options)
        snap = open_snapshot(loc, version=version, timestamp=timestamp,
                             storage_options=dict(delta_storage_options) if delta_storage_options else None,
                             prune=_dnf(filters))
        if not snap.files:
            raise DatasetNotFoundError(f"{snap.describe()} has no data files (an empty table)")
        discovery = _discovery(loc, snap)
        plan = make_plan(discovery, columns=snap.columns if columns is None else columns if callable(columns) else list(columns),
                         expr=to_expression(_physical_filters(filters, snap)), rows_per_shard=rows_per_shard,
                         array_lengths=dict(array_lengths or {}), null_policy=null_policy, fetch=fetch)
        plan = _apply_deletions(plan, snap, rows_per_shard)
        super().__init__(loc.url, plan=plan, storage_options=storage_options, null_policy=null_policy, **options)
        #: The table version read.
        self.version = snap.version
        #: Rows its deletion vectors remove (from the files read).
        self.deleted_rows = snap.deleted_rows

    @property
    def snapshot(self) -> dict[str, Any]:
        """What this source reads, as a loader's ``state_dict`` records it: the table and version."""
        return {"format": "delta", "table": self.plan.root_urls[0], "version": self.version}

    def at_snapshot(self, snapshot: Mapping[str, Any]) -> DeltaSource:
        """This table, opened with the same options at the version ``snapshot`` records (what
        a loader resuming a ``state_dict`` saved on that version reads)."""
        table, version = snapshot.get("table"), snapshot.get("version")
        if snapshot.get("format") != "delta" or table != self.plan.root_urls[0] or not isinstance(version, int):
            raise InvalidArgumentError(f"snapshot {dict(snapshot)} is not a version of the Delta table "
                                       f"{self.plan.root_urls[0]}")
        return DeltaSource(table, version=version, **self.options)

    def __repr__(self) -> str:
        return (f"DeltaSource({self.url!r}, version={self.version}, rows={len(self)}, "
                f"files={len(self.plan.files)}, columns={self.columns})")
