"""``InlineExecutor``: a pass run in the iterating thread, one batch when asked for it.

What Petastorm calls its ``'dummy'`` pool (compat's ``reader_pool_type='dummy'``): no thread,
no process, nothing read ahead of the consumer by a worker, so a debugger or a profiler sees
the whole pipeline on one stack. The source's own read-ahead (shards prefetched) still runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from petastream.pipeline.work import PassWork

__all__ = ["InlineExecutor", "InlineRun"]


class InlineExecutor:
    """An :class:`~petastream.pipeline.executor.Executor` of one worker: the caller's thread."""

    worker_type = "thread"
    num_workers = 1

    def run(self, work: PassWork) -> InlineRun:
        return InlineRun(work(0, 1))

    def close(self) -> None:
        pass


class InlineRun:
    """The items of ``work(0, 1)``, made as they are asked for."""

    def __init__(self, items: Iterator[tuple[int, Any]]):
        self._items = items

    def __iter__(self) -> InlineRun:
        return self

    def __next__(self) -> Any:
        return next(self._items)[1]

    def close(self) -> None:
        close = getattr(self._items, "close", None)
        if close is not None:
            close()
