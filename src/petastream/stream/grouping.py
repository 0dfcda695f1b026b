"""Group a chunk's global sample ids by shard, for one bulk decode per shard.

A reader does::

    out = np.empty(len(ids), dtype=...)            # or one array per column
    for g in group_by_shard(ids, shard_offsets):
        out[g.positions] = decode(g.shard, g.local_ids)   # local_ids ascending

which touches each shard once and scatters the decoded rows back into the chunk's order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

__all__ = ["ShardGroup", "group_by_shard", "shard_offsets"]


class ShardGroup(NamedTuple):
    """The part of a chunk that lives in one shard."""

    shard: int
    """Shard index (position in index.json's ``shards``)."""
    local_ids: np.ndarray
    """Sample indices within the shard, ascending (padding can repeat one)."""
    positions: np.ndarray
    """Where each of ``local_ids`` goes in the chunk: ``ids[positions] == offset + local_ids``."""


def shard_offsets(shard_sizes: Sequence[int] | np.ndarray) -> np.ndarray:
    """Cumulative offsets, length ``num_shards + 1``: shard i holds ids ``[off[i], off[i+1])``."""
    sizes = np.asarray(shard_sizes, dtype=np.int64)
    off = np.zeros(sizes.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=off[1:])
    return off


def group_by_shard(ids: np.ndarray, shard_offsets: np.ndarray) -> list[ShardGroup]:
    """Split global ``ids`` by shard, in shard order; vectorised, one Python step per shard.

    ``shard_offsets`` is the cumulative array of length ``num_shards + 1`` (see
    :func:`shard_offsets`; empty shards repeat an offset and never get a group).
    """
    ids = np.asarray(ids)
    off = np.asarray(shard_offsets)
    if off.ndim != 1 or off.size < 1 or off.dtype.kind not in "iu":
        raise ValueError(
            f"shard_offsets must be a 1-D integer array of length num_shards + 1, got "
            f"shape {off.shape} dtype {off.dtype}; build it with shard_offsets(shard_sizes)"
        )
    if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
        raise ValueError(
            f"ids must be a 1-D integer array, got shape {ids.shape} dtype {ids.dtype}"
        )
    if ids.size == 0:
        return []
    order = np.argsort(ids)  # not stable: equal ids (padding) may swap positions; harmless
    sorted_ids = ids[order].astype(np.int64, copy=False)
    if sorted_ids[0] < off[0] or sorted_ids[-1] >= off[-1]:
        bad = int(sorted_ids[0] if sorted_ids[0] < off[0] else sorted_ids[-1])
        raise ValueError(
            f"sample id {bad} is outside the dataset [{int(off[0])}, {int(off[-1])}); "
            "pass the shard_offsets of the dataset these ids were planned for"
        )
    if off.size <= ids.size:  # few shards: find each shard's slice of the sorted ids
        cut = np.searchsorted(sorted_ids, off, side="left")
        shards = np.flatnonzero(cut[1:] > cut[:-1]).tolist()
        starts, ends = cut[shards].tolist(), cut[[s + 1 for s in shards]].tolist()
    else:  # many shards: find each id's shard
        shard = np.searchsorted(off, sorted_ids, side="right") - 1
        cuts = np.flatnonzero(shard[1:] != shard[:-1]) + 1
        starts, ends = [0, *cuts.tolist()], [*cuts.tolist(), ids.size]
        shards = shard[starts].tolist()
    return [
        ShardGroup(s, sorted_ids[a:b] - off[s], order[a:b]) for s, a, b in zip(shards, starts, ends)
    ]
