"""Argument checks shared by the stream modules.

Every message names the argument, shows the value and says what to pass instead. Argument
errors are plain ``ValueError`` / ``TypeError`` for now (see the package docstring).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

from petastream.errors import InvalidArgumentError, InvalidArgumentTypeError

_INT64_MAX = np.iinfo(np.int64).max


def as_int(name: str, value: object) -> int:
    """``value`` as a Python int (numpy integers accepted; bools and floats refused)."""
    if isinstance(value, (bool, np.bool_)) or not hasattr(type(value), "__index__"):
        raise InvalidArgumentTypeError(
            f"{name} must be an integer, got {value!r} ({type(value).__name__}); "
            f"pass a whole number such as {name}=1"
        )
    return operator.index(value)  # type: ignore[call-overload]


def positive(name: str, value: object, what: str) -> int:
    """An int >= 1; ``what`` says what the argument means, for the message."""
    n = as_int(name, value)
    if n < 1:
        raise InvalidArgumentError(f"{name} must be >= 1 ({what}), got {n}; pass {name}=1 or more")
    return n


def non_negative(name: str, value: object, what: str) -> int:
    """An int >= 0; ``what`` says what the argument means, for the message."""
    n = as_int(name, value)
    if n < 0:
        raise InvalidArgumentError(f"{name} must be >= 0 ({what}), got {n}; pass {name}=0 or more")
    return n


def rank_in_world(rank: object, world_size: object) -> tuple[int, int]:
    """Validated ``(rank, world_size)``."""
    ws = positive("world_size", world_size, "the number of ranks / processes")
    r = non_negative("rank", rank, "this process's index among world_size ranks")
    if r >= ws:
        raise InvalidArgumentError(
            f"rank must be < world_size, got rank={r} with world_size={ws}; "
            f"ranks are numbered 0..{ws - 1}"
        )
    return r, ws


def worker_in_pool(worker_id: object, num_workers: object) -> tuple[int, int]:
    """Validated ``(worker_id, num_workers)``."""
    nw = positive("num_workers", num_workers, "loader workers of this rank; 1 without workers")
    w = non_negative("worker_id", worker_id, "this worker's index among num_workers")
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
