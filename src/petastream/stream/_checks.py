"""The stream modules' own argument checks (rank in world, worker in pool, shard sizes), built
on :mod:`petastream.checks`, which has the general ones."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from petastream.checks import nonnegative_int, positive_int
from petastream.errors import InvalidArgumentError, InvalidArgumentTypeError

_INT64_MAX = np.iinfo(np.int64).max


def rank_in_world(rank: object, world_size: object) -> tuple[int, int]:
    """Validated ``(rank, world_size)``."""
    ws = positive_int("world_size", world_size, "the number of ranks / processes")
    r = nonnegative_int("rank", rank, "this process's index among world_size ranks")
    if r >= ws:
        raise InvalidArgumentError(
            f"rank must be < world_size, got rank={r} with world_size={ws}; "
            f"ranks are numbered 0..{ws - 1}"
        )
    return r, ws


def worker_in_pool(worker_id: object, num_workers: object) -> tuple[int, int]:
    """Validated ``(worker_id, num_workers)``."""
    nw = positive_int("num_workers", num_workers, "loader workers of this rank; 1 without workers")
    w = nonnegative_int("worker_id", worker_id, "this worker's index among num_workers")
    if w >= nw:
        raise InvalidArgumentError(
            f"worker_id must be < num_workers, got worker_id={w} with num_workers={nw}; "
            f"workers are numbered 0..{nw - 1}"
        )
    return w, nw


def shard_sizes_array(shard_sizes: Sequence[int] | np.ndarray) -> np.ndarray:
    """The per-shard sample counts as a read-only 1-D int64 array."""
    if isinstance(shard_sizes, (str, bytes)) or not hasattr(shard_sizes, "__len__"):
        raise InvalidArgumentTypeError(
            f"shard_sizes must be a sequence of per-shard sample counts, got "
            f"{type(shard_sizes).__name__}; pass e.g. [s['samples'] for s in index['shards']]"
        )
    arr = np.asarray(shard_sizes)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.ndim != 1:
        raise InvalidArgumentError(
            f"shard_sizes must be 1-D (one count per shard), got shape {arr.shape}; "
            "pass a flat list of sample counts"
        )
    if arr.dtype.kind not in "iu":
        raise InvalidArgumentTypeError(
            f"shard_sizes must hold integers, got dtype {arr.dtype} (first value "
            f"{arr[0]!r}); pass the per-shard 'samples' counts from index.json"
        )
    if arr.dtype.kind == "u" and int(arr.max()) > _INT64_MAX:
        raise InvalidArgumentError(f"shard_sizes has a count above 2**63-1: {int(arr.max())}")
    arr = arr.astype(np.int64)
    if arr.min() < 0:
        bad = int(np.flatnonzero(arr < 0)[0])
        raise InvalidArgumentError(
            f"shard_sizes[{bad}] is {int(arr[bad])}; sample counts must be >= 0 "
            "(empty shards are fine, negative counts are not)"
        )
    if int(arr.sum(dtype=np.float64)) > _INT64_MAX // 4:
        raise InvalidArgumentError(f"shard_sizes totals {int(arr.sum(dtype=np.float64))} samples, too many")
    arr.setflags(write=False)
    return arr
