"""``ShardStore``: one source's shards in the node's shard cache, whatever the format.

A source stores its rows in *units* it loads whole: an MDS shard file, a Parquet row group.
The planner's shards map onto them (one to one for MDS; a Parquet row group may be cut into
several shards). What a format knows is how to load a unit and what that costs, a
:class:`ShardLoader`; everything else a source does with its units is the same for every
format and lives here:

* the open units (an LRU within ``max_open`` and byte budgets) and their read-ahead
  (:class:`~petastream.storage.readahead.OpenShards`): ``prefetch``, ``is_loaded``, ``get``;
* the cache's eviction sparing the units needed soon, told to the other processes on the
  cache (:mod:`petastream.storage.announce`) as the window moves and when a pass ends;
* ``close`` at the end of a pass, ``release`` when the cache is full;
* ``cache_peers`` (what loaders of one order pace each other through) and the cache settings
  a worker process reopens the source with (``settings``);
* the per-reader shares of a limited cache (:func:`petastream.stream.budget.reader_shares`),
  unless the format bounds what it holds otherwise (Parquet: decoded row groups, in memory).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from petastream.errors import OutOfRangeError
from petastream.storage.announce import Announcements
from petastream.storage.cache import ShardCache
from petastream.storage.readahead import OpenShards
from petastream.storage.sizes import cache_limit_setting
from petastream.stream.budget import local_readers, reader_shares

__all__ = ["ShardLoader", "ShardStore", "open_cache"]


class ShardLoader(Protocol):
    """What a format tells a :class:`ShardStore` about its units (shard files, row groups)."""

    def load(self, unit: int, wait: bool, store: ShardStore) -> Any | None:
        """Unit ``unit``, loaded (mapped, decoded): fetched into ``store.cache`` first where it
        goes through it. None when ``wait`` is False and the cache has no room now. When the
        cache is full and the load waits for room, ``store.release()`` unmaps what the source
        holds open (``store.needed_soon()``: the units to keep)."""
        ...

    def cost(self, unit: int) -> tuple[int, bool]:
        """``(bytes, whether they sit in the shard cache)`` of a loaded ``unit``: what the
        budgets count (cache bytes against the reader's shares)."""
        ...

    def inline(self, unit: int) -> bool:
        """Whether loading ``unit`` is cheap enough for the asking thread (a local file with
        nothing left to check), not worth a read-ahead thread."""
        ...

    def cache_keys(self, units: Sequence[int]) -> list[str]:
        """The cache keys ``units`` are read from (those known without a request), soonest
        first: what eviction spares while they are needed soon."""
        ...


def open_cache(cache_dir: str | None, cache_limit: int | str | None) -> tuple[ShardCache, int | None]:
    """The node's shard cache at ``cache_dir`` (default ``$PETASTREAM_CACHE_DIR`` or
    ``~/.cache/petastream/shards``) and its limit in bytes (``"50gb"``; default
    ``$PETASTREAM_CACHE_LIMIT``; None: keep 5% of the disk free)."""
    return ShardCache.at(cache_dir), cache_limit_setting(cache_limit)


class ShardStore:
    """One source's units in the shard cache (see the module doc).

    ``units``: each shard's unit (None: a shard is a unit). ``through_cache``: whether any
    unit is read through the cache (False: every one is read in place, so there is nothing to
    announce or pace). ``budgets``: ``(cached, ahead)`` bytes of loaded units kept after a
    read and ahead of it; None: this reader's shares of ``cache_limit`` among the node's
    readers. ``release_on_close``: unmap every loaded unit at the end of a pass (units that
    map cache entries: another process may need the room).
    """

    def __init__(self, loader: ShardLoader, *, cache: ShardCache, cache_limit: int | None, num_shards: int,
                 units: np.ndarray | None = None, through_cache: bool = True, depth: int = 8,
                 workers: int = 8, max_open: int = 64, budgets: tuple[int | None, int | None] | None = None,
                 release_on_close: bool = True):
        self.loader = loader
        self.cache, self.cache_limit = cache, cache_limit
        #: The node's shard cache directory.
        self.cache_dir = cache.root
        #: Processes of this node expected to read through the cache at once (torchrun's
        #: LOCAL_WORLD_SIZE, else 1): a limited cache is shared out between them.
        self.readers = local_readers()
        self.num_shards, self.units = num_shards, units
        self.through_cache, self.release_on_close = through_cache, release_on_close
        cached, ahead = budgets if budgets is not None else reader_shares(cache_limit, self.readers)
        # OpenShards holds these bound methods weakly: the source owns this store, so dropping
        # the source unmaps its units now, not at the next garbage collection.
        self._open = OpenShards(self._load, loader.cost, loader.inline, max_open=max_open, depth=depth,
                                workers=workers, cached_budget=cached, ahead_budget=ahead)
        cache.protect(self._keys_needed_soon)

    def settings(self) -> dict[str, Any]:
        """``cache_dir`` and ``cache_limit`` as this process resolved them: what a source
        reopened in another process of this node (a worker) is given, to share this cache."""
        return {"cache_dir": self.cache_dir, "cache_limit": self.cache_limit}

    # -- units -------------------------------------------------------------------------------
    def unit(self, shard: int) -> int:
        return shard if self.units is None else int(self.units[shard])

    def get(self, unit: int) -> Any:
        """Unit ``unit``, loaded: waits for its read-ahead, or loads it in this thread."""
        return self._open.get(unit)

    def prefetch(self, shards: Sequence[int]) -> None:
        """The shards the coming reads need, in plan order (the whole window each time): their
        units load ahead of the reader, on a bounded pool. Non-blocking."""
        wanted = [int(s) for s in shards]
        bad = [s for s in wanted if not 0 <= s < self.num_shards]
        if bad:
            raise OutOfRangeError(f"shards {bad[:5]} out of range ({self.num_shards} shards)")
        if self.units is not None:
            wanted = list(dict.fromkeys(int(self.units[s]) for s in wanted))
        self._open.prefetch(wanted)
        if self.through_cache:  # to the other processes on the cache (a file if it changed)
            self.cache.announce()

    def is_loaded(self, shard: int) -> bool:
        """Whether ``shard``'s unit is loaded: reading it now will not wait."""
        return self._open.is_open(self.unit(shard))

    def needed_soon(self) -> list[int]:
        """Units loading or in the latest read-ahead request, soonest first."""
        return self._open.needed_soon()

    def release(self) -> None:
        """Unmap every unit kept open (the cache is full: let eviction have them). Arrays a
        caller still holds keep their own unit mapped."""
        self._open.release()

    def close(self) -> None:
        """End of a pass: drop the queued read-ahead, unmap the loaded units (where
        ``release_on_close``), and tell the other processes this one needs nothing soon."""
        self._open.close()
        if self.release_on_close:
            self._open.release()
        if self.through_cache:
            self.cache.announce()

    def cache_peers(self) -> Announcements | None:
        """The processes sharing this bounded cache, through which loaders of one order pace
        each other (:mod:`petastream.pipeline.pacing`); None without a ``cache_limit`` or when
        nothing is read through the cache."""
        return self.cache.peers if self.cache_limit is not None and self.through_cache else None

    def _load(self, unit: int, wait: bool) -> Any | None:
        return self.loader.load(unit, wait, self)

    def _keys_needed_soon(self) -> list[str]:
        return self.loader.cache_keys(self._open.needed_soon())
