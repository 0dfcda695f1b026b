"""One pass of one rank, frozen: its batches, and chunks of them per worker.

An :class:`EpochPlan` is a snapshot taken by :meth:`StreamPlanner.begin_pass`; it is cheap to
pickle (the block tables are rebuilt where it is used) so a loader hands it to its workers.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypedDict

import numpy as np

from petastream.checks import as_int, positive_int
from petastream.errors import InvalidArgumentError, OutOfRangeError
from petastream.stream._checks import rank_in_world, worker_in_pool
from petastream.stream.grouping import ShardGroup, group_by_shard, shard_offsets
from petastream.stream.order import EpochOrder
from petastream.stream.partition import count_batches, global_positions, rank_positions

__all__ = ["Chunk", "EpochPlan", "RAMP"]

RAMP = 4
"""Growth of chunk sizes from ``first_samples`` (see :meth:`EpochPlan.chunks`)."""


@dataclass(frozen=True, eq=False)
class Chunk:
    """A run of whole batches of one worker, in order, for one bulk read.

    ``ids`` are global sample ids; batch i of the chunk is ``ids[bounds[i]:bounds[i+1]]`` and is
    the rank's batch ``batch_indices[i]`` of the pass (0-based; one worker's batches are
    ``worker_id, worker_id + num_workers, ...``). ``last_position``: the furthest position
    of G it reads (which window it reaches; -1 when empty).
    """

    ids: np.ndarray
    bounds: np.ndarray
    batch_indices: np.ndarray
    shard_offsets: np.ndarray
    last_position: int = -1
    shards: np.ndarray | None = None
    """Each id's shard, where the order knew it (shuffled); else found when grouping."""

    @property
    def num_batches(self) -> int:
        return int(self.batch_indices.size)

    def __len__(self) -> int:
        return self.num_batches

    def batch(self, i: int) -> np.ndarray:
        """The ids of the chunk's i-th batch (a view)."""
        return self.ids[self.bounds[i] : self.bounds[i + 1]]

    def batches(self) -> Iterator[np.ndarray]:
        for i in range(self.num_batches):
            yield self.batch(i)

    def by_shard(self) -> list[ShardGroup]:
        """The chunk's ids grouped by shard: see :func:`group_by_shard` (computed once)."""
        return self._groups

    def shards_in_need_order(self) -> list[int]:
        """The shards the chunk reads, in the order its samples first need them."""
        groups = self._groups
        first = [int(g.positions[0]) for g in groups]
        return [groups[i].shard for i in sorted(range(len(groups)), key=first.__getitem__)]

    @functools.cached_property
    def _groups(self) -> list[ShardGroup]:  # read ahead, then decoded: grouped once
        return group_by_shard(self.ids, self.shard_offsets, self.shards)


class _Layout(TypedDict):
    """The keyword arguments of :func:`~petastream.stream.partition.rank_positions`."""

    num_samples: int
    start: int
    batch_size: int
    world_size: int
    rank: int
    drop_last: bool


class EpochPlan:
    """Rank ``rank``'s batches over positions ``[start, N)`` of epoch ``epoch``'s order."""

    def __init__(
        self,
        order: EpochOrder,
        *,
        batch_size: int,
        world_size: int,
        rank: int,
        drop_last: bool,
        start: int = 0,
    ) -> None:
        self.order = order
        self.batch_size = positive_int("batch_size", batch_size, "samples per rank per batch")
        self.rank, self.world_size = rank_in_world(rank, world_size)
        self.drop_last = bool(drop_last)
        self.start = as_int("start", start)
        if not 0 <= self.start <= order.num_samples:
            raise InvalidArgumentError(
                f"start must be in [0, {order.num_samples}] (a position of G), got {self.start}"
            )
        self.num_batches = count_batches(
            order.num_samples, batch_size, world_size, drop_last, start
        )
        self.shard_offsets = shard_offsets(order.shard_sizes)

    def __repr__(self) -> str:
        return (
            f"EpochPlan(epoch={self.epoch}, start={self.start}, num_batches={self.num_batches}, "
            f"batch_size={self.batch_size}, world_size={self.world_size}, rank={self.rank}, "
            f"drop_last={self.drop_last})"
        )

    @property
    def epoch(self) -> int:
        return self.order.epoch

    @property
    def num_samples(self) -> int:
        return self.order.num_samples

    @property
    def global_batch_size(self) -> int:
        return self.batch_size * self.world_size

    def batch(self, t: int) -> np.ndarray:
        """This rank's batch t of the pass."""
        t = self._batch_index(t)
        pos, _ = rank_positions(np.array([t]), **self._layout())
        return self.order.take(pos)

    def global_batch(self, t: int) -> np.ndarray:
        """Global batch t: every rank's batch t, concatenated in rank order."""
        t = self._batch_index(t)
        pos = global_positions(
            t,
            num_samples=self.num_samples,
            start=self.start,
            global_batch_size=self.global_batch_size,
            world_size=self.world_size,
            drop_last=self.drop_last,
        )
        return self.order.take(pos)

    def worker_num_batches(self, worker_id: int = 0, num_workers: int = 1) -> int:
        """How many of the pass's batches worker ``worker_id`` of ``num_workers`` produces."""
        w, nw = worker_in_pool(worker_id, num_workers)
        return len(range(w, self.num_batches, nw))

    def chunks(
        self, worker_id: int = 0, num_workers: int = 1, *, max_samples: int | None = None,
        first_samples: int | None = None,
    ) -> Iterator[Chunk]:
        """Worker ``worker_id``'s batches (t % num_workers == worker_id), in order, in chunks.

        A chunk holds ``max(1, max_samples // batch_size)`` batches (the last one fewer), so
        at most ``max(max_samples, batch_size)`` ids; ``max_samples`` defaults to the shuffle
        window. ``first_samples``: the first chunk holds at most this many ids (at least one
        batch) and each next one :data:`RAMP` times more, up to ``max_samples``, so that the
        first batch waits for a small read, not a whole window. Arguments are checked now;
        chunks are computed as they are taken.
        """
        w, nw = worker_in_pool(worker_id, num_workers)
        limit = (
            self.order.window
            if max_samples is None
            else positive_int("max_samples", max_samples, "the most sample ids per chunk")
        )
        per_chunk = max(1, limit // self.batch_size)
        first = per_chunk if first_samples is None else min(per_chunk, max(
            1, positive_int("first_samples", first_samples, "sample ids in the first chunk") // self.batch_size))
        return self._chunks(w, nw, per_chunk, first)

    def chunk_of(self, batches: np.ndarray) -> Chunk:
        """The chunk of the pass's batches ``batches`` (valid indices, in the order given)."""
        batches = np.asarray(batches, dtype=np.int64)
        pos, bounds = rank_positions(batches, **self._layout())
        ids, shards = self.order.take_with_shards(pos)
        return Chunk(ids, bounds, batches, self.shard_offsets, int(pos.max()) if pos.size else -1, shards)

    def _chunks(self, w: int, nw: int, per_chunk: int, first_chunk: int) -> Iterator[Chunk]:
        mine = len(range(w, self.num_batches, nw))
        first, size = 0, first_chunk
        while first < mine:
            k = np.arange(first, min(first + size, mine), dtype=np.int64)
            first, size = first + size, min(per_chunk, size * RAMP)
            yield self.chunk_of(w + k * nw)

    def _layout(self) -> _Layout:
        return {
            "num_samples": self.num_samples,
            "start": self.start,
            "batch_size": self.batch_size,
            "world_size": self.world_size,
            "rank": self.rank,
            "drop_last": self.drop_last,
        }

    def _batch_index(self, t: int) -> int:
        t = as_int("t", t)
        if not 0 <= t < self.num_batches:
            raise OutOfRangeError(
                f"batch {t} is out of range; this pass has {self.num_batches} batches per rank"
            )
        return t
