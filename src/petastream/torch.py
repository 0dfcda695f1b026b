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

Distributed: when ``torch.distributed`` is initialised, rank and world size come from it (or
pass ``rank``/``world_size``); every rank gets the same number of batches per epoch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from petastream.loader import BatchLoader
from petastream.mds.columns import widen_unsigned
from petastream.mds.ndarray import Ragged

__all__ = ["TorchLoader", "loader", "to_torch"]


def to_torch(col: Any) -> Any:
    """One decoded column as a tensor, or a list where a tensor cannot hold it."""
    if isinstance(col, Ragged):
        return [torch.from_numpy(np.array(col[i])) for i in range(len(col))]
    if isinstance(col, np.ndarray):
        if col.dtype == object:
            return list(col)
        col = col.astype(widen_unsigned(col.dtype), copy=False)
        # Packed-record views are unaligned and strided: one contiguous copy per batch.
        return torch.from_numpy(np.ascontiguousarray(col))
    return col


def _distributed_rank_world() -> tuple[int, int] | None:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return None


class TorchLoader(BatchLoader):
    """:class:`~petastream.loader.BatchLoader` yielding ``dict[str, Tensor | list]``."""

    def __init__(self, dataset: Any, batch_size: int = 32, *, device: str | torch.device | None = None,
                 pin_memory: bool | None = None, rank: int | None = None, world_size: int | None = None,
                 **kwargs: Any):
        if rank is None and world_size is None:
            rank, world_size = _distributed_rank_world() or (0, 1)
        super().__init__(dataset, batch_size, rank=rank or 0, world_size=world_size or 1, **kwargs)
        self.device = torch.device(device) if device is not None else None
        cuda = self.device is not None and self.device.type == "cuda"
        self.pin_memory = cuda if pin_memory is None else (pin_memory and torch.cuda.is_available())

    def convert(self, batch: dict[str, Any]) -> dict[str, Any]:
        out = {name: to_torch(col) for name, col in batch.items()}
        if self.pin_memory:
            out = {k: v.pin_memory() if isinstance(v, torch.Tensor) else v for k, v in out.items()}
        return out

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

def loader(url_or_dataset: Any, batch_size: int = 32, **kwargs: Any) -> TorchLoader:
    """A :class:`TorchLoader` over the MDS dataset at ``url_or_dataset``."""
    return TorchLoader(url_or_dataset, batch_size, **kwargs)
