"""What one worker does for one pass: decode → user transform → framework conversion.

:class:`PassWork` is the unit the executors run (threads in this process, or DataLoader
worker processes, which receive it pickled): worker ``w`` of ``W`` calls ``work(w, W)`` and
gets ``(batch_index, batch)`` pairs of its share of the pass, in order. Everything it holds is
picklable when the user's ``transform`` is (the dataset pickles by reopening; plans are small).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from petastream.mds.dataset import MDSDataset
from petastream.pipeline.decode import decode_batches

__all__ = ["PassWork"]

Batch = dict[str, Any]


@dataclass(frozen=True)
class PassWork:
    dataset: MDSDataset
    plan: Any  # an EpochPlan
    columns: list[str] | None = None
    transform: Callable[[Batch], Batch] | None = None
    convert: Callable[[Batch], Any] | None = None
    logical: bool = True
    readahead: int = 2
    max_chunk: int | None = None  # most samples per worker's chunk (None: decode's default)
    ahead_windows: int = 0  # shuffle windows past each chunk's whose shards are announced

    @property
    def num_batches(self) -> int:
        return int(self.plan.num_batches)

    def __call__(self, worker_id: int = 0, num_workers: int = 1) -> Iterator[tuple[int, Any]]:
        transform, convert = self.transform, self.convert
        for index, batch in decode_batches(self.dataset, self.plan, worker_id, num_workers,
                                           self.columns, self.logical, self.readahead,
                                           self.max_chunk, self.ahead_windows):
            if transform is not None:
                batch = transform(batch)
            yield index, (batch if convert is None else convert(batch))
