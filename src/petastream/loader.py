"""Framework-free batch loader: epochs, parallel decode, bounded prefetch, resumable state.

One copy of the streaming logic under every adapter (``petastream.torch``, ``petastream.tf``):

* order, sharding over ranks and workers, and resumption come from
  :class:`~petastream.stream.StreamPlanner` (every sample exactly once per epoch; same seed ->
  same order; a rank's batch count is the same on every rank);
* decode runs in ``num_workers`` threads (numpy's gathers, zstd and Arrow release the GIL),
  worker ``w`` producing the rank's batches ``w, w+W, ...`` into its own bounded queue, and the
  consumer taking batch ``t`` from queue ``t % W``: batches come out in plan order, and memory
  is bounded by ``num_workers * (prefetch + 1)`` batches plus one chunk per worker, whatever
  the dataset size;
* a batch counts as consumed when it is handed out, so :meth:`state_dict` taken after batch
  ``t`` resumes at batch ``t+1``, also with another number of workers or ranks.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

from petastream.batches import iter_batches
from petastream.errors import InvalidArgumentError
from petastream.mds.dataset import MDSDataset
from petastream.stream import StreamPlanner

__all__ = ["BatchLoader"]

_DONE = object()


class BatchLoader:
    """Iterate batches (dicts of numpy columns) of an MDS dataset.

    ``num_epochs=None`` loops forever. ``rank``/``world_size`` split every global batch over
    ranks (see :class:`~petastream.stream.StreamPlanner` for padding and ``drop_last``).
    ``transform(batch) -> batch`` runs in the decode threads. ``logical_types``: columns come
    back as their logical dtypes (``dataset.logical_dtypes``, e.g. Spark booleans as bool);
    False keeps the stored ones (uint8).
    """

    def __init__(
        self,
        dataset: MDSDataset | str,
        batch_size: int = 32,
        *,
        shuffle: bool = False,
        seed: int = 0,
        num_epochs: int | None = 1,
        drop_last: bool = False,
        columns: list[str] | None = None,
        num_workers: int = 2,
        prefetch: int = 2,
        rank: int = 0,
        world_size: int = 1,
        block_size: int | None = None,
        window: int | None = None,
        transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        dataset_options: dict[str, Any] | None = None,
        logical_types: bool = True,
    ):
        self.dataset = dataset if isinstance(dataset, MDSDataset) else MDSDataset(dataset, **(dataset_options or {}))
        if num_epochs is not None and (not isinstance(num_epochs, int) or num_epochs < 1):
            raise InvalidArgumentError(f"num_epochs must be a positive int or None (forever), got {num_epochs!r}")
        if not isinstance(num_workers, int) or num_workers < 1:
            raise InvalidArgumentError(f"num_workers must be >= 1 (decode threads), got {num_workers!r}")
        if not isinstance(prefetch, int) or prefetch < 1:
            raise InvalidArgumentError(f"prefetch must be >= 1 batches per worker, got {prefetch!r}")
        if columns is not None:
            unknown = sorted(set(columns) - set(self.dataset.columns))
            if unknown:
                raise InvalidArgumentError(
                    f"columns {unknown} are not in the dataset; it has {sorted(self.dataset.columns)}"
                )
        extra = {k: v for k, v in (("block_size", block_size), ("window", window)) if v is not None}
        self.planner = StreamPlanner(self.dataset.shard_sizes, batch_size, shuffle=shuffle, seed=seed,
                                     world_size=world_size, rank=rank, drop_last=drop_last, **extra)
        self.num_epochs = num_epochs
        self.columns = columns
        self.num_workers = num_workers
        self.prefetch = prefetch
        self.transform = transform
        self.logical_types = logical_types
        self._passes = 0
        self._active = False

    def __len__(self) -> int:
        """Batches per epoch on this rank."""
        return self.planner.batches_per_epoch

    def set_epoch(self, epoch: int) -> None:
        """Start ``epoch`` (a new epoch restarts it; the current one keeps its progress)."""
        self.planner.set_epoch(epoch)

    def state_dict(self) -> dict[str, Any]:
        return self.planner.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.planner.load_state_dict(state)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self._active:
            raise RuntimeError("this loader is already being iterated; finish or close that pass first")
        self._active = True
        try:
            while self.num_epochs is None or self._passes < self.num_epochs:
                plan = self.planner.begin_pass()
                for batch in self._stage(self._run(plan)):
                    self.planner.advance(1)  # consumed once handed out
                    yield batch
                self._passes += 1
        finally:
            self._active = False

    def _run(self, plan: Any) -> Iterator[dict[str, Any]]:
        n = plan.num_batches
        if n == 0:
            return
        workers = min(self.num_workers, n)
        queues = [queue.Queue(maxsize=self.prefetch) for _ in range(workers)]
        stop = threading.Event()
        threads = [threading.Thread(target=self._produce, args=(plan, w, workers, queues[w], stop),
                                    name=f"petastream-decode-{w}", daemon=True) for w in range(workers)]
        for t in threads:
            t.start()
        try:
            for t in range(n):
                item = queues[t % workers].get()
                if isinstance(item, BaseException):
                    raise item
                index, batch = item
                if index != t:  # a broken invariant must not silently reorder data
                    raise RuntimeError(f"decode worker returned batch {index}, expected {t}")
                yield batch
        finally:
            stop.set()
            for q in queues:  # unblock producers waiting on a full queue
                while not q.empty():
                    q.get_nowait()
            for th in threads:
                th.join(timeout=5)

    def _produce(self, plan: Any, w: int, workers: int, q: queue.Queue, stop: threading.Event) -> None:
        try:
            for index, batch in iter_batches(self.dataset, plan, w, workers, self.columns, self.logical_types):
                if self.transform is not None:
                    batch = self.transform(batch)
                batch = self.convert(batch)
                while not stop.is_set():
                    try:
                        q.put((index, batch), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
        except BaseException as e:  # handed to the consumer, who raises it
            while not stop.is_set():
                try:
                    q.put(e, timeout=0.1)
                    return
                except queue.Full:
                    continue

    def convert(self, batch: dict[str, Any]) -> dict[str, Any]:
        """Per-batch conversion run in the decode threads; adapters override it."""
        return batch

    def _stage(self, batches: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """Last step before a batch is handed out, in the consumer's thread (device copies)."""
        return batches
