"""An MDS dataset's shard files as a :class:`petastream.storage.shards.ShardLoader`.

A shard is mapped where it lies when its raw file is on a local disk (never copied, its hash
checked the first time this process maps it), else filled into the node's shard cache under a
key naming its bytes (:mod:`petastream.mds.sources`) and mapped from there; either way it is
opened as a :class:`~petastream.mds.shard.ShardData` of the dataset's column layout.
"""

from __future__ import annotations

import builtins
import mmap
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from petastream.errors import CorruptShardError
from petastream.mds.layout import ColumnLayout
from petastream.mds.shard import ShardData
from petastream.mds.shard_table import ShardTable
from petastream.mds.sources import ShardSources
from petastream.storage.cache import ShardCache
from petastream.storage.location import is_remote_mount
from petastream.storage.shards import ShardStore

__all__ = ["ShardFiles"]


class ShardFiles:
    """Where each shard of a dataset is mapped from, and mapping it (see the module doc)."""

    def __init__(self, sources: ShardSources, layout: ColumnLayout | None, cache: ShardCache,
                 cache_limit: int | None):
        self.sources, self.layout = sources, layout
        self.shards: ShardTable = sources.shards
        self.cache, self.cache_limit = cache, cache_limit
        self._in_place_paths: dict[int, str | None] = {}
        #: Whether every shard is mapped where it lies (nothing goes through the cache).
        self.all_in_place = self._every_shard_in_place()

    def in_place(self, i: int) -> str | None:
        """Shard ``i``'s local path to map directly, or None (through the cache); found once."""
        try:
            return self._in_place_paths[i]
        except KeyError:
            path = self._in_place_paths[i] = self.sources.in_place(i)
            return path

    def _every_shard_in_place(self) -> bool:
        """Whether every shard is read in place, without a call per shard: the location decides
        for uncompressed shards; compressed ones are in place where their raw file lies beside."""
        n = len(self.shards)
        if n == 0:
            return True
        location = self.sources.location
        if self.sources.read_in_place is False or not location.is_local:
            return False
        if self.sources.read_in_place is None and is_remote_mount(location.path):
            return False
        compressed = np.flatnonzero(self.shards.compressed())
        return all(self.in_place(int(i)) is not None for i in compressed) and \
            all(self.in_place(i) is not None for i in (0, n - 1))

    def cached_bytes(self) -> np.ndarray:
        """Bytes each shard takes in the shard cache (raw, decompressed); 0 for shards mapped in place."""
        if self.all_in_place:
            return np.zeros(len(self.shards), dtype=np.int64)
        if self.sources.read_in_place is False or not self.sources.location.is_local:
            return self.shards.raw_bytes.copy()
        return np.array([0 if self.in_place(i) is not None else self.sources.raw_bytes(i)
                         for i in range(len(self.shards))], dtype=np.int64)

    def local_path(self, i: int) -> str:
        """Shard ``i``'s raw file on local disk: in place, or its cache entry (maybe not filled)."""
        path = self.in_place(i)
        return path if path is not None else self.cache.path(self.sources.key(i))

    # -- ShardLoader -------------------------------------------------------------------------
    def cost(self, i: int) -> tuple[int, bool]:
        return self.sources.raw_bytes(i), self.in_place(i) is None

    def inline(self, i: int) -> bool:
        path = self.in_place(i)
        return path is not None and not self.sources.needs_check(i, path)

    def cache_keys(self, units: Sequence[int]) -> list[str]:
        keys = (self.sources.known_key(i) for i in units if self.in_place(i) is None)
        return [k for k in keys if k is not None]

    def load(self, i: int, wait: bool, store: ShardStore) -> ShardData | None:
        """Map shard ``i``: in place, or from the cache (filled first if needed). None when
        ``wait`` is False and the cache has no room now."""
        meta = self.shards[i]
        path = self.in_place(i)
        if path is not None:
            buf = self._map_in_place(i, path, prefetch=not wait)
            label = path
        else:
            key = self.sources.key(i)
            buf = self.cache.get(key, self.sources.raw_bytes(i), lambda out: self.sources.fill(i, out),
                                 limit=self.cache_limit, wait=wait, on_pressure=store.release)
            if buf is None:
                return None
            label = f"{self.sources.url(i)} (cached as {self.cache.path(key)})"
            if len(buf) != meta["raw_data"]["bytes"]:
                raise CorruptShardError(
                    f"shard {i} {label}: {len(buf)} bytes, index.json says "
                    f"{meta['raw_data']['bytes']}; the cache entry was damaged: run "
                    "`petastream cache prune --all` and read again"
                )
        assert self.layout is not None  # shard i exists, so the dataset has a layout
        return ShardData(buf, self.layout, name=f"{i} {label}", expected_samples=meta["samples"])

    def _map_in_place(self, i: int, path: str, *, prefetch: bool) -> Any:
        expected = self.sources.raw_bytes(i)
        try:
            size = os.path.getsize(path)
        except FileNotFoundError:
            raise CorruptShardError(f"shard file {path} listed in index.json is missing") from None
        if size != expected:
            raise CorruptShardError(
                f"shard {i} {path}: {size} bytes on disk, index.json says {expected}; "
                "the file is truncated or was replaced"
            )
        if size == 0:
            return b""
        with builtins.open(path, "rb") as f:
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        if prefetch and hasattr(buf, "madvise"):
            buf.madvise(mmap.MADV_WILLNEED)  # start reading it from disk (or a network mount) now
        self.sources.verify_in_place(i, path, buf)
        return buf
