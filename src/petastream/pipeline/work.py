"""What one worker does for one pass: decode → user transform → framework conversion.

:class:`PassWork` is the unit the executors run (threads in this process, or DataLoader
worker processes, which receive it pickled): worker ``w`` of ``W`` calls ``work(w, W)`` and
gets ``(batch_index, batch)`` pairs of its share of the pass, in order. Everything it holds is
picklable when the user's ``transform`` is (the dataset pickles by reopening; plans are small).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from petastream.errors import InvalidArgumentError
from petastream.pipeline.decode import decode_batches, decode_groups, group_ranges
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

    def __call__(self, worker_id: int = 0, num_workers: int = 1) -> Iterator[tuple[int, Any]]:
        transform, convert = self.transform, self.convert
        dataset = self.dataset.for_epoch(self.plan.order.seed, self.plan.order.epoch)
        if self.group is not None:
            if transform is not None or convert is None:
                raise InvalidArgumentError("batch groups need a convert to a tuple of parts and no transform")
            for index, rows, n in decode_groups(dataset, self.plan, self.group, worker_id,
                                                num_workers, self.columns, self.logical,
                                                self.readahead, self.max_chunk, self.ahead_windows):
                parts = convert(rows)
                yield index, BatchGroup(parts, n)
            return
        for index, batch in decode_batches(dataset, self.plan, worker_id, num_workers,
                                           self.columns, self.logical, self.readahead,
                                           self.max_chunk, self.ahead_windows):
            if transform is not None:
                batch = transform(batch)
            yield index, (batch if convert is None else convert(batch))
