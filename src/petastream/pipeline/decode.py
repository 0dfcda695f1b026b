"""Decode stage: one worker's batches of a pass, read from the source in bulk.

A worker takes its chunks from an :class:`~petastream.stream.EpochPlan` (worker ``w`` of ``W``
owns the pass's batches ``w, w+W, ...``), decodes each chunk with one bulk read per shard,
writes the rows into plan order, and slices batches. No per-sample Python work.

Read-ahead: the plan says which shards the coming chunks need, so before decoding a chunk the
stage announces the shards of the next ``readahead`` chunks to the source
(``source.prefetch(shards)``: an MDS dataset's shard cache fetches, decompresses and checks
them in the background; an in-memory source ignores it).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Iterator
from typing import Any

import numpy as np

from petastream.errors import InternalError
from petastream.mds.sidecar import apply_logical
from petastream.source import Source
from petastream.stream.budget import chunk_samples
from petastream.stream.plan import RAMP

__all__ = ["read_chunk", "decode_batches", "decode_groups", "group_ranges", "slice_columns", "chunk_shards"]

# The first chunk of a pass is this small (then 4x larger each, up to the budget's chunk): the first
# batch waits for a read of a few batches, not of a whole shuffle window (~50-150 ms).
_FIRST_CHUNK = 1 << 13


def read_chunk(ds: Source, chunk: Any, columns: list[str] | None = None) -> dict[str, Any]:
    """Decode a chunk's samples into columns, in the chunk's order.

    A chunk inside one shard is read in its own order (each column gathered straight into
    place); otherwise each shard's part is read (in the chunk's order) and written into place,
    the shards in the order they arrive (see :func:`_arrival_order`).
    """
    groups = chunk.by_shard()
    if not groups:
        return ds.read_shard(0, np.zeros(0, np.int64), columns) if ds.num_shards else {}
    if len(groups) == 1:
        shard = groups[0].shard
        return ds.read_shard(shard, chunk.ids - ds.shard_offsets[shard], columns)
    return ds.read_parts(_arrival_order(ds, groups, chunk_shards(chunk)), len(chunk.ids), columns)


def _arrival_order(ds: Source, groups: list[Any], need: list[int]) -> Iterator[Any]:
    """``groups``, each shard read as soon as it is loaded: a loaded one first, else the one
    needed first (the read-ahead's order), so that decoding overlaps the downloads still running
    and frees read-ahead room instead of waiting on one shard while others sit loaded."""
    rank = {s: k for k, s in enumerate(need)}
    todo = sorted(groups, key=lambda g: rank[g.shard])
    while todo:
        k = next((j for j, g in enumerate(todo) if ds.is_loaded(g.shard)), 0)
        yield todo.pop(k)


def chunk_shards(chunk: Any) -> list[int]:
    """The shards a chunk reads, in the order its samples first need them."""
    return chunk.shards_in_need_order()


def slice_columns(block: dict[str, Any], start: int, stop: int) -> dict[str, Any]:
    from petastream.columns.ragged import Ragged

    return {name: (col.slice(start, stop) if isinstance(col, Ragged) else col[start:stop])
            for name, col in block.items()}


def _announced(ds: Source, chunks: Iterator[Any], depth: int,
               beyond: Callable[[Any], list[int]] | None = None) -> Iterator[Any]:
    """``chunks`` unchanged; before each is decoded, ``ds.prefetch`` is told the shards of it
    and of the next ``depth`` chunks, in plan order, then ``beyond(last of those chunks)``.
    The whole window is told every time: the shard cache treats shards no longer asked for as
    no longer needed soon (evictable).

    Where nothing is fetched (``ds.reads_in_place``: local shards mapped where they lie) the
    first chunk goes out with its own shards only (and ``beyond``): the chunks after it are the
    ramp's larger ones, and computing their ids first (every id of a small epoch, ~10 ms at
    300k) would delay the first batch for a read-ahead with nothing to do; they are told once
    it is out. Elsewhere they are told first, so their downloads start with the first one's."""
    if depth <= 0 and beyond is None:
        yield from chunks
        return
    window: deque[tuple[Any, list[int]]] = deque()

    def emit() -> Any:
        more = beyond(window[-1][0]) if beyond is not None else []
        ds.prefetch([s for _, shards in window for s in shards] + more)
        return window.popleft()[0]

    first = ds.reads_in_place
    for chunk in chunks:
        window.append((chunk, chunk_shards(chunk)))
        if first or len(window) > depth:
            first = False
            yield emit()
    while window:
        yield emit()


def _next_windows(order: Any, count: int) -> Callable[[Any], list[int]]:
    """For a chunk: the shards of the ``count`` shuffle windows after the one it ends in."""
    def beyond(chunk: Any) -> list[int]:
        k = chunk.last_position // order.window
        return [s for j in range(k + 1, min(k + 1 + count, order.num_windows)) for s in order.window_shards(j)]
    return beyond


def _chunk_limit(ds: Source, plan: Any, max_chunk: int | None) -> int:
    size = chunk_samples(ds.stored_bytes, len(ds), plan.order.window)  # the budget's rule
    return size if max_chunk is None else min(size, max_chunk)


def _decoded(ds: Source, plan: Any, chunks: Iterator[Any], columns: list[str] | None, logical: bool,
             readahead: int, ahead_windows: int, guard: Any = None) -> Iterator[tuple[Any, dict[str, Any]]]:
    """Each chunk with its decoded block (logical dtypes unless ``logical`` is False), its
    shards announced ahead as :func:`_announced` says; read by ``guard.read`` where a guard
    applies an ``on_error`` policy (:class:`~petastream.pipeline.isolate.DecodeGuard`)."""
    dtypes = ds.logical_dtypes if logical else {}
    beyond = _next_windows(plan.order, ahead_windows) if ahead_windows > 0 else None
    read = read_chunk if guard is None else guard.read
    for chunk in _announced(ds, chunks, readahead, beyond):
        yield chunk, apply_logical(read(ds, chunk, columns), dtypes)


def decode_batches(ds: Source, plan: Any, worker_id: int = 0, num_workers: int = 1,
                   columns: list[str] | None = None, logical: bool = True, readahead: int = 2,
                   max_chunk: int | None = None, ahead_windows: int = 0, guard: Any = None,
                   ) -> Generator[tuple[int, dict[str, Any]], None, None]:
    """Yield ``(batch_index, columns)`` for one worker's batches of ``plan``, in order.

    ``logical``: view columns as their logical dtypes (``ds.logical_dtypes``: Spark booleans
    stored as uint8 come back as bool); False gives the stored dtypes. ``readahead``: chunks
    whose shards are announced to the dataset ahead of decoding (0: none). ``max_chunk``: at most
    this many samples per bulk read (a loader fitting a bounded cache, see
    :func:`petastream.stream.budget.reach`); None: :func:`~petastream.stream.budget.chunk_samples`. ``ahead_windows``:
    also announce the shards of this many shuffle windows past each chunk's (read-ahead by
    window, for a window fitted to a bounded cache). ``guard``: a
    :class:`~petastream.pipeline.isolate.DecodeGuard` that reads each chunk under an
    ``on_error`` policy (a batch then comes out short by the rows it left out).
    """
    size = _chunk_limit(ds, plan, max_chunk)
    chunks = plan.chunks(worker_id, num_workers, max_samples=size, first_samples=min(size, _FIRST_CHUNK))
    for chunk, block in _decoded(ds, plan, chunks, columns, logical, readahead, ahead_windows, guard):
        bounds = chunk.bounds if guard is None else guard.bounds
        for i in range(chunk.num_batches):
            yield int(chunk.batch_indices[i]), slice_columns(block, int(bounds[i]), int(bounds[i + 1]))


def group_ranges(plan: Any, group: int) -> list[tuple[int, int]]:
    """The pass's batches in groups of up to ``group`` consecutive ones, ``[(first, stop), ...]``,
    every group's batches of one length: a short last batch (one rank, ``drop_last=False``)
    is a group of its own. Groups ramp up as chunks do (1, 2, 4, ... batches, then
    ``group``): the first batch of a pass waits for one batch's decode, not ``group``."""
    nb = plan.num_batches
    if nb == 0:
        return []
    last = plan.chunk_of(np.array([nb - 1]))
    full = nb - 1 if int(last.bounds[1]) < plan.batch_size else nb
    out, a, size = [], 0, 1
    while a < full:
        out.append((a, min(a + size, full)))
        a, size = out[-1][1], min(group, size * 2)
    return out + ([(full, nb)] if full < nb else [])


def decode_groups(ds: Source, plan: Any, group: int, worker_id: int = 0, num_workers: int = 1,
                  columns: list[str] | None = None, logical: bool = True, readahead: int = 2,
                  max_chunk: int | None = None, ahead_windows: int = 0, guard: Any = None,
                  ) -> Generator[tuple[int, dict[str, Any], int], None, None]:
    """Yield ``(group_index, columns, batches)`` for worker ``worker_id``'s groups of
    :func:`group_ranges` (group g goes to worker ``g % num_workers``), in order: the rows of
    ``batches`` consecutive batches of one length, contiguous in one decoded block, for a
    consumer that takes several batches per hand-over (no per-batch Python on either side).
    Chunks hold whole groups and grow as in :func:`decode_batches`; read-ahead is the same.
    ``guard``: as in :func:`decode_batches`, but one that never leaves rows out (its policy
    ``"raise"``, nothing excluded: a group's batches are all of one length).
    """
    ranges = group_ranges(plan, group)[worker_id::num_workers]
    cap = max(1, _chunk_limit(ds, plan, max_chunk) // plan.batch_size)  # batches per chunk, at least one whole group
    pending: deque[list[tuple[int, int, int]]] = deque()  # (group, first, stop) of each chunk

    def chunks() -> Iterator[Any]:
        want, todo = min(cap, max(1, _FIRST_CHUNK // plan.batch_size)), list(enumerate(ranges))
        i = 0
        while i < len(todo):
            picked: list[tuple[int, int, int]] = []
            count = 0
            while i < len(todo) and (not picked or count + (todo[i][1][1] - todo[i][1][0]) <= want):
                k, (a, b) = todo[i]
                picked.append((worker_id + k * num_workers, a, b))
                count += b - a
                i += 1
            want = min(cap, want * RAMP)  # as plan.chunks grows them
            pending.append(picked)
            yield plan.chunk_of(np.concatenate([np.arange(a, b) for _, a, b in picked]))

    for chunk, block in _decoded(ds, plan, chunks(), columns, logical, readahead, ahead_windows, guard):
        if guard is not None and guard.keep is not None:
            raise InternalError("batch groups read with rows left out (on_error or a resumed skip list)")
        j = 0
        for g, a, b in pending.popleft():
            yield g, slice_columns(block, int(chunk.bounds[j]), int(chunk.bounds[j + b - a])), b - a
            j += b - a
