"""PyTorch adapter: batches as dicts of tensors, on CPU or a device.

``petastream.torch.loader(url, batch_size=1024, shuffle=True, device="cuda")`` streams an MDS
dataset (ours or Mosaic-written) as ``dict[str, Tensor]``:

* numeric columns become tensors sharing the decoded numpy memory (``torch.from_numpy``);
  ``uint16``/``uint32`` widen to ``int32``/``int64`` (as Petastorm; torch lacks most ops on them);
* ``str``/``bytes``/decimal columns come back as Python lists, variable-length arrays as lists
  of tensors (Petastorm raises ``TypeError`` on both);
* with a CUDA ``device`` the decode threads pin each batch (page-locked host memory) and the
  loader issues the host-to-device copy of the *next* batch with ``non_blocking=True`` before
  handing out the current one, so the copy overlaps the training step. Without CUDA the same
  code runs with no pinning and no copy.

Parallelism: ``num_workers`` decode threads by default; ``worker_type="process"`` runs them as
``torch.utils.data.DataLoader`` worker processes instead (for a Python ``transform`` or object
columns, which hold the GIL), with the same order, exactly-once and ``state_dict`` guarantees.
:class:`MDSIterableDataset` plugs the same plan into a ``DataLoader`` of your own.

Distributed: when ``torch.distributed`` is initialised, rank and world size come from it (or
pass ``rank``/``world_size``); every rank gets the same number of batches per epoch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from petastream._torch_workers import PlanBatches, iterate_in_processes
from petastream.errors import InvalidArgumentError
from petastream.loader import BatchLoader
from petastream.mds.columns import widen_unsigned
from petastream.mds.ndarray import Ragged

__all__ = ["MDSIterableDataset", "TorchLoader", "loader", "to_torch"]


def to_torch(col: Any) -> Any:
    """One decoded column as a tensor, or a list where a tensor cannot hold it."""
    if isinstance(col, Ragged):
        return [torch.from_numpy(np.array(col[i])) for i in range(len(col))]
    if isinstance(col, np.ndarray):
        if col.dtype == object:
            return col.tolist()
        col = col.astype(widen_unsigned(col.dtype), copy=False)
        # Packed-record views are unaligned and strided: one contiguous copy per batch.
        return torch.from_numpy(np.ascontiguousarray(col))
    return col


def _distributed_rank_world() -> tuple[int, int] | None:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return None


class TorchLoader(BatchLoader):
    """:class:`~petastream.loader.BatchLoader` yielding ``dict[str, Tensor | list]``.

    ``worker_type``: ``"thread"`` (default) or ``"process"`` (DataLoader worker processes;
    ``multiprocessing_context`` as in ``DataLoader``, e.g. ``"spawn"``).
    """

    def __init__(self, dataset: Any, batch_size: int = 32, *, device: str | torch.device | None = None,
                 pin_memory: bool | None = None, rank: int | None = None, world_size: int | None = None,
                 worker_type: str = "thread", multiprocessing_context: Any = None, **kwargs: Any):
        if worker_type not in ("thread", "process"):
            raise InvalidArgumentError(f"worker_type must be 'thread' or 'process', got {worker_type!r}")
        if rank is None and world_size is None:
            rank, world_size = _distributed_rank_world() or (0, 1)
        super().__init__(dataset, batch_size, rank=rank or 0, world_size=world_size or 1, **kwargs)
        self.device = torch.device(device) if device is not None else None
        cuda = self.device is not None and self.device.type == "cuda"
        self.pin_memory = cuda if pin_memory is None else (pin_memory and torch.cuda.is_available())
        self.worker_type = worker_type
        self.multiprocessing_context = multiprocessing_context

    def tensors(self, batch: dict[str, Any]) -> dict[str, Any]:
        """Decoded numpy columns -> tensors (lists where a tensor cannot hold them)."""
        return {name: to_torch(col) for name, col in batch.items()}

    def convert(self, batch: dict[str, Any]) -> dict[str, Any]:
        out = self.tensors(batch)
        if self.pin_memory:
            out = {k: v.pin_memory() if isinstance(v, torch.Tensor) else v for k, v in out.items()}
        return out

    def _run(self, plan: Any) -> Iterator[dict[str, Any]]:
        if self.worker_type == "thread":
            return super()._run(plan)
        # Worker processes convert to tensors (shared memory on the way back); the DataLoader's
        # own pin thread pins them in this process, where CUDA lives.
        batches = PlanBatches(self.dataset, plan, self.columns, self.transform, self.tensors,
                              self.logical_types)
        return iterate_in_processes(batches, num_workers=self.num_workers, prefetch=self.prefetch,
                                    pin_memory=self.pin_memory,
                                    multiprocessing_context=self.multiprocessing_context)

    def _to_device(self, batch: dict[str, Any]) -> dict[str, Any]:
        if self.device is None or self.device.type == "cpu":
            return batch
        return {k: v.to(self.device, non_blocking=self.pin_memory) if isinstance(v, torch.Tensor) else v
                for k, v in batch.items()}

    def _stage(self, batches: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        if self.device is None or self.device.type == "cpu":
            yield from batches
            return
        # Copy batch t+1 to the device before handing out batch t: the copy overlaps compute.
        pending = None
        for batch in batches:
            ready, pending = pending, self._to_device(batch)
            if ready is not None:
                yield ready
        if pending is not None:
            yield pending

class MDSIterableDataset(torch.utils.data.IterableDataset):
    """An MDS dataset as batches for a ``torch.utils.data.DataLoader`` of your own.

    ``DataLoader(MDSIterableDataset(url, 1024, shuffle=True), batch_size=None, num_workers=4)``:
    each worker decodes its share of the epoch's batches (bulk, as :class:`TorchLoader`), every
    sample comes exactly once per epoch over all workers, and the batches arrive in the same
    order whatever ``num_workers``. As with ``DistributedSampler``, call :meth:`set_epoch`
    before each epoch for a new order. Keyword arguments are :class:`TorchLoader`'s ordering and
    selection ones (``shuffle``, ``seed``, ``drop_last``, ``columns``, ``rank``,
    ``world_size``, ``transform``, ...). For resumable ``state_dict``, epochs and device copies
    handled for you, use ``TorchLoader(worker_type="process")``.
    """

    def __init__(self, dataset: Any, batch_size: int = 32, **kwargs: Any):
        for name in ("device", "pin_memory", "num_epochs", "worker_type", "num_workers", "prefetch"):
            if name in kwargs:
                raise InvalidArgumentError(
                    f"MDSIterableDataset does not take {name}=: the DataLoader you wrap it in does "
                    "the epochs, workers, prefetch and pinning (DataLoader(..., batch_size=None, "
                    "num_workers=..., pin_memory=...))"
                )
        self._loader = TorchLoader(dataset, batch_size, num_workers=1, **kwargs)

    def __len__(self) -> int:
        return len(self._loader)

    def set_epoch(self, epoch: int) -> None:
        self._loader.set_epoch(epoch)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        ld = self._loader
        plan = ld.planner.plan()  # each worker's copy plans the same epoch
        for _, batch in PlanBatches(ld.dataset, plan, ld.columns, ld.transform, ld.tensors, ld.logical_types):
            yield batch


def loader(url_or_dataset: Any, batch_size: int = 32, **kwargs: Any) -> TorchLoader:
    """A :class:`TorchLoader` over the MDS dataset at ``url_or_dataset``."""
    return TorchLoader(url_or_dataset, batch_size, **kwargs)
