"""Batches of numpy columns: the stream planner's order, decoded in bulk from an MDS dataset.

The one data path under both framework adapters (torch, tf): a worker takes its chunks from an
:class:`~petastream.stream.EpochPlan`, decodes each chunk with one bulk read per shard, writes the
rows into plan order, and slices batches. No per-sample Python work.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

import numpy as np

from petastream.mds.columns import scatter_columns
from petastream.mds.dataset import MDSDataset
from petastream.mds.sidecar import apply_logical

__all__ = ["read_chunk", "iter_batches", "slice_columns", "chunk_samples"]

_MIN_CHUNK = 1 << 16  # samples per bulk read, at least (unless rows are large) ...
_MAX_CHUNK_BYTES = 64 << 20  # ... and at most this many decoded bytes


def chunk_samples(ds: MDSDataset, window: int) -> int:
    """Samples per bulk read (one chunk per worker is in memory at a time).

    A shuffle window's ids come from a few blocks, so reading a window at once is cheap; with
    a tiny window (Petastorm's ``shuffling_queue_capacity``) reads of one batch would cost more
    than the decode, hence at least ``_MIN_CHUNK``. Large rows (images) cap it by bytes, so
    memory stays bounded by the row size, not the window.
    """
    raw = sum(int(s["raw_data"]["bytes"]) for s in ds.shards)
    row_bytes = max(1, raw // max(1, len(ds)))
    return max(1, min(max(window, _MIN_CHUNK), _MAX_CHUNK_BYTES // row_bytes))


def read_chunk(ds: MDSDataset, chunk: Any, columns: list[str] | None = None) -> dict[str, Any]:
    """Decode a chunk's samples into columns, in the chunk's order.

    A chunk inside one shard is read in its own order (each column gathered straight into
    place); otherwise each shard's part is read in ascending id order and written into place.
    """
    groups = chunk.by_shard()
    if not groups:
        return ds.read_shard(0, np.zeros(0, np.int64), columns) if ds.num_shards else {}
    if len(groups) == 1:
        shard = groups[0].shard
        return ds.read_shard(shard, chunk.ids - ds.shard_offsets[shard], columns)
    parts = [ds.read_shard(g.shard, g.local_ids, columns) for g in groups]
    return scatter_columns(parts, [g.positions for g in groups], len(chunk.ids))


def slice_columns(block: dict[str, Any], start: int, stop: int) -> dict[str, Any]:
    from petastream.mds.ndarray import Ragged

    return {name: (col.slice(start, stop) if isinstance(col, Ragged) else col[start:stop])
            for name, col in block.items()}


def iter_batches(ds: MDSDataset, plan: Any, worker_id: int = 0, num_workers: int = 1,
                 columns: list[str] | None = None, logical: bool = True,
                 ) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(batch_index, columns)`` for one worker's batches of ``plan``, in order.

    ``logical``: view columns as their logical dtypes (``ds.logical_dtypes``: Spark booleans
    stored as uint8 come back as bool); False gives the stored dtypes.
    """
    dtypes = ds.logical_dtypes if logical else {}
    chunks = plan.chunks(worker_id, num_workers, max_samples=chunk_samples(ds, plan.order.window))
    for chunk in _read_ahead(ds, chunks):
        block = apply_logical(read_chunk(ds, chunk, columns), dtypes)
        for i in range(chunk.num_batches):
            yield int(chunk.batch_indices[i]), slice_columns(block, int(chunk.bounds[i]), int(chunk.bounds[i + 1]))


_AHEAD_CHUNKS = 2  # chunks whose shards are asked for beyond the one being decoded


def _read_ahead(ds: MDSDataset, chunks: Iterator[Any]) -> Iterator[Any]:
    """Yield ``chunks``, first asking the dataset to load the shards of the current chunk and
    of the next few, in plan order (:meth:`MDSDataset.prefetch`), so that fetching,
    decompression and hash checks run ahead of decode. (Interim home: the loader pipeline's
    read-ahead stage takes this over.)"""
    window: deque[tuple[Any, np.ndarray]] = deque()

    def emit() -> Any:
        ds.prefetch([int(s) for _, shards in window for s in shards])
        return window.popleft()[0]

    for chunk in chunks:
        shards = np.unique(np.searchsorted(ds.shard_offsets, chunk.ids, side="right") - 1)
        window.append((chunk, shards))
        if len(window) > _AHEAD_CHUNKS:
            yield emit()
    while window:
        yield emit()
