"""Decode in ``torch.utils.data.DataLoader`` worker processes instead of threads.

Threads suffice when decode is numpy/Arrow work that releases the GIL; a ``transform`` written
in Python, or object columns (str/bytes), hold the GIL, and processes scale past it. Both modes
run the same plan: worker ``w`` of ``W`` decodes the pass's batches ``w, w+W, ...``
(:meth:`~petastream.stream.EpochPlan.chunks`), and a ``DataLoader`` over an ``IterableDataset``
takes one item from each worker in turn, so batches arrive in plan order with no reordering
buffer. Each item carries its batch index and the consumer checks it: a broken invariant raises
instead of silently reordering data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch.utils.data

from petastream.batches import iter_batches
from petastream.mds.dataset import MDSDataset

__all__ = ["PlanBatches", "worker_slot", "iterate_in_processes"]


def worker_slot() -> tuple[int, int]:
    """``(worker_id, num_workers)`` of the current DataLoader worker; ``(0, 1)`` outside one."""
    info = torch.utils.data.get_worker_info()
    return (info.id, info.num_workers) if info is not None else (0, 1)


class PlanBatches(torch.utils.data.IterableDataset):
    """One pass's batches, split over the DataLoader's workers; yields ``(index, batch)``."""

    def __init__(self, dataset: MDSDataset, plan: Any, columns: list[str] | None,
                 transform: Callable[[dict[str, Any]], dict[str, Any]] | None,
                 convert: Callable[[dict[str, Any]], dict[str, Any]], logical: bool = True):
        self.dataset, self.plan, self.columns = dataset, plan, columns
        self.transform, self.convert, self.logical = transform, convert, logical

    def __len__(self) -> int:
        return self.plan.num_batches

    def __iter__(self) -> Iterator[tuple[int, dict[str, Any]]]:
        w, workers = worker_slot()
        for index, batch in iter_batches(self.dataset, self.plan, w, workers, self.columns, self.logical):
            if self.transform is not None:
                batch = self.transform(batch)
            yield index, self.convert(batch)


def iterate_in_processes(batches: PlanBatches, *, num_workers: int, prefetch: int, pin_memory: bool,
                         multiprocessing_context: Any = None) -> Iterator[dict[str, Any]]:
    """Run ``batches`` in ``num_workers`` processes; yield the batches in plan order."""
    n = len(batches)
    if n == 0:
        return
    loader = torch.utils.data.DataLoader(
        batches, batch_size=None, num_workers=min(num_workers, n), prefetch_factor=prefetch,
        pin_memory=pin_memory, multiprocessing_context=multiprocessing_context,
    )
    it = iter(loader)
    try:
        for t, (index, batch) in enumerate(it):
            if index != t:
                raise RuntimeError(f"decode worker returned batch {index}, expected {t}")
            yield batch
    finally:
        del it  # shuts the worker processes down now, also on an early break
