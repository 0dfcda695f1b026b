"""Loading one row group of a :class:`~petastream.parquet.source.ParquetSource`: its decoded
copy from the shard cache (:mod:`~.decoded`), or its Parquet bytes (in place, or through the
cache: :mod:`~.fetch`) read with pyarrow, its kept rows selected and its columns converted
(:mod:`~.convert`).

A loaded row group (:class:`Loaded`) holds its fixed-size columns (numbers, booleans, dates,
timestamps, fixed-size arrays) packed row by row, as an MDS shard stores them: a shuffled read
gathers each row once rather than once per column, and cuts the columns out of the gathered
rows (:func:`petastream.columns.ops.split_rows`). Its other columns stay as
:func:`~.convert.prepare` makes them.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence
from typing import Any, BinaryIO

import numpy as np

from petastream.columns.ops import pack_rows
from petastream.errors import CorruptShardError
from petastream.parquet import decoded as decoded_cache
from petastream.parquet.convert import Text, constant, prepare
from petastream.parquet.fetch import FilePins, Placement
from petastream.parquet.kept_objects import KeptObjects
from petastream.parquet.plan import WHOLE_FILE, Plan, Unit, check_file
from petastream.storage.cache import ShardCache
from petastream.storage.counters import IO
from petastream.storage.shards import ShardStore
from petastream.storage.sizes import human

__all__ = ["Loaded", "RowGroups", "PACKED_KINDS"]

#: Column kinds (:class:`~petastream.parquet.types.ColumnSpec`) of numpy values of one size.
PACKED_KINDS = ("plain", "bool", "date", "timestamp", "fixed")
#: A row group whose selection keeps at least this share of its rows is loaded whole, its
#: other columns read through the kept rows' positions (:attr:`Loaded.index`): copying every
#: column but a few rows (a Delta table's deletion vectors) cost about as much as decoding the
#: row group's binary and string columns. A sparser selection is copied (the loaded row
#: group's memory estimate counts the kept rows: whole, it holds at most a third more).
WHOLE_AT = 0.75


class Loaded:
    """One loaded row group: its fixed-size columns as packed rows of the kept rows (one
    opaque ``V<row bytes>`` item per row), and its other columns (see
    :func:`~.convert.prepare`): of the kept rows, or of all the row group's rows where
    ``index`` (the kept rows' positions among them) is given (see :data:`WHOLE_AT`)."""

    __slots__ = ("packed", "columns", "index")

    def __init__(self, packed: np.ndarray, columns: dict[str, Any], index: np.ndarray | None = None):
        self.packed = packed
        self.columns = columns
        self.index = index

    def at(self, rows: np.ndarray | slice) -> np.ndarray | slice:
        """Where kept rows ``rows`` are in :attr:`columns`."""
        return rows if self.index is None else self.index[rows]


class RowGroups:
    """Loads the row groups of ``plan`` (see the module doc): the units of a
    :class:`~petastream.storage.shards.ShardStore` (a :class:`~petastream.storage.shards.ShardLoader`).

    ``cache_decoded``: True, False, or None for the files read through the cache only.
    ``strings``: how ``str``/``bytes`` columns are prepared, ``"objects"`` or ``"ragged"``.
    """

    def __init__(self, plan: Plan, placement: Placement, cache: ShardCache, cache_limit: int | None,
                 null_policy: str, cache_decoded: bool | None):
        self.plan, self.placement, self.cache = plan, placement, cache
        self.cache_limit, self.null_policy = cache_limit, null_policy
        self.strings = "objects"
        #: Cached files (``fetch="file"``) kept mapped while row groups of theirs are needed soon.
        self.pins = FilePins()
        self._specs = {s.name: s for s in plan.specs}
        #: How a loaded row group packs its fixed-size columns, and one packed row.
        self.packed_dtype = np.dtype([(s.name, s.dtype, s.shape) for s in plan.specs if s.kind in PACKED_KINDS])
        self.row_item = np.dtype((np.void, self.packed_dtype.itemsize))
        self._fixed = list(self.packed_dtype.names or ())
        self._others = [s.name for s in plan.specs if s.name not in self._fixed]
        #: Per unit: the cache key of its decoded copy, or None (not kept; see cache_decoded).
        self.decoded_keys = [
            decoded_cache.decoded_key(plan, u, self.packed_dtype, null_policy) if plan.read_columns and (
                cache_decoded or (cache_decoded is None and placement.local_path(u) is None)) else None
            for u in plan.units]
        self._metadata: dict[int, Any] = {}
        self._warned_room = False
        #: Whether loaded row groups may map cache entries (not to be held past a pass).
        self.cache_backed = not placement.all_in_place or any(k is not None for k in self.decoded_keys)
        #: The str/bytes objects of row groups read from decoded entries, kept between passes
        #: (the entries are unmapped at a pass's end; see :mod:`~.kept_objects`). Set by the source.
        self.kept_objects: KeptObjects | None = None

    # -- ShardLoader -------------------------------------------------------------------------
    def cost(self, u: int) -> tuple[int, bool]:
        return self.plan.units[u].decoded, True  # memory: bounded by memory_limit's budgets

    def inline(self, u: int) -> bool:
        return False  # a load decodes a row group: never in the asking thread

    def cache_keys(self, units: Sequence[int]) -> list[str]:
        keys = []
        for u in units:
            key = self.decoded_keys[u]
            if key is not None:
                keys.append(key)
            if self.placement.local_path(self.plan.units[u]) is None:
                keys.append(self.placement.key(self.plan.units[u]))
        return keys

    def load(self, u: int, wait: bool, store: ShardStore) -> Loaded | None:
        """Row group ``u``, loaded (None: ``wait`` False and no cache room for its bytes)."""
        strings = self.strings
        unit = self.plan.units[u]
        where = self.plan.files[unit.file].ref.url + (f", row group {unit.row_group}" if unit.row_group != WHOLE_FILE
                                                       else "")
        key = self.decoded_keys[u]
        buf = self.cache.open(key) if key is not None else None
        if key is not None and buf is not None:
            stored = [c for c in self._others if c in self.plan.read_columns]
            packed, table = decoded_cache.decode(self.cache.path(key), buf, unit.rows, self.row_item, stored, where)
            return Loaded(packed, self._prepare(unit, table, self._others, where, strings, key=key))
        found, table, keep = self._decode(unit, wait, where, store, whole=key is None)
        if not found:
            return None
        IO.add("row_groups_decoded")  # (once per row group: a lock, nanoseconds)
        rows = unit.rows if keep is None else unit.total_rows
        cols = self._prepare(unit, table, self._fixed + self._others, where, strings, rows,
                             key=key if keep is None else None)
        packed = pack_rows({name: cols.pop(name) for name in self._fixed}, self.packed_dtype)
        if len(packed) != rows:  # no fixed-size column: rows of no bytes
            packed = np.zeros(rows, self.row_item)
        if keep is not None:  # the fixed-size columns' kept rows (a cheap copy); the rest by index
            return Loaded(packed[keep], cols, np.flatnonzero(keep))
        if key is not None and table is not None:
            self._keep_decoded(key, packed, table.select([c for c in self._others if c in self.plan.read_columns]))
        return Loaded(packed, cols)

    def _prepare(self, unit: Unit, table: Any, names: list[str], where: str, strings: str,
                 rows: int | None = None, key: str | None = None) -> dict[str, Any]:
        """Columns ``names`` of a loaded row group (``rows`` of them: default its kept rows),
        converted for reads (see :func:`prepare`); ``key``: its decoded cache entry's, whose
        ``str``/``bytes`` objects are kept between passes (:attr:`kept_objects`)."""
        ref = self.plan.files[unit.file].ref
        cols = {}
        for name in names:
            spec = self._specs[name]
            if spec.partition:
                at = [n for n, _ in self.plan.partition_fields].index(spec.name)
                cols[name] = constant(spec, ref.partition[at], unit.rows if rows is None else rows,
                                      self.null_policy, where, self.plan.partition_fields[at][1])
            else:
                cols[name] = prepare(spec, table.column(name), self.null_policy, where)
            if key is not None and self.kept_objects is not None and isinstance(cols[name], Text):
                cols[name].keep_in(self.kept_objects, key, name)
            if strings == "objects" and isinstance(cols[name], Text):
                cols[name].objects()  # here, in the read-ahead thread, not in the reader's
        return cols

    def _keep_decoded(self, key: str, packed: np.ndarray, table: Any) -> None:
        """Store a decoded row group in the cache, if there is room now: keeping it is a saving
        for later reads, never worth waiting for."""
        parts = decoded_cache.encode(packed, table)
        size = sum(len(p) for p in parts)
        limit = self.cache_limit
        if limit is not None and size > limit // 2:
            if not self._warned_room:
                self._warned_room = True
                warnings.warn(
                    f"cache_decoded: a decoded row group of {human(size)} takes more than half of "
                    f"cache_limit={human(limit)}, so row groups are decoded again on every read; "
                    "raise cache_limit, or read smaller row groups", UserWarning, stacklevel=2)
            return

        def fill(f: BinaryIO) -> None:
            for part in parts:
                f.write(part)

        self.cache.get(key, size, fill, limit=limit, wait=False)

    def _decode(self, unit: Unit, wait: bool, where: str, store: ShardStore,
                whole: bool) -> tuple[bool, Any, np.ndarray | None]:
        """``(False, None, None)`` when ``wait`` is False and the cache has no room for
        ``unit``'s bytes; else ``(True, its decoded table, keep)`` (table None when only
        partition columns are read): the kept rows, or (``whole``, a selection keeping
        :data:`WHOLE_AT` of the rows or more) all rows and ``keep``, the selection."""
        import pyarrow as pa

        path = self.placement.local_path(unit)
        if path is not None:
            self.placement.check_in_place(unit, path)
            source: Any = pa.memory_map(path)
            footer = source
        else:
            size = self.placement.entry_bytes(unit)
            buf = self.cache.get(self.placement.key(unit), size, functools.partial(self.placement.fill, unit),
                                 limit=self.cache_limit, wait=wait,
                                 on_pressure=functools.partial(self._pressure, store, unit.file))
            if buf is None:
                return False, None, None
            self._pin(unit, buf, store)
            if len(buf) != size:
                raise CorruptShardError(f"{where}: its cache entry holds {len(buf)} bytes, not {size}; "
                                        "run `petastream cache prune --all` and read again")
            source = self.placement.source(unit, buf)
            footer = self.placement.footer(unit, buf)
        return (True, *self._read_row_group(unit, source, footer, where, whole))

    def _pin(self, unit: Unit, buf: Any, store: ShardStore) -> None:
        """Keep ``unit``'s cached file mapped while row groups of it are needed soon, and unmap
        the files no row group needed soon is in (``fetch="file"`` only: see FilePins)."""
        if self.plan.fetch == "file":
            units = self.plan.units
            self.pins.keep(unit.file, buf, {units[u].file for u in store.needed_soon()})

    def _pressure(self, store: ShardStore, keep: int) -> None:
        """The cache is full and a read waits for room: unmap what this source can."""
        store.release()
        self.pins.drop(keep)

    def _read_row_group(self, unit: Unit, source: Any, footer: Any, where: str,
                        whole: bool) -> tuple[Any, np.ndarray | None]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        read = self.plan.file_columns
        try:
            md = self._metadata.get(unit.file)
            if md is None:
                md = pq.read_metadata(footer)
                if unit.row_group == WHOLE_FILE:  # planned without its footer: checked now
                    check_file(self.plan, unit.file, md)
                if len(self._metadata) >= 64:
                    self._metadata.clear()
                self._metadata[unit.file] = md
            file = pq.ParquetFile(source, metadata=md, pre_buffer=False)
            table = None if not read else (file.read(columns=read, use_threads=True) if unit.row_group == WHOLE_FILE
                                           else file.read_row_group(unit.row_group, columns=read, use_threads=True))
        except (pa.ArrowException, OSError) as e:
            if isinstance(e, CorruptShardError):
                raise
            raise CorruptShardError(f"{where} cannot be read ({e}); the file is damaged or changed "
                                    "since the source was opened") from e
        if table is None:
            return None, None
        if self.plan.column_names:  # stored under other names (Delta column mapping): as served
            table = table.rename_columns(self.plan.read_columns)
        keep = unit.selection()
        if keep is not None and table.num_rows != unit.total_rows:
            raise CorruptShardError(f"{where}: {table.num_rows} rows read, {unit.total_rows} expected; the "
                                    "file changed since the source was opened")
        if keep is not None and not (whole and unit.rows >= WHOLE_AT * unit.total_rows):
            table, keep = table.filter(pa.array(keep)), None
        if keep is None and table.num_rows != unit.rows:
            raise CorruptShardError(f"{where}: {table.num_rows} rows read, {unit.rows} expected; the file "
                                    "changed since the source was opened")
        return table, keep
