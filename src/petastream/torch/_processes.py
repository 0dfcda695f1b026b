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

from petastream._parent_death import ExitWithParent
from petastream.pipeline.work import PassWork

__all__ = ["PassDataset", "ProcessRun", "worker_slot"]


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


class ProcessRun:
    """A pass run by ``num_workers`` DataLoader worker processes, in plan order."""

    def __init__(self, work: PassWork, *, num_workers: int, prefetch: int, pin_memory: bool,
                 multiprocessing_context: Any = None):
        self._n, self._t = work.num_batches, 0
        self._it: Any = None
        if self._n:
            loader = torch.utils.data.DataLoader(
                PassDataset(work), batch_size=None, num_workers=min(num_workers, self._n),
                prefetch_factor=prefetch, pin_memory=pin_memory,
                multiprocessing_context=multiprocessing_context,
                worker_init_fn=ExitWithParent(),  # a killed trainer must not leave them running
            )
            self._it = iter(loader)

    def __iter__(self) -> ProcessRun:
        return self

    def __next__(self) -> Any:
        if self._it is None or self._t >= self._n:
            raise StopIteration
        try:
            index, batch = next(self._it)
        except StopIteration:
            self.close()
            raise RuntimeError(f"the decode worker processes ended after {self._t} of {self._n} "
                               "batches: their plan and the consumer's disagree") from None
        except BaseException as e:
            dead = self._dead_workers(wait=not isinstance(e, RuntimeError))
            self.close()
            if dead and not isinstance(e, RuntimeError):  # e.g. a reset pipe from the dead one
                raise RuntimeError(f"DataLoader worker(s) {dead} exited unexpectedly while decoding "
                                   f"batch {self._t} of {self._n}") from e
            raise
        if index != self._t:
            self.close()
            raise RuntimeError(f"decode worker returned batch {index}, expected {self._t}")
        self._t += 1
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
