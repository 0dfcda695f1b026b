"""What one worker does for one pass: decode → user transform → framework conversion.

:class:`PassWork` is the unit the executors run (threads in this process, or DataLoader
worker processes, which receive it pickled): worker ``w`` of ``W`` calls ``work(w, W)`` and
gets ``(batch_index, batch)`` pairs of its share of the pass, in order. Everything it holds is
picklable when the user's ``transform`` is (the dataset pickles by reopening; plans are small).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from petastream.errors import InvalidArgumentError
from petastream.pipeline.decode import decode_batches, decode_groups, group_ranges, read_chunk
from petastream.pipeline.isolate import DecodeGuard, transformed
from petastream.pipeline.onerror import ErrorPolicy
from petastream.pipeline.stats import WorkerMeter
from petastream.source import Source

__all__ = ["BatchGroup", "PassWork"]

Batch = dict[str, Any]


class BatchGroup(tuple):
    """Several consecutive batches of one length handed over as one item: each converted
    part of all their rows, shaped ``[batches, rows per batch, ...]`` (a view: the rows are
    already in batch order). The epoch driver counts ``num_batches`` for it."""

    num_batches: int

    def __new__(cls, parts: tuple[Any, ...], num_batches: int) -> BatchGroup:
        return cls.of(tuple(p.reshape(num_batches, -1, *p.shape[1:]) for p in parts), num_batches)

    @classmethod
    def of(cls, parts: tuple[Any, ...], num_batches: int) -> BatchGroup:
        """A group of parts already shaped (or not per row at all)."""
        item = super().__new__(cls, parts)
        item.num_batches = num_batches
        return item

    def __reduce__(self) -> tuple[Any, ...]:  # (a tuple's own would call __new__ without num_batches)
        return BatchGroup.of, (tuple(self), self.num_batches)


@dataclass(frozen=True)
class PassWork:
    dataset: Source
    plan: Any  # an EpochPlan
    columns: list[str] | None = None
    transform: Callable[[Batch], Batch] | None = None
    convert: Callable[[Batch], Any] | None = None
    logical: bool = True
    readahead: int = 2
    max_chunk: int | None = None  # most samples per worker's chunk (None: decode's default)
    ahead_windows: int = 0  # shuffle windows past each chunk's whose shards are announced
    group: int | None = None  # BatchGroups of up to this many batches (no transform; convert -> tuple)
    on_error: ErrorPolicy | None = None  # None: errors propagate as raised, unlocated
    skip_ids: np.ndarray | None = None  # sample ids skipped before (sorted): left out of every read

    def detached(self) -> dict[str, Any]:
        """Everything but the source: what a worker process that holds the source open already
        receives per pass (``PassWork(source, **detached)`` rebuilds the work there)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "dataset"}

    @property
    def num_batches(self) -> int:
        return int(self.plan.num_batches)

    @property
    def num_items(self) -> int:
        """Items a pass hands over: batches, or BatchGroups (``group > 1``)."""
        return self.num_batches if self.group is None else len(group_ranges(self.plan, self.group))

    @property
    def may_skip(self) -> bool:
        """Whether a batch may come out short of rows (``on_error`` may skip, or a resumed
        state carries skipped samples): not for :class:`BatchGroup` hand-overs."""
        return (self.on_error is not None and self.on_error.may_skip) or \
            (self.skip_ids is not None and self.skip_ids.size > 0)

    def __call__(self, worker_id: int = 0, num_workers: int = 1) -> Iterator[tuple[int, Any]]:
        dataset = self.dataset.for_epoch(self.plan.order.seed, self.plan.order.epoch)
        meter = WorkerMeter(worker_id, len(range(worker_id, self.num_items, num_workers)))
        guard = None
        if self.on_error is not None:
            skip = self.skip_ids if self.skip_ids is not None else np.zeros(0, np.int64)
            guard = DecodeGuard(self.on_error, skip, self.dataset.url, read_chunk)
        if self.group is not None:
            yield from self._groups(dataset, worker_id, num_workers, meter, guard)
            return
        batches = decode_batches(dataset, self.plan, worker_id, num_workers, self.columns, self.logical,
                                 self.readahead, self.max_chunk, self.ahead_windows, guard)
        with contextlib.closing(batches):  # (closing this pass's items stops the decode's read-ahead)
            yield from self._batches(batches, meter, guard)

    def _batches(self, batches: Iterator[tuple[int, Any]], meter: WorkerMeter,
                 guard: DecodeGuard | None) -> Iterator[tuple[int, Any]]:
        transform, convert, policy = self.transform, self.convert, self.on_error
        clock = time.perf_counter
        while True:
            t0 = clock()
            try:
                index, batch = next(batches)
            except StopIteration:
                return
            t1 = clock()
            dropped, bads = 0, []
            if guard is not None:  # (rows left out of this chunk: rare, looked up only then)
                if guard.keep is not None:
                    dropped = guard.dropped(int(np.searchsorted(guard.chunk.batch_indices, index)))
                if guard.bads:
                    bads = guard.take_bads()
            if transform is not None:
                batch, failed = transformed(transform, batch, policy, _ids_of(guard, index), self.dataset.url,
                                            self.dataset.shard_offsets)
                if failed:
                    bads, dropped = bads + failed, dropped + len(failed)
            item = batch if convert is None else convert(batch)
            meter.decode_s += t1 - t0
            meter.transform_s += clock() - t1
            yield index, meter.item(item, dropped, bads)

    def _groups(self, dataset: Source, worker_id: int, num_workers: int, meter: WorkerMeter,
                guard: DecodeGuard | None) -> Iterator[tuple[int, Any]]:
        convert = self.convert
        if self.transform is not None or convert is None or self.may_skip:
            raise InvalidArgumentError("batch groups need a convert to a tuple of parts, no transform and "
                                       "on_error='raise' with nothing skipped")
        assert self.group is not None
        groups = decode_groups(dataset, self.plan, self.group, worker_id, num_workers, self.columns,
                               self.logical, self.readahead, self.max_chunk, self.ahead_windows, guard)
        clock = time.perf_counter
        with contextlib.closing(groups):
            while True:
                t0 = clock()
                try:
                    index, rows, n = next(groups)
                except StopIteration:
                    return
                t1 = clock()
                parts = convert(rows)
                meter.decode_s += t1 - t0
                meter.transform_s += clock() - t1
                yield index, meter.item(BatchGroup(parts, n))


def _ids_of(guard: DecodeGuard | None, index: int) -> Callable[[], np.ndarray]:
    """The sample ids of batch ``index``'s rows, asked only when a transform fails on it."""
    def ids() -> np.ndarray:
        if guard is None:
            raise InvalidArgumentError("sample ids of a batch need an on_error policy")
        return guard.ids(int(np.searchsorted(guard.chunk.batch_indices, index)))
    return ids

