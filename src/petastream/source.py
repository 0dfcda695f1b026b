"""``Source``: what a loader reads, whatever the format.

Every loader (:mod:`petastream.pipeline`, and the torch, TensorFlow and compat adapters over
it) reads a :class:`Source`. The planner sees only its shard sizes; the decode stage asks it for
rows in bulk and tells it, ahead of time, which shards the coming reads need; the loader asks it
for its cache facts to fit the shuffle window to a bounded cache. So a format plugs in by
implementing this protocol, with no change to the pipeline:

* :class:`petastream.mds.dataset.MDSDataset`: an MDS dataset (a shard is a shard file);
* a Parquet store (a shard is a row group, or a slice of one);
* :class:`ArrowSource`-style in-memory tables (tests, small data).

A *shard* is the unit a source stores, fetches and caches. Its rows have global ids
``shard_offsets[s] .. shard_offsets[s + 1] - 1``. Column types are named with MDS encoding
names (``"int64"``, ``"float32"``, ``"str"``, ``"bytes"``, ``"ndarray:float32:16"``,
``"ndarray:int32"`` for variable-length arrays, ...): the one type vocabulary every adapter
plans from (TensorFlow specs, torch conversion); ``logical_dtypes`` names the columns read back
as another numpy dtype than they are stored in (Spark booleans stored as uint8 read as bool).

Reads return ``{column: numpy array | petastream.columns.ragged.Ragged}``: fixed-size values as
arrays of shape ``(rows, *value_shape)``, str/bytes/decimal values as object arrays,
variable-length arrays as ``Ragged``.

Each pass reads through ``source.for_epoch(seed, epoch)`` of its plan (see
:class:`petastream.pipeline.work.PassWork`): the source itself, except where reads depend on the
epoch (a mixture: which samples of each stream).

What a user passes a loader (a URL, a list of URLs, a list of :class:`petastream.Stream`) is
opened as a source by :func:`petastream.sources.resolve_source` (the format, by what lies
there) and :func:`petastream.mix.open_source` (a list of streams: a mixture).

A source crosses into worker processes: it must pickle (reopening what it holds open), and
:meth:`Source.reopener` gives what reopens it in another process of this node with the same
cache settings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from petastream.errors import OutOfRangeError

__all__ = ["Source", "PackedRows", "is_source", "read_ids", "packed_layout"]


@runtime_checkable
class Source(Protocol):
    """Rows in shards, read in bulk; see the module doc."""

    #: Where it comes from, for messages (a URL, or a description).
    url: str
    #: Samples per shard (int64): the blocks the planner orders.
    shard_sizes: np.ndarray
    #: Cumulative ``shard_sizes``, length ``num_shards + 1``.
    shard_offsets: np.ndarray
    @property
    def cache_limit(self) -> int | None:
        """Bytes the cache the shards are fetched into may hold (None: no limit)."""
        ...

    def __len__(self) -> int: ...

    @property
    def num_shards(self) -> int: ...

    @property
    def columns(self) -> Mapping[str, str]:
        """``{column: MDS encoding name}``, in the source's column order."""
        ...

    @property
    def logical_dtypes(self) -> Mapping[str, str]:
        """Columns read back as another numpy dtype than stored (``{"flag": "bool"}``)."""
        ...

    @property
    def stored_bytes(self) -> int:
        """Bytes all rows take as read (uncompressed): sizes bulk reads by row size."""
        ...

    @property
    def reads_in_place(self) -> bool:
        """Whether nothing needs fetching or decompressing before a read (read-ahead idle)."""
        ...

    # -- reads -----------------------------------------------------------------------------
    def read(self, ids: np.ndarray, columns: Sequence[str] | None = None) -> dict[str, Any]:
        """Rows with global ``ids`` (any order, repeats allowed), as columns in that order."""
        ...

    def read_shard(self, shard: int, ids: np.ndarray | None = None,
                   columns: Sequence[str] | None = None) -> dict[str, Any]:
        """Rows ``ids`` (local to ``shard``; None: all) of one shard, in that order."""
        ...

    def read_parts(self, groups: Iterable[Any], n: int, columns: Sequence[str] | None = None) -> dict[str, Any]:
        """One block of ``n`` rows from several shards: each group (``shard``, ``local_ids``,
        ``positions``: a :class:`petastream.stream.grouping.ShardGroup`; together the positions
        cover ``0..n-1`` once) read in the order given, its row ``j`` landing at ``positions[j]``."""
        ...

    # -- cache hooks ------------------------------------------------------------------------
    def prefetch(self, shards: Sequence[int]) -> None:
        """The shards the coming reads need, in plan order (the whole window each time: shards
        no longer named are no longer needed soon). Non-blocking; a no-op where nothing is fetched."""
        ...

    def is_loaded(self, shard: int) -> bool:
        """Whether reading ``shard`` now will not wait for a fetch."""
        ...

    def cached_shard_bytes(self) -> np.ndarray:
        """Bytes each shard takes in the cache that ``cache_limit`` bounds (0: read in place)."""
        ...

    def close(self) -> None:
        """End of a pass: release what is held open (maps, descriptors, queued read-ahead).
        Reading again reopens what it needs."""
        ...

    def reopener(self) -> Callable[[], Source]:
        """What reopens this source in another process of this node (worker processes), with
        this process's cache directory and limit."""
        ...

    def for_epoch(self, seed: int, epoch: int) -> Source:
        """The source as epoch ``epoch`` of an order seeded ``seed`` reads it: itself, unless
        its reads depend on the epoch (a mixture's selection of each stream's samples)."""
        ...


@runtime_checkable
class PackedRows(Protocol):
    """What a source can add to :class:`Source`: its fixed-size columns held packed row by
    row (an MDS shard of fixed-size columns; a loaded Parquet row group), so a block of rows
    from several shards, or from several sources of the same row layout (a mixture), is
    gathered straight into one table: one copy per row, not one per column and a scatter."""

    def row_layout(self) -> np.dtype | None:
        """The structured dtype of one packed row (the fixed-size columns it holds, maybe not
        every column of the source), or None when reads have no packed rows."""
        ...

    def read_rows_into(self, groups: Iterable[Any], out: np.ndarray) -> None:
        """Each group's rows (a :class:`petastream.stream.grouping.ShardGroup`) as packed rows:
        ``out[g.positions[j]]`` is row ``g.local_ids[j]`` of shard ``g.shard``, ``out`` being
        opaque ``V<row_layout().itemsize>`` items."""
        ...


def packed_layout(source: Any) -> np.dtype | None:
    """``source``'s packed row layout (:class:`PackedRows`), or None where it has none."""
    return source.row_layout() if isinstance(source, PackedRows) else None


def is_source(value: Any) -> bool:
    """Whether ``value`` is a :class:`Source` (structurally: it has the protocol's members)."""
    return isinstance(value, Source)


def read_ids(source: Source, ids: np.ndarray, columns: Sequence[str] | None = None) -> dict[str, Any]:
    """``source.read`` from its per-shard reads: rows with global ``ids`` (any order), one bulk
    read per shard, each shard's rows written into place. Sources implement ``read`` with it."""
    from petastream.stream.grouping import group_by_shard

    ids = np.asarray(ids, dtype=np.int64)
    n = len(source)
    if len(ids) and (ids.min() < 0 or ids.max() >= n):
        raise OutOfRangeError(f"sample ids out of range for {source.url} ({n} samples)")
    if not len(ids):
        return source.read_shard(0, ids, columns) if source.num_shards else {}
    groups = group_by_shard(ids, source.shard_offsets)
    if len(groups) == 1:  # one shard: read in the order asked, straight into place
        g = groups[0]
        return source.read_shard(g.shard, ids - source.shard_offsets[g.shard], columns)
    return source.read_parts(groups, len(ids), columns)
