"""Parallel execution in threads: ``W`` decode threads, batches handed out in plan order.

Decode is numpy gathers, zstd and Arrow work that release the GIL, so threads scale without
the cost of pickling batches between processes. Worker ``w`` produces the pass's batches
``w, w+W, ...`` into its own bounded queue and the consumer takes batch ``t`` from queue
``t % W``: batches come out in plan order with no reorder buffer.

Batches cross a queue in lists of ``_HANDOFF`` (a worker's first batch alone, for the first
batch's latency; its last list may be shorter; one by one for a source read through a bounded
cache, see :meth:`ThreadExecutor.run`): a queue's put and get wake the other thread,
which then waits for the interpreter lock, and per batch of 1,024 small rows that hand-over
cost as much as decoding the batch. (Putting a batch alone whenever the queue is empty would
fall back to one-by-one hand-over exactly when the consumer keeps up with its workers.) Memory
is bounded by ``W * (prefetch + 1) * _HANDOFF`` batches (views of their decoded chunks, mostly)
plus one decoded chunk per worker.

Failure handling, so that nothing hangs:

* an exception in a worker (decode, the user's transform, conversion) is handed to the
  consumer and re-raised there with its original type;
* a worker that ends without producing a batch it owes, or a thread that dies without a word,
  is noticed by the consumer within ``_LIVENESS_S`` and raised as
  :class:`~petastream.errors.PipelineError` (a ``RuntimeError``);
* :meth:`ThreadRun.close` (a ``break`` out of the loop, a newer iteration, garbage collection)
  stops the workers at their next batch and joins them.
"""

from __future__ import annotations

import collections
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

from petastream.errors import WorkerDiedError
from petastream.pipeline.ordered import PassOrder
from petastream.pipeline.work import PassWork

__all__ = ["ThreadExecutor", "ThreadRun"]

_LIVENESS_S = 0.5  # how often a waiting consumer checks that its producer is still alive
_JOIN_S = 5.0
_END = object()  # a worker's last item: it has produced everything it owes
_HANDOFF = 8  # items per list a worker puts (see the module doc)


class ThreadExecutor:
    """The :class:`~petastream.pipeline.executor.Executor` of ``num_workers`` decode threads, each
    keeping up to ``prefetch`` items ready. Threads start per pass (cheap); nothing is kept."""

    worker_type = "thread"

    def __init__(self, num_workers: int, prefetch: int):
        self.num_workers, self.prefetch = num_workers, prefetch

    def run(self, work: PassWork) -> ThreadRun:
        # A source read through a bounded cache had its shuffle window fitted to the reach of
        # decoders that stay a few batches ahead of the consumer; lists of batches would let
        # them start the next chunk's shards sooner and evict what other ranks of the node
        # still need (drifting ranks fetched shards 1.4x the ideal): hand over one by one there.
        handoff = 1 if work.dataset.cache_limit is not None else _HANDOFF
        return ThreadRun(work, work.num_items, self.num_workers, self.prefetch, handoff=handoff)

    def close(self) -> None:
        pass


class ThreadRun:
    """Iterate ``num_batches`` items produced by ``work(w, W)`` in ``num_workers`` threads."""

    def __init__(self, work: Callable[[int, int], Iterator[tuple[int, Any]]], num_batches: int,
                 num_workers: int, prefetch: int, name: str = "petastream-decode", handoff: int = _HANDOFF):
        self._handoff = max(1, handoff)
        self._workers = max(1, min(num_workers, num_batches))
        self._order = PassOrder(num_batches, self._workers)
        self._queues: list[queue.Queue] = [queue.Queue(maxsize=prefetch) for _ in range(self._workers)]
        self._taken: list[collections.deque] = [collections.deque() for _ in range(self._workers)]
        self._stop = threading.Event()
        self._closed = False
        self._threads = [
            threading.Thread(target=self._produce, args=(work, w), name=f"{name}-{w}", daemon=True)
            for w in range(self._workers)
        ] if num_batches else []
        for th in self._threads:
            th.start()

    def __iter__(self) -> ThreadRun:
        return self

    def __next__(self) -> Any:
        order = self._order
        if self._closed or order.done:
            raise StopIteration
        item = self._get(order.worker)
        if isinstance(item, BaseException):
            self.close()
            raise item
        if item is _END:
            self.close()
            raise order.ended_early()
        index, batch = item
        try:
            order.accept(index)  # a broken invariant must not silently reorder data
        except BaseException:
            self.close()
            raise
        return batch

    def _get(self, w: int) -> Any:
        taken = self._taken[w]
        if not taken:
            taken.extend(self._get_list(w))
        return taken.popleft()

    def _get_list(self, w: int) -> list[Any]:
        q, th = self._queues[w], self._threads[w]
        while True:
            try:
                return q.get(timeout=_LIVENESS_S)
            except queue.Empty:
                if self._closed:
                    raise StopIteration from None
                if not th.is_alive():  # it may have put its last item just before dying
                    try:
                        return q.get_nowait()
                    except queue.Empty:
                        self.close()
                        raise WorkerDiedError(f"decode thread {th.name} died without producing batch "
                                              f"{self._order.next} or an error") from None

    def close(self) -> None:
        """Stop the workers (they finish at their next batch) and join them."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        for taken in self._taken:
            taken.clear()
        for q in self._queues:  # unblock producers waiting on a full queue
            while True:
                try:
                    q.get_nowait()
                except queue.Empty:
                    break
        me = threading.current_thread()
        for th in self._threads:
            if th is not me:
                th.join(timeout=_JOIN_S)

    def _put(self, q: queue.Queue, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _produce(self, work: Callable[[int, int], Iterator[tuple[int, Any]]], w: int) -> None:
        q = self._queues[w]
        ready: list[Any] = []
        handoff = 1  # the first item at once (the first batch's latency), then full lists
        try:
            for item in work(w, self._workers):
                ready.append(item)
                if len(ready) >= handoff:
                    if not self._put(q, ready):
                        return
                    ready, handoff = [], self._handoff
            ready.append(_END)
        except BaseException as e:  # handed to the consumer (after the items before it), who raises it
            ready.append(e)
        self._put(q, ready)
