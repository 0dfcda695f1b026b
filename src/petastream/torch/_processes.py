"""Parallel execution in ``torch.utils.data.DataLoader`` worker processes.

Threads suffice when decode is numpy/Arrow work that releases the GIL; a ``transform`` written
in Python, or object columns (str/bytes), hold the GIL, and processes scale past it. Both run
the same :class:`~petastream.pipeline.work.PassWork`: worker ``w`` of ``W`` produces the pass's
batches ``w, w+W, ...``, and a ``DataLoader`` over an ``IterableDataset`` takes one item from
each worker in turn, so batches arrive in plan order with no reordering buffer. Each item
carries its batch index and the consumer checks it; a pass that ends short raises.

The ``DataLoader`` brings the failure handling: a worker's exception is re-raised here with its
original type, and a worker that dies (killed, out of memory) is reported within seconds.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import torch.utils.data

from petastream.errors import WorkerDiedError
from petastream.parent_death import ExitWithParent
from petastream.pipeline.ordered import PassOrder
from petastream.pipeline.work import PassWork

__all__ = ["DataLoaderExecutor", "PassDataset", "ProcessRun", "worker_slot"]


def worker_slot() -> tuple[int, int]:
    """``(worker_id, num_workers)`` of the current DataLoader worker; ``(0, 1)`` outside one."""
    info = torch.utils.data.get_worker_info()
    return (info.id, info.num_workers) if info is not None else (0, 1)


class PassDataset(torch.utils.data.IterableDataset):
    """One pass's batches, split over the DataLoader's workers; yields ``(index, batch)``."""

    def __init__(self, work: PassWork):
        self.work = work

    def __len__(self) -> int:
        return self.work.num_batches

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        return self.work(*worker_slot())


class DataLoaderExecutor:
    """The :class:`~petastream.pipeline.executor.Executor` of ``torch.utils.data.DataLoader``
    worker processes: a DataLoader per pass (its workers start with the pass and end with it,
    as a non-persistent DataLoader's do). ``pin_memory``: the DataLoader's pin thread pins the
    batches here, where CUDA lives; ``multiprocessing_context`` as in ``DataLoader``."""

    worker_type = "process"

    def __init__(self, num_workers: int, prefetch: int, *, pin_memory: bool = False,
                 multiprocessing_context: Any = None):
        self.num_workers, self.prefetch = num_workers, prefetch
        self.pin_memory, self.multiprocessing_context = pin_memory, multiprocessing_context

    def run(self, work: PassWork) -> ProcessRun:
        return ProcessRun(work, num_workers=self.num_workers, prefetch=self.prefetch,
                          pin_memory=self.pin_memory, multiprocessing_context=self.multiprocessing_context)

    def close(self) -> None:
        pass  # nothing outlives a pass


class ProcessRun:
    """A pass run by ``num_workers`` DataLoader worker processes, in plan order."""

    def __init__(self, work: PassWork, *, num_workers: int, prefetch: int, pin_memory: bool,
                 multiprocessing_context: Any = None):
        n = work.num_batches
        self._order = PassOrder(n, min(num_workers, n), who="DataLoader worker")
        self._it: Any = None
        if n:
            loader = torch.utils.data.DataLoader(
                PassDataset(work), batch_size=None, num_workers=min(num_workers, n),
                prefetch_factor=prefetch, pin_memory=pin_memory,
                multiprocessing_context=multiprocessing_context,
                worker_init_fn=ExitWithParent(),  # a killed trainer must not leave them running
            )
            self._it = iter(loader)

    def __iter__(self) -> ProcessRun:
        return self

    def __next__(self) -> Any:
        order = self._order
        if self._it is None or order.done:
            raise StopIteration
        try:
            index, batch = next(self._it)
        except StopIteration:
            self.close()
            raise order.ended_early() from None
        except BaseException as e:
            dead = self._dead_workers(wait=not isinstance(e, RuntimeError))
            self.close()
            if dead and not isinstance(e, RuntimeError):  # e.g. a reset pipe from the dead one
                raise WorkerDiedError(f"DataLoader worker(s) {dead} exited unexpectedly while decoding "
                                      f"batch {order.next} of {order.num_items}") from e
            raise
        try:
            order.accept(index)
        except BaseException:
            self.close()
            raise
        return batch

    def _dead_workers(self, wait: bool) -> list[str]:
        """Worker processes that died; ``wait``: give a dying one a moment to be reaped (a pipe
        it held can break before its exit code is known)."""
        workers = getattr(self._it, "_workers", None) or []  # the DataLoader iterator's processes
        deadline = time.monotonic() + (2.0 if wait else 0.0)
        while True:
            dead = [f"pid {w.pid} (exit code {w.exitcode})" for w in workers
                    if w.exitcode is not None and w.exitcode != 0]
            if dead or time.monotonic() >= deadline:
                return dead
            time.sleep(0.05)

    def close(self) -> None:
        if self._it is not None and self._dead_workers(wait=False):
            _without_handshake(self._it)
        it, self._it = self._it, None
        shutdown = getattr(it, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()  # now, also on an early break, not when the iterator is collected


def _without_handshake(it: Any) -> None:
    """A worker died: stop the others first, and give the DataLoader's shutdown a fresh
    ``done`` event to set. Its handshake sets an event shared with the workers, and a worker
    killed while checking that event dies holding its lock: ``Event.set()`` then blocks for
    good (seen in the test that kills a worker, where the run hung past its timeout)."""
    import multiprocessing

    workers = getattr(it, "_workers", None)
    if workers is None or not hasattr(it, "_workers_done_event"):
        return
    for w in workers:
        if w.is_alive():
            w.kill()
    for w in workers:
        w.join(timeout=5)
    it._workers_done_event = multiprocessing.Event()  # nobody waits on it: set() returns
