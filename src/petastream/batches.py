"""Batches of numpy columns: the stream planner's order, decoded in bulk from an MDS dataset.

The one data path under both framework adapters (torch, tf): a worker takes its chunks from an
:class:`~petastream.stream.EpochPlan`, decodes each chunk with one bulk read per shard, puts the
rows back into plan order with one gather, and slices batches. No per-sample Python work.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from petastream.mds.columns import concat_columns, take_columns
from petastream.mds.dataset import MDSDataset

__all__ = ["read_chunk", "iter_batches", "slice_columns"]


def read_chunk(ds: MDSDataset, chunk: Any, columns: list[str] | None = None) -> dict[str, Any]:
    """Decode a chunk's samples into columns, in the chunk's order."""
    groups = chunk.by_shard()
    parts = [ds.read_shard(g.shard, g.local_ids, columns) for g in groups]
    if not parts:
        return ds.read_shard(0, np.zeros(0, np.int64), columns) if ds.num_shards else {}
    block = concat_columns(parts)
    positions = np.concatenate([g.positions for g in groups])
    if np.array_equal(positions, np.arange(len(positions))):
        return block  # already in order (sequential reads)
    inverse = np.empty(len(positions), dtype=np.int64)
    inverse[positions] = np.arange(len(positions))
    return take_columns(block, inverse)


def slice_columns(block: dict[str, Any], start: int, stop: int) -> dict[str, Any]:
    from petastream.mds.ndarray import Ragged

    out = {}
    for name, col in block.items():
        if isinstance(col, Ragged):
            out[name] = col.take(np.arange(start, stop))
        else:
            out[name] = col[start:stop]
    return out


def iter_batches(ds: MDSDataset, plan: Any, worker_id: int = 0, num_workers: int = 1,
                 columns: list[str] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(batch_index, columns)`` for one worker's batches of ``plan``, in order."""
    for chunk in plan.chunks(worker_id, num_workers):
        block = read_chunk(ds, chunk, columns)
        for i in range(chunk.num_batches):
            yield int(chunk.batch_indices[i]), slice_columns(block, int(chunk.bounds[i]), int(chunk.bounds[i + 1]))
