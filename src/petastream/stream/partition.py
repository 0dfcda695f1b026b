"""Global batches -> ranks -> workers, with the padding rule. Pure arithmetic on positions of G.

A *pass* covers the positions ``[start, N)`` of the epoch's order G (``start`` is 0 unless a
checkpoint resumed the epoch mid-way). With ``GBS = batch_size * world_size``:

* global batch t is positions ``start + t*GBS + [0, GBS)``; rank r's batch t is the r-th
  ``batch_size`` slice of it. Nothing here depends on the world size except that slicing, so
  every layout with the same GBS sees the same global batches.
* ``drop_last=True``: ``floor((N - start) / GBS)`` batches per rank; the tail is dropped.
* ``drop_last=False``: ``ceil((N - start) / GBS)`` batches per rank. If the last global batch is
  short it is completed by wrapping around to the start of G (position ``p >= N`` reads
  ``G[(p - N) % N]``), so every rank's last batch is a full ``batch_size`` and all ranks get
  the same number of batches (DDP never hangs). That pads fewer than GBS samples per epoch.
  Exception: with ``world_size == 1`` there is no padding; the last batch is short and every
  sample is seen exactly once.
* Worker w of W (loader workers of one rank) takes the rank's batches t with ``t % W == w``;
  reading workers round-robin gives batches 0, 1, 2, ... in order.
"""

from __future__ import annotations

import numpy as np

from petastream.checks import as_int, int_at_least
from petastream.errors import InvalidArgumentError

__all__ = ["count_batches", "petastorm_shard_to_rank", "rank_positions", "global_positions"]


def count_batches(
    num_samples: int, batch_size: int, world_size: int = 1, drop_last: bool = False, start: int = 0
) -> int:
    """Batches per rank in a pass over positions ``[start, num_samples)`` (see module doc)."""
    remaining = num_samples - start
    gbs = batch_size * world_size
    if remaining <= 0:
        return 0
    return remaining // gbs if drop_last else -(-remaining // gbs)


def rank_positions(
    batches: np.ndarray,
    *,
    num_samples: int,
    start: int,
    batch_size: int,
    world_size: int,
    rank: int,
    drop_last: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Positions in G (wrapped into ``[0, N)``) of rank ``rank``'s batches ``batches``.

    Returns ``(positions, bounds)``: the batches' positions concatenated in the given order,
    and int64 ``bounds`` of length ``len(batches) + 1`` (batch i is
    ``positions[bounds[i]:bounds[i+1]]``). ``batches`` must be valid batch indices of the pass.
    """
    batches = np.asarray(batches, dtype=np.int64)
    base = start + batches * (batch_size * world_size) + rank * batch_size
    pos = base[:, None] + np.arange(batch_size, dtype=np.int64)
    if world_size == 1 and not drop_last:
        lengths = np.clip(num_samples - base, 0, batch_size)
        if lengths.size and int(lengths.min()) < batch_size:
            pos = pos[np.arange(batch_size) < lengths[:, None]]
        bounds = np.zeros(batches.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=bounds[1:])
        return pos.ravel(), bounds
    pos = pos.ravel()
    _wrap(pos, num_samples)
    return pos, np.arange(batches.size + 1, dtype=np.int64) * batch_size


def global_positions(
    t: int,
    *,
    num_samples: int,
    start: int,
    global_batch_size: int,
    world_size: int,
    drop_last: bool,
) -> np.ndarray:
    """Positions of global batch t: all ranks' batch t concatenated in rank order."""
    lo = start + t * global_batch_size
    hi = lo + global_batch_size
    if world_size == 1 and not drop_last:
        hi = min(hi, num_samples)
    pos = np.arange(lo, hi, dtype=np.int64)
    _wrap(pos, num_samples)
    return pos


def petastorm_shard_to_rank(cur_shard: int | None, shard_count: int | None) -> tuple[int, int]:
    """Petastorm's ``cur_shard`` / ``shard_count`` (Horovod) as ``(rank, world_size)``.

    Both None means no sharding: ``(0, 1)``. The subset a shard sees is then exactly rank
    ``cur_shard``'s share of world size ``shard_count``, with the same padding rule.
    """
    if cur_shard is None and shard_count is None:
        return 0, 1
    if cur_shard is None or shard_count is None:
        raise InvalidArgumentError(
            f"cur_shard and shard_count go together, got cur_shard={cur_shard!r} and "
            f"shard_count={shard_count!r}; pass both (e.g. hvd.rank(), hvd.size()) or neither"
        )
    count = int_at_least("shard_count", shard_count, 1, fix="pass the number of shards")
    cur = as_int("cur_shard", cur_shard)
    if not 0 <= cur < count:
        raise InvalidArgumentError(
            f"cur_shard must be in [0, shard_count), got cur_shard={cur} with "
            f"shard_count={count}; shards are numbered 0..{count - 1}"
        )
    return cur, count


def _wrap(pos: np.ndarray, num_samples: int) -> None:
    """Padding positions ``p >= N`` read ``G[(p - N) % N]``: the start of G, again. In place."""
    if pos.size and int(pos.max()) >= num_samples:
        over = pos >= num_samples
        pos[over] = (pos[over] - num_samples) % num_samples
