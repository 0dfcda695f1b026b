"""A shuffle that fits a bounded shard cache: the window, block size and read-ahead reach.

A shuffled epoch reads, at any time, the blocks of the windows its current positions fall in
(window k of G is a permutation of window k of the permuted blocks P, see
:mod:`petastream.stream.order`), plus what its read-ahead announces. With a window larger than
the cache holds, every chunk touches shards the cache has just evicted: each shard is
downloaded many times per epoch. Mosaic bounds its shuffle block by its cache for the same
reason.

:func:`fit_to_cache` picks, from the dataset and the limit only (so every rank of a job picks
the same, and the order stays a pure function of its arguments):

* ``block_size`` = the largest shard's sample count: blocks are whole shards, the fewest shards
  per window (shards no larger than the default block give the default blocks, hence the same
  block permutation);
* ``window`` = the largest (at most :data:`~petastream.stream.order.DEFAULT_WINDOW`) for which
  the shards two consecutive windows overlap (the reader's current one and the next its
  read-ahead reaches into), whatever the block permutation, take at most the limit less one
  largest shard (:func:`span_bytes`). That last shard of room is the slack a fill needs while
  a shard just read is still mapped.

Readers sharing one cache (the ranks of a node, each at its own pace) each get an equal share
of the limit (``readers``): the shards one reader's windows hold must not evict another's, and
eviction spares what every reader announced (:mod:`petastream.storage.announce`) only if the
announced sets fit together.

:func:`reach` then bounds a loader's chunks and read-ahead so that its positions in use (the
chunks being decoded plus the ones announced ahead) stay within one window. The smallest
workable limit is :data:`MIN_SHARDS` of the largest shard; below it :func:`fit_to_cache` raises.

This module is the one owner of what a bounded cache means for a loader: :class:`LoaderBudget`
decides, from the source's sizes and its limit, the window and block size, each worker's
chunk and read-ahead reach (:func:`chunk_samples` sizes a bulk read from the row size), and
:func:`reader_shares` what a reader may pin of the cache. The loader, the decode stage and
the MDS reader ask it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from petastream.checks import positive_int
from petastream.errors import InvalidArgumentError
from petastream.stream._checks import shard_sizes_array
from petastream.stream.order import DEFAULT_WINDOW

__all__ = ["CacheFit", "LoaderBudget", "MIN_SHARDS", "chunk_samples", "fit_to_cache", "local_readers",
           "reach", "reader_shares", "refit_advice", "span_bytes"]

log = logging.getLogger("petastream.stream")

MIN_CHUNK = 1 << 16  # samples per bulk read, at least (unless rows are large) ...
MAX_CHUNK_BYTES = 64 << 20  # ... and at most this many decoded bytes

MIN_SHARDS = 3
"""Shards a limited cache must hold for a shuffled read: the one read, the next, one of slack."""
_EXACT_SIZES = 1000  # distinct shard sizes up to which span_bytes solves the subset-sum exactly


@dataclass(frozen=True)
class CacheFit:
    """What :func:`fit_to_cache` chose and why (``reason`` is one line for the log)."""

    block_size: int
    window: int
    working_bytes: int  # most cache bytes the shards of two consecutive windows take
    reason: str


def span_bytes(block_samples: Sequence[int] | np.ndarray, block_bytes: Sequence[int] | np.ndarray,
               length: int) -> int:
    """An upper bound on the bytes of the blocks a run of ``length`` consecutive positions of P
    overlaps, whatever the block order: two end blocks (each at most the largest), and between
    them whole blocks whose samples sum to at most ``length - 2`` (the largest such sum, found
    exactly by a subset-sum over the block sizes) at the densest bytes per sample."""
    samples = np.asarray(block_samples, dtype=np.int64)
    nbytes = np.asarray(block_bytes, dtype=np.int64)
    keep = samples > 0
    samples, nbytes = samples[keep], nbytes[keep]
    if length <= 0 or not samples.size:
        return 0
    biggest = int(nbytes.max())
    if length == 1:
        return biggest
    density = float((nbytes / samples).max())
    inside = _largest_subset_sum(samples, length - 2)
    return min(int(nbytes.sum()), 2 * biggest + int(np.ceil(inside * density)))


def _largest_subset_sum(sizes: np.ndarray, cap: int) -> int:
    """The largest sum of a sub-multiset of ``sizes`` that is at most ``cap`` (a bitset over
    ``[0, cap]`` in a Python int; equal sizes in binary-split groups: O(distinct sizes x log))."""
    if cap <= 0:
        return 0
    values, counts = np.unique(sizes, return_counts=True)
    if values.size > _EXACT_SIZES:  # bound it by the capacity itself (no longer exact)
        return cap
    mask = (1 << (cap + 1)) - 1
    bits = 1
    for value, count in zip(values.tolist(), counts.tolist()):
        if value > cap:
            break
        count = min(count, cap // value)
        group = 1
        while count > 0:
            take = min(group, count)
            bits = (bits | (bits << (value * take))) & mask
            count -= take
            group *= 2
    return bits.bit_length() - 1


def fit_to_cache(
    shard_sizes: Sequence[int] | np.ndarray,
    shard_bytes: Sequence[int] | np.ndarray,
    cache_limit: int,
    readers: int = 1,
) -> CacheFit | None:
    """The shuffle that fits ``cache_limit`` bytes of cache shared by ``readers`` readers, each
    with its own position (None: the whole dataset fits, the defaults do too).
    ``shard_bytes``: each shard's size in the cache (raw, decompressed; 0 for shards read in
    place). Raises :class:`InvalidArgumentError` when a reader's share is below
    :data:`MIN_SHARDS`."""
    sizes = shard_sizes_array(shard_sizes)
    nbytes = np.asarray(shard_bytes, dtype=np.int64)
    limit = positive_int("cache_limit", cache_limit, "bytes of shard cache")
    readers = positive_int("readers", readers, "processes reading through the cache")
    cached = nbytes[sizes > 0]
    if not cached.size or int(cached.sum()) <= limit:
        return None
    biggest = int(cached.max())
    share = limit // readers
    room = share // biggest
    if room < MIN_SHARDS:
        need = MIN_SHARDS * biggest * readers
        if readers == 1:
            shared, whose, total = "", "the limit", ""
        else:
            shared = f" shared by {readers} readers of this node (LOCAL_WORLD_SIZE)"
            whose, total = f"each reader's share ({_mb(share)})", f" each, {_mb(need)} in all"
        raise InvalidArgumentError(
            f"cache_limit={_mb(limit)}{shared} is too small to shuffle this dataset: its largest "
            f"shard is {_mb(biggest)} in the cache (decompressed), so {whose} holds {room} of them, "
            f"and a shuffled read needs at least {MIN_SHARDS} (the shard it reads, the next one, one "
            f"being replaced) = {_mb(MIN_SHARDS * biggest)}{total}. Raise cache_limit to {_mb(need)} "
            "or more, or pass window= and block_size= (each shard is then downloaded more than "
            "once per epoch), or shuffle=False"
        )
    samples, nbytes = sizes[sizes > 0], cached
    n, budget = int(samples.sum()), share - biggest  # one shard of slack for a fill
    lo, hi = 1, min(n, DEFAULT_WINDOW)  # the largest window whose two-window span fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if span_bytes(samples, nbytes, min(n, 2 * mid)) <= budget:
            lo = mid
        else:
            hi = mid - 1
    working = span_bytes(samples, nbytes, min(n, 2 * lo))
    shared = "" if readers == 1 else f" shared by {readers} readers"
    below = "the limit" if readers == 1 else "a reader's share"
    reason = (f"cache_limit={_mb(limit)}{shared}, shards of up to {_mb(biggest)} cached: whole-shard "
              f"blocks and a window of {lo} samples keep the shards of two consecutive windows within "
              f"{_mb(working)}, one shard below {below} "
              f"(the dataset: {sizes.size} shards, {_mb(int(nbytes.sum()))} cached)")
    return CacheFit(block_size=int(sizes.max()), window=lo, working_bytes=working, reason=reason)


def refit_advice(fit: CacheFit, window: int, block_size: int, epoch: int,
                 shard_sizes: Sequence[int] | np.ndarray, shard_bytes: Sequence[int] | np.ndarray,
                 cache_limit: int) -> str | None:
    """Why an order a resumed state brings (its ``window`` and ``block_size``, adopted in
    place of ``fit``'s) downloads shards again and again under ``cache_limit``, and what to do;
    None when it fits the cache as well. The cache it needs is estimated as
    :func:`fit_to_cache` sizes it (whole-shard blocks: a lower bound for smaller blocks)."""
    if window <= fit.window and block_size == fit.block_size:
        return None
    sizes = shard_sizes_array(shard_sizes)
    samples, nbytes = sizes[sizes > 0], np.asarray(shard_bytes, dtype=np.int64)[sizes > 0]
    if not samples.size:
        return None
    reach_samples = min(int(samples.sum()), 2 * max(window, block_size))
    need = span_bytes(samples, nbytes, reach_samples) + int(nbytes.max())
    if need <= cache_limit:
        return None
    return (f"the resumed state's shuffle (window={window}, block_size={block_size}) replaces the "
            f"one fitted to cache_limit={_mb(cache_limit)} (window={fit.window}, block_size="
            f"{fit.block_size}): its windows span about {_mb_up(need)} of shards, more than the cache "
            "holds, so shards are evicted before their window is done and downloaded again, "
            "several times per epoch, in this and every later epoch of this loader. To keep the "
            f"saved order without that, raise cache_limit to {_mb_up(need)} or more; to refit, "
            f"start the next epoch on a loader without load_state_dict (set_epoch({epoch + 1}): "
            f"what is left of epoch {epoch} is skipped). States saved with cache_limit set carry "
            "the fitted window")


def reach(window: int, batch_size: int, world_size: int, workers: int, chunk: int,
          readahead: int) -> tuple[int, int, bool]:
    """``(chunk, readahead, fits)``: a worker's chunk (samples, whole batches) and read-ahead
    (chunks) no larger than asked, such that the positions of G a loader works on at once,
    ``(1 + readahead) * chunk * workers * world_size``, stay within one ``window`` (then they
    overlap at most two windows). Read-ahead is kept first (it keeps the link busy), the chunk
    shrinks to one batch; ``fits`` is False when even that is larger than the window."""
    per_round = batch_size * world_size * max(1, workers)  # positions of one batch per worker
    want = max(1, chunk // batch_size)
    for r in range(readahead, -1, -1):
        batches = window // ((1 + r) * per_round)
        if batches >= 1:
            return min(want, batches) * batch_size, r, True
    return batch_size, 0, False


def chunk_samples(stored_bytes: int, num_samples: int, window: int) -> int:
    """Samples per bulk read (one chunk per worker is in memory at a time).

    A shuffle window's ids come from a few blocks, so reading a window at once is cheap; with
    a tiny window (Petastorm's ``shuffling_queue_capacity``) reads of one batch would cost more
    than the decode, hence at least ``MIN_CHUNK``. Large rows (images) cap it by bytes, so
    memory stays bounded by the row size, not the window.
    """
    row_bytes = max(1, stored_bytes // max(1, num_samples))
    return max(1, min(max(window, MIN_CHUNK), MAX_CHUNK_BYTES // row_bytes))


def local_readers() -> int:
    """Reader processes of this node sharing its shard cache: torchrun's ``LOCAL_WORLD_SIZE``
    (one per rank; a rank's DataLoader workers read one plan together), else 1."""
    try:
        return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        return 1


def reader_shares(cache_limit: int | None, readers: int = 1) -> tuple[int | None, int | None]:
    """``(cached, ahead)``: bytes of a limited cache one reader may pin for shards already read
    and for read-ahead: a quarter each (the rest: the shards its decode threads are reading,
    and other readers), split between the node's ``readers`` (:func:`local_readers`)."""
    if cache_limit is None:
        return None, None
    share = cache_limit // (4 * readers)
    return share, share


class LoaderBudget:
    """What a loader's bounded cache allows: its ``fit`` (window and block size, or None for
    the defaults) and, per pass, each worker's chunk and read-ahead (:meth:`reach`).

    ``source`` is a :class:`petastream.source.Source`. A shuffled read through a cache with a
    ``cache_limit`` smaller than the source, with neither ``window`` nor ``block_size`` given,
    gets the window and block size that fit the limit (each shard is then fetched about once
    per epoch), and chunks and read-ahead that stay within one window.
    """

    def __init__(self, source: Any, *, shuffle: bool, window: int | None, block_size: int | None,
                 readahead: int):
        self.source, self.readahead = source, readahead
        self.fit: CacheFit | None = None
        if shuffle and window is None and block_size is None and source.cache_limit is not None:
            self.fit = fit_to_cache(source.shard_sizes, source.cached_shard_bytes(), source.cache_limit,
                                    readers=local_readers())
            if self.fit is not None:
                log.info("shuffle window %d samples, block size %d, to fit the shard cache: %s",
                         self.fit.window, self.fit.block_size, self.fit.reason)

    def order_options(self, window: int | None, block_size: int | None) -> dict[str, int]:
        """The planner's ``window``/``block_size``: the caller's, else the fitted ones."""
        given = {k: v for k, v in (("block_size", block_size), ("window", window)) if v is not None}
        if given or self.fit is None:
            return given
        return {"block_size": self.fit.block_size, "window": self.fit.window}

    def chunk(self, window: int) -> int:
        """Samples per bulk read for a pass whose shuffle window is ``window``."""
        return chunk_samples(self.source.stored_bytes, len(self.source), window)

    def reach(self, plan: Any, num_workers: int) -> tuple[int, int | None, int]:
        """``(readahead, max_chunk, ahead_windows)`` of a pass over ``plan``: the defaults, or,
        fitting a bounded cache, chunks and read-ahead within one window, and the next window
        announced."""
        if self.fit is None or not plan.order.shuffle:
            return self.readahead, None, 0
        window = plan.order.window
        chunk, readahead, fits = reach(window, plan.batch_size, plan.world_size, num_workers,
                                       self.chunk(window), self.readahead)
        if not fits:
            log.warning("one batch per worker (%d x %d workers x %d ranks) spans more than the "
                        "shuffle window of %d samples that fits cache_limit=%d: shards may be "
                        "downloaded more than once per epoch; raise cache_limit or use fewer workers",
                        plan.batch_size, num_workers, plan.world_size, window, self.source.cache_limit)
        log.debug("window %d: chunks of at most %d samples per worker, read-ahead %d chunks and "
                  "the next window", window, chunk, readahead)
        return readahead, chunk, 1 if self.readahead else 0


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def _mb_up(n: int) -> str:
    """``n`` bytes in MB rounded up: a size to set that is at least ``n``."""
    return f"{-(-n // 100_000) / 10:.1f} MB"
