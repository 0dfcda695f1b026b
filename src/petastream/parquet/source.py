"""``ParquetSource``: Parquet files as a :class:`petastream.source.Source`.

A shard is a row group (or a slice of one, ``rows_per_shard``) holding rows after filtering;
see :mod:`petastream.parquet.plan` for the layout decided at open, :mod:`~.filters` for
``filters``, :mod:`~.types` and :mod:`~.convert` for the column types (those of an MDS read of
the same data), :mod:`~.fetch` for where bytes come from.

Reads load a row group once (:mod:`~.load`: read with pyarrow, its kept rows selected,
converted to numpy, its fixed-size columns packed row by row) and take rows from it with
numpy, so reading its slices, or its rows over several chunks, decodes it once while it stays
loaded. Loaded row groups are held (least recently used first
out) within ``memory_limit``; the read-ahead the loaders announce (:meth:`prefetch`) loads the
coming row groups on a small thread pool (pyarrow's decoding releases the GIL), with
downloads into the shard cache for remote files, through
:class:`petastream.storage.shards.ShardStore` as an MDS dataset does.

Decoded row groups (``cache_decoded``, :mod:`~.decoded`): the first read of a row group can
store its decoded columns in the shard cache as an Arrow IPC file, which later epochs, ranks
and worker processes of the node map instead of decoding the Parquet again.

Shuffling: a loader's blocks cut shards into runs of ``block_size`` rows spread over a
window; each row group a window touches is decoded when first needed. Keep a window's row
groups within ``memory_limit`` (a ``block_size`` of at least the rows of a row group, or
``rows_per_shard`` slices and a larger ``memory_limit``), or a row group is decoded again
each time the plan comes back to it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from petastream.capabilities import CachePeers, Fingerprinted, StringReads
from petastream.checks import nonnegative_int, positive_int
from petastream.columns.ops import scatter_columns, split_rows
from petastream.errors import (
    InvalidArgumentError,
    OutOfRangeError,
    UnknownColumnError,
)
from petastream.parquet import decoded as decoded_cache
from petastream.parquet.convert import NULL_POLICIES, empty, take
from petastream.parquet.discover import discover
from petastream.parquet.fetch import Placement
from petastream.parquet.filters import to_expression
from petastream.parquet.kept_objects import KeptObjects
from petastream.parquet.load import RowGroups
from petastream.parquet.plan import Columns, Plan, check_unchanged, make_plan
from petastream.storage.announce import Announcements
from petastream.storage.location import Location, resolve
from petastream.storage.shards import ShardStore, open_cache
from petastream.storage.sizes import parse_size

__all__ = ["ParquetPlanned", "ParquetSource"]

_OPEN_UNITS = 64  # loaded row groups kept at most (besides the memory bound)
_MIN_MEMORY = 1 << 30  # default memory_limit: this, or four of the largest row groups


def _restore(plan: Plan, kwargs: dict[str, Any]) -> ParquetSource:
    """A source from its plan: what a pickle or a worker process reopens."""
    return ParquetSource(plan.root_urls, plan=plan, **kwargs)


def _plan_roots(plan: Plan, url_or_urls: Any, storage_options: dict | None,
                layout: dict[str, Any]) -> list[Location]:
    """The roots of a given ``plan`` (its files checked unchanged by a listing); the layout
    options are the plan's, not to be given again."""
    given = [k for k, v in layout.items() if v is not None]
    if given:
        raise InvalidArgumentError(f"{given} are decided by the plan given; pass them without plan=")
    urls = [os.fspath(u) for u in ([url_or_urls] if isinstance(url_or_urls, (str, os.PathLike)) else url_or_urls)]
    if urls != list(plan.root_urls):
        raise InvalidArgumentError(f"plan= was made for {plan.root_urls}, not {urls}")
    roots = [resolve(u, storage_options) for u in plan.root_urls]
    check_unchanged(plan, roots)
    return roots


@runtime_checkable
class ParquetPlanned(Protocol):
    """A source with Parquet columns and their Arrow types (a :class:`Plan`: ParquetSource, and
    so DeltaSource): the compat readers give dates and timestamps back as Petastorm did, from
    the stored unit (a capability of this format's sources, beside those of
    :mod:`petastream.capabilities`)."""

    plan: Plan


class ParquetSource(CachePeers, Fingerprinted, StringReads, ParquetPlanned):  # petastream.capabilities
    """Parquet files, read as a :class:`petastream.source.Source` (see the module doc).

    ``url_or_urls``: a file, a directory (Hive ``key=value`` partitions become columns; files
    and directories starting with ``_`` or ``.`` are skipped), or a list of them; local paths
    or fsspec URLs (``storage_options`` for the filesystem).
    ``columns``: the columns to read (file or partition columns), in that order; default all;
    or a function of the first file's fields and the partition fields (``(name, Arrow type)``
    lists) that returns them (a reader's own rule, such as Petastorm's inferred schema).
    ``filters``: a pyarrow DNF list or a ``pyarrow.compute`` Expression: row groups are pruned
    by statistics and partition values, and the surviving row groups' filter columns are read
    at open so that every shard's size is exact (that read is the cost of filtering; see
    :mod:`petastream.parquet.filters`).
    ``rows_per_shard``: cut row groups into shards of at most this many rows (the planner's
    finer blocks; a row group is still decoded whole, once, while loaded).
    ``array_lengths``: ``{column: n}`` reads a list column as fixed-size ``(rows, n)`` arrays
    (checked on read); list columns are otherwise variable-length (``Ragged``).
    ``null_policy``: ``"error"`` (default) or ``"fill"``, as the Spark materialization path, or
    ``"petastorm"``, as Petastorm's batch reader (see :mod:`petastream.parquet.convert`).
    ``cache_dir`` / ``cache_limit``: the node's shard cache for remote files (as
    :class:`petastream.mds.dataset.MDSDataset`); ``fetch``: ``"file"`` (whole files),
    ``"row_group"`` (the column chunks read, per row group), or ``"auto"`` (row groups where
    the columns and row groups read are under half of the files' bytes, or where files hold
    several row groups of 8 MiB or more read: a file is decoded only once its last byte is in,
    a row group as soon as its own bytes are).
    ``cache_decoded``: keep each row group's decoded columns in the shard cache (see
    :mod:`petastream.parquet.decoded`), so later epochs map them instead of decoding again:
    True for every file, False for none; None (default) for the files that go through the
    cache anyway (remote ones), not for local files read in place (a decoded copy of a local
    table takes disk space the user did not ask for). Bounded by ``cache_limit`` with the rest
    of the cache.
    ``validate``: check each cached file's footer against the one read at open.
    ``read_in_place``: None maps local files where they lie and caches FUSE mounts of remote
    storage (``/dbfs``, ``/Volumes``); True maps those in place too; False caches all.
    ``prefetch_depth`` / ``prefetch_workers``: row groups loaded ahead of the reader, and at once.
    ``memory_limit``: bytes of loaded row groups kept in memory (read-ahead and recently read),
    default the larger of 1 GiB and four of the largest row groups.
    ``plan``: another source's :attr:`plan` (what pickling and :meth:`reopener` pass): its
    files, row groups, selections and columns are taken as they are, once a listing shows the
    files unchanged (no footer read, no filter applied again).
    """

    #: Set on a :meth:`with_strings` copy: how it reads str/bytes columns, whatever row_groups says.
    _read_strings: str | None = None

    def __init__(
        self,
        url_or_urls: str | os.PathLike | Sequence[str | os.PathLike],
        *,
        columns: Columns = None,
        filters: Any = None,
        storage_options: dict | None = None,
        cache_dir: str | None = None,
        cache_limit: int | str | None = None,
        rows_per_shard: int | None = None,
        array_lengths: Mapping[str, int | None] | None = None,
        null_policy: str = "error",
        fetch: str = "auto",
        cache_decoded: bool | None = None,
        validate: bool = True,
        read_in_place: bool | None = None,
        prefetch_depth: int = 4,
        prefetch_workers: int = 4,
        memory_limit: int | str | None = None,
        plan: Plan | None = None,
    ):
        if null_policy not in NULL_POLICIES:
            raise InvalidArgumentError(f"null_policy={null_policy!r}: use one of {NULL_POLICIES}")
        if array_lengths is not None and not isinstance(array_lengths, Mapping):
            raise InvalidArgumentError(f"array_lengths must be a mapping {{column: length}}, got {array_lengths!r}")
        if plan is None:
            discovery = discover(url_or_urls, storage_options)
            plan = make_plan(discovery, columns=columns, expr=to_expression(filters), rows_per_shard=rows_per_shard,
                             array_lengths=dict(array_lengths or {}), null_policy=null_policy, fetch=fetch)
            roots = discovery.roots
        else:
            roots = _plan_roots(plan, url_or_urls, storage_options, {
                "columns": columns, "filters": filters, "rows_per_shard": rows_per_shard,
                "array_lengths": array_lengths, "fetch": fetch if fetch != "auto" else None})
        self._setup(plan, roots, {
            "storage_options": storage_options, "cache_dir": cache_dir, "cache_limit": cache_limit,
            "null_policy": null_policy, "cache_decoded": cache_decoded, "validate": validate,
            "read_in_place": read_in_place,
            "prefetch_depth": prefetch_depth, "prefetch_workers": prefetch_workers,
            "memory_limit": memory_limit})

    def _setup(self, plan: Plan, roots: list[Location], kwargs: dict[str, Any]) -> None:
        self._kwargs = dict(kwargs)
        nonnegative_int("prefetch_depth", kwargs["prefetch_depth"], "shards loaded ahead; 0: none")
        positive_int("prefetch_workers", kwargs["prefetch_workers"], "shard loads at once")
        self.plan = plan
        self.url = plan.root_urls[0] + (f" (and {len(plan.root_urls) - 1} more)" if len(plan.root_urls) > 1 else "")
        self.shard_sizes = plan.shard_sizes
        self.shard_offsets = np.zeros(len(plan.shard_sizes) + 1, dtype=np.int64)
        np.cumsum(plan.shard_sizes, out=self.shard_offsets[1:])
        self.null_policy = kwargs["null_policy"]
        self.placement = Placement(plan, roots, read_in_place=kwargs["read_in_place"],
                                   validate=kwargs["validate"])
        decoded = kwargs["cache_decoded"]
        if decoded not in (None, True, False):
            raise InvalidArgumentError(f"cache_decoded={decoded!r}: use True, False or None (remote files only)")
        cache, self.cache_limit = open_cache(kwargs["cache_dir"], kwargs["cache_limit"])
        #: The node's shard cache (remote files; see :mod:`petastream.storage.cache`) and its directory.
        self.cache, self.cache_dir = cache, cache.root
        self.row_groups = RowGroups(plan, self.placement, cache, self.cache_limit, self.null_policy, decoded)
        self._packed_dtype, self._row_item = self.row_groups.packed_dtype, self.row_groups.row_item
        self._specs = {s.name: s for s in plan.specs}
        #: Columns stored as another dtype than they mean: booleans, read as uint8, view as bool.
        self.logical_dtypes = {s.name: s.logical for s in plan.specs if s.logical}
        limit = kwargs["memory_limit"]
        largest = max((u.decoded for u in plan.units), default=0)
        self.memory_limit = (parse_size(limit, what="memory_limit") if limit is not None
                             else max(_MIN_MEMORY, 4 * largest))
        if any(k is not None for k in self.row_groups.decoded_keys):
            # Within the loaded row groups' own budget: what a source of local files read in
            # place keeps loaded between passes, objects included.
            self.row_groups.kept_objects = KeptObjects(self.memory_limit // 2)
        #: The row groups in memory and the node's cache: read-ahead, what is loaded, cache peers.
        self.store = ShardStore(self.row_groups, cache=cache, cache_limit=self.cache_limit,
                                num_shards=self.num_shards, units=plan.shard_unit,
                                through_cache=self.row_groups.cache_backed, depth=kwargs["prefetch_depth"],
                                workers=kwargs["prefetch_workers"], max_open=_OPEN_UNITS,
                                budgets=(self.memory_limit // 2, self.memory_limit // 2),
                                release_on_close=self.row_groups.cache_backed)
        self._cached_bytes = self._shard_cache_bytes()

    @property
    def strings(self) -> str:
        """How reads return ``str``/``bytes`` columns: ``"objects"`` (object arrays) or
        ``"ragged"`` (their bytes as ``Ragged`` uint8), as ``MDSDataset.strings``."""
        return self._read_strings or self.row_groups.strings

    @strings.setter
    def strings(self, value: str) -> None:
        self.row_groups.strings = value
        if self._read_strings is not None:
            self._read_strings = value

    def with_strings(self, mode: str) -> ParquetSource:
        """This source reading str/bytes columns as ``mode`` (``StringReads``): a shallow copy
        sharing row groups, store and cache; ``self`` reads as before. The shared row groups
        stop making their objects when loaded (``self`` then makes them at its first read of a
        row group): objects made for nothing cost a jagged epoch a third of its time."""
        if self._read_strings is None:
            self._read_strings = self.row_groups.strings  # (self keeps its mode)
        view = object.__new__(type(self))  # (not copy.copy: it would go through __reduce__, which reopens)
        view.__dict__.update(self.__dict__)
        view._read_strings = mode
        if mode != "objects":
            self.row_groups.strings = mode
        return view

    # -- pickling ----------------------------------------------------------------------------
    def __reduce__(self) -> tuple[Any, ...]:
        # The plan travels (no footer is read again, no filter applied again); the new process
        # lists the files to check they did not change, and resolves its own cache settings.
        return _restore, (self.plan, self._kwargs)

    def for_epoch(self, seed: int, epoch: int) -> ParquetSource:
        return self  # an epoch reads the same rows (the Source protocol)

    def reopener(self) -> Callable[[], ParquetSource]:
        """What reopens this source in another process of this node, with this process's cache
        directory and limit (see :meth:`petastream.mds.dataset.MDSDataset.reopener`)."""
        return functools.partial(_restore, self.plan, {**self._kwargs, **self.store.settings()})

    # -- metadata ----------------------------------------------------------------------------
    def __len__(self) -> int:
        return int(self.shard_offsets[-1])

    @property
    def num_shards(self) -> int:
        return len(self.shard_sizes)

    @property
    def columns(self) -> dict[str, str]:
        """``{column: MDS encoding name}``, in the order read (see :mod:`petastream.parquet.types`)."""
        return {s.name: s.encoding for s in self.plan.specs}

    @property
    def fingerprint(self) -> str:
        """What the source reads (files and their versions, rows kept, shards, column types)."""
        return self.plan.fingerprint

    @property
    def files(self) -> list[str]:
        """URLs of the Parquet files read, in shard order."""
        return [f.ref.url for f in self.plan.files]

    @property
    def fetch(self) -> str:
        """How remote files enter the shard cache: ``"file"`` or ``"row_group"``."""
        return self.plan.fetch

    @property
    def stored_bytes(self) -> int:
        """Uncompressed bytes of the rows read, from the footers' column sizes."""
        return sum(u.stored for u in self.plan.units)

    @property
    def reads_in_place(self) -> bool:
        """False: every row group is decoded (and decompressed) before a read, so read-ahead
        always has work, even where the files are local."""
        return False

    def __repr__(self) -> str:
        return (f"ParquetSource({self.url!r}, rows={len(self)}, files={len(self.plan.files)}, "
                f"shards={self.num_shards}, columns={self.columns})")

    # -- reading -----------------------------------------------------------------------------
    def _wanted(self, columns: Sequence[str] | None) -> list[str]:
        if columns is None:
            return list(self._specs)
        wanted = list(columns)
        for c in wanted:
            if c not in self._specs:
                raise UnknownColumnError(f"no column {c!r}; columns are {list(self._specs)}")
        return wanted

    def read_shard(self, shard: int, ids: np.ndarray | None = None,
                   columns: Sequence[str] | None = None) -> dict[str, Any]:
        """Rows ``ids`` (local to ``shard``; None: all, as views where possible) of one shard."""
        n = self.num_shards
        if not 0 <= shard < n:
            raise OutOfRangeError(f"shard {shard} out of range ({n} shards)")
        wanted = self._wanted(columns)
        start, size = int(self.plan.shard_start[shard]), int(self.shard_sizes[shard])
        rows: np.ndarray | slice
        if ids is None:
            rows = slice(start, start + size)
        else:
            ids = np.asarray(ids, dtype=np.int64)
            if len(ids) and (ids.min() < 0 or ids.max() >= size):
                raise OutOfRangeError(f"row ids out of range for shard {shard} of {size} rows")
            rows = ids + start
        loaded = self.store.get(int(self.plan.shard_unit[shard]))
        fixed = [c for c in wanted if c not in loaded.columns]
        out = {}
        if fixed:
            if isinstance(rows, slice):  # views of the packed rows, as an MDS shard's
                table = loaded.packed[rows].view(self._packed_dtype)
                out = {c: table[c] for c in fixed}
            else:
                out = split_rows(loaded.packed[rows], self._packed_dtype, fixed)
        at = loaded.at(rows)  # rows of a row group loaded whole (deletion vectors): through its index
        out.update({c: take(loaded.columns[c], at, self.strings) for c in wanted if c in loaded.columns})
        return {c: out[c] for c in wanted}

    def read(self, ids: np.ndarray, columns: Sequence[str] | None = None) -> dict[str, Any]:
        """Rows with global ``ids`` (any order, repeats allowed), one load per row group."""
        from petastream.stream.grouping import group_by_shard

        ids = np.asarray(ids, dtype=np.int64)
        if len(ids) and (ids.min() < 0 or ids.max() >= len(self)):
            raise OutOfRangeError(f"row ids out of range for a source of {len(self)} rows")
        if not len(ids):
            return {c: empty(self._specs[c], self.strings) for c in self._wanted(columns)}
        groups = group_by_shard(ids, self.shard_offsets)
        if len(groups) == 1:
            g = groups[0]
            return self.read_shard(g.shard, g.local_ids, columns)
        return self.read_parts(groups, len(ids), columns)

    def read_parts(self, groups: Iterable[Any], n: int, columns: Sequence[str] | None = None) -> dict[str, Any]:
        """One block of ``n`` rows from several shards, each group's row ``j`` at ``positions[j]``.

        The fixed-size columns' packed rows are gathered straight into one table of ``n`` rows
        and cut into contiguous columns (one gather and one scatter per row, not per column);
        the other columns are taken per shard and scattered into place."""
        wanted = self._wanted(columns)
        groups = list(groups)
        if not groups:
            return {c: empty(self._specs[c], self.strings) for c in wanted}
        fixed = [c for c in wanted if c in (self._packed_dtype.names or ())]
        other = [c for c in wanted if c not in fixed]
        out: dict[str, Any] = {}
        if fixed:
            rows = np.empty(n, dtype=self._row_item)
            self.read_rows_into(groups, rows)
            out = split_rows(rows, self._packed_dtype, fixed)
        if other:
            parts = [self.read_shard(g.shard, g.local_ids, other) for g in groups]
            out.update(scatter_columns(parts, [g.positions for g in groups], n))
        return {c: out[c] for c in wanted}

    def row_layout(self) -> np.dtype | None:
        """Packed rows (:class:`petastream.source.PackedRows`): the fixed-size columns (numbers,
        booleans, dates, timestamps, fixed-size arrays), as a loaded row group holds them."""
        return self._packed_dtype if self._packed_dtype.names else None

    def read_rows_into(self, groups: Iterable[Any], out: np.ndarray) -> None:
        """Each group's rows as packed rows at ``out[g.positions]`` (see :meth:`row_layout`)."""
        for g in groups:
            loaded = self.store.get(int(self.plan.shard_unit[g.shard]))
            out[g.positions] = loaded.packed[np.asarray(g.local_ids, dtype=np.int64) + self.plan.shard_start[g.shard]]

    # -- loading row groups (the store) --------------------------------------------------------
    def prefetch(self, shards: Sequence[int]) -> None:
        """Load the row groups of ``shards`` (plan order) ahead of the reader; non-blocking."""
        self.store.prefetch(shards)

    def is_loaded(self, shard: int) -> bool:
        """Whether ``shard``'s row group is loaded: reading it now will not wait."""
        return self.store.is_loaded(shard)

    def cached_shard_bytes(self) -> np.ndarray:
        """Bytes of the shard cache each shard accounts for (0 for local files read in place):
        its share of its file (``fetch="file"``: a file's shards share it by their compressed
        bytes) or of its row group's ranges."""
        return self._cached_bytes.copy()

    def cache_peers(self) -> Announcements | None:
        """The processes sharing this source's bounded cache (see :meth:`ShardStore.cache_peers`)."""
        return self.store.cache_peers()

    def close(self) -> None:
        """End of a pass: drop the queued read-ahead and the cached files kept mapped, and the
        loaded row groups where any maps a cache entry (another process may need the room).
        Row groups decoded from local files read in place stay loaded within ``memory_limit``
        (least recently used out), as any recently read ones do: the next epoch of a table
        that fits decodes nothing again."""
        self.store.close()
        self.row_groups.pins.drop()

    def _shard_cache_bytes(self) -> np.ndarray:
        """Each shard's share of the cache entry it is read from (see cached_shard_bytes): an
        entry's bytes split over its shards by their compressed bytes, exactly (the shares of
        an entry add up to its size)."""
        plan = self.plan
        out = np.zeros(self.num_shards, dtype=np.int64)
        by_entry: dict[int, list[int]] = {}  # a file (fetch="file") or a unit: its shards
        for s in range(self.num_shards):
            unit = plan.units[int(plan.shard_unit[s])]
            if self.placement.local_path(unit) is None:
                entry = unit.file if plan.fetch == "file" else int(plan.shard_unit[s])
                by_entry.setdefault(entry, []).append(s)
        for shards in by_entry.values():
            units = [plan.units[int(plan.shard_unit[s])] for s in shards]
            weight = np.array([max(1, u.range_bytes) * int(plan.shard_sizes[s]) / max(1, u.rows)
                               for s, u in zip(shards, units)])
            size = self.placement.entry_bytes(units[0])
            bounds = np.round(np.concatenate([[0.0], np.cumsum(weight)]) / weight.sum() * size).astype(np.int64)
            out[shards] = np.diff(bounds)
        for s in range(self.num_shards):  # and its share of its row group's decoded entry
            u = int(plan.shard_unit[s])
            if self.row_groups.decoded_keys[u] is not None:
                unit = plan.units[u]
                out[s] += decoded_cache.entry_size_estimate(unit) * int(plan.shard_sizes[s]) // max(1, unit.rows)
        return out
