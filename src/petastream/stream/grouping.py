"""Group a chunk's global sample ids by shard, for one bulk decode per shard.

A reader does::

    out = np.empty(len(ids), dtype=...)            # or one array per column
    for g in group_by_shard(ids, shard_offsets):
        out[g.positions] = decode(g.shard, g.local_ids)   # positions ascending

which touches each shard once and scatters the decoded rows back into the chunk's order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from petastream.errors import InvalidArgumentError

__all__ = ["ShardGroup", "group_by_shard", "shard_offsets"]


class ShardGroup(NamedTuple):
    """The part of a chunk that lives in one shard."""

    shard: int
    """Shard index (position in index.json's ``shards``)."""
    local_ids: np.ndarray
    """Sample indices within the shard, in the chunk's order (padding can repeat one)."""
    positions: np.ndarray
    """Where each of ``local_ids`` goes in the chunk: ``ids[positions] == offset + local_ids``."""


def shard_offsets(shard_sizes: Sequence[int] | np.ndarray) -> np.ndarray:
    """Cumulative offsets, length ``num_shards + 1``: shard i holds ids ``[off[i], off[i+1])``."""
    sizes = np.asarray(shard_sizes, dtype=np.int64)
    off = np.zeros(sizes.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=off[1:])
    return off


def group_by_shard(ids: np.ndarray, shard_offsets: np.ndarray,
                   shards: np.ndarray | None = None) -> list[ShardGroup]:
    """Split global ``ids`` by shard, in shard order; vectorised, one Python step per shard.

    ``shard_offsets`` is the cumulative array of length ``num_shards + 1`` (see
    :func:`shard_offsets`; empty shards repeat an offset and never get a group). ``shards``:
    each id's shard, where the caller already knows it (the epoch order does).

    No comparison sort: this runs once per chunk on the decode path, and sorting a window of
    ids (``argsort``, 25 ms per 256k) cost more than decoding it. Ascending ids (unshuffled
    plans) are cut into runs; otherwise ids are bucketed by shard with a stable radix sort of
    the shard numbers, so each group keeps the chunk's order (``positions`` ascending).
    """
    ids = np.asarray(ids)
    off = np.asarray(shard_offsets)
    if off.ndim != 1 or off.size < 1 or off.dtype.kind not in "iu":
        raise InvalidArgumentError(
            f"shard_offsets must be a 1-D integer array of length num_shards + 1, got "
            f"shape {off.shape} dtype {off.dtype}; build it with shard_offsets(shard_sizes)"
        )
    if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
        raise InvalidArgumentError(
            f"ids must be a 1-D integer array, got shape {ids.shape} dtype {ids.dtype}"
        )
    if ids.size == 0:
        return []
    ids = ids.astype(np.int64, copy=False)
    lo, hi = int(ids.min()), int(ids.max())
    if lo < off[0] or hi >= off[-1]:
        raise InvalidArgumentError(
            f"sample id {lo if lo < off[0] else hi} is outside the dataset [{int(off[0])}, "
            f"{int(off[-1])}); pass the shard_offsets of the dataset these ids were planned for"
        )
    first = int(np.searchsorted(off, lo, side="right")) - 1  # the shard holding the smallest id
    if shards is None and hi < off[first + 1]:  # all in one shard (a whole-shard chunk): as they are
        return [ShardGroup(first, ids - off[first], np.arange(ids.size))]
    if shards is None and bool(np.all(ids[1:] >= ids[:-1])):  # runs: cut, nothing to move
        cut = np.searchsorted(ids, off, side="left").tolist()
        return [ShardGroup(s, ids[a:b] - off[s], np.arange(a, b))
                for s, (a, b) in enumerate(zip(cut[:-1], cut[1:])) if b > a]
    num_shards = off.size - 1
    if shards is None:
        shards = np.searchsorted(off, ids, side="right") - 1
    # numpy's stable sort is a radix sort for 8/16-bit keys: linear in the chunk.
    key = shards.astype(np.uint16 if num_shards <= 1 << 16 else np.uint32, copy=False)
    order = np.argsort(key, kind="stable")
    counts = np.bincount(key, minlength=num_shards)
    ends = np.cumsum(counts).tolist()
    sorted_ids = ids[order]
    return [ShardGroup(s, sorted_ids[e - c:e] - off[s], order[e - c:e])
            for s, (c, e) in enumerate(zip(counts.tolist(), ends)) if c]
