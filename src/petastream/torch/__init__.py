"""PyTorch adapter: batches as dicts of tensors, on CPU or a device.

``petastream.torch.loader(url, batch_size=1024, shuffle=True, device="cuda")`` streams an MDS
dataset (ours or Mosaic-written) as ``dict[str, Tensor]``:

* numeric columns become tensors sharing the decoded numpy memory (``torch.from_numpy``);
  ``uint16``/``uint32`` widen to ``int32``/``int64`` (as Petastorm; torch lacks most ops on them);
* ``str``/``bytes``/decimal columns come back as Python lists, variable-length arrays as lists
  of tensors (Petastorm raises ``TypeError`` on both); with ``strings="jagged"``, ``str``/``bytes``
  columns as :class:`JaggedBytes` (``values`` + ``offsets`` tensors, no object per value);
* with a CUDA ``device`` the workers pack each batch's tensors into one pinned block and the
  loader copies batch ``t+1`` on a side stream while batch ``t`` is in use
  (:mod:`petastream.torch._staging`).

Iteration (the same for every petastream loader, :mod:`petastream.pipeline`): each
``iter(loader)`` is the next epoch, every sample exactly once, ``len(loader)`` batches;
``set_epoch(e)`` picks the epoch, ``state_dict()``/``load_state_dict()`` resume mid-epoch
(torchdata's ``Stateful`` protocol, so Lightning checkpoints pick them up).

Parallelism: ``num_workers`` decode threads by default; ``worker_type="process"`` runs them as
``torch.utils.data.DataLoader`` worker processes instead (for a Python ``transform`` or object
columns, which hold the GIL), with the same order, exactly-once and ``state_dict`` guarantees.
:class:`MDSIterableDataset` plugs the same work into a ``DataLoader`` of your own.

Distributed: rank and world size come from the arguments, else ``torch.distributed`` when
initialised, else torchrun's ``RANK``/``WORLD_SIZE``; every rank gets the same number of
batches per epoch.
"""

from __future__ import annotations

from petastream.torch._convert import to_torch
from petastream.torch._iterable import MDSIterableDataset
from petastream.torch._jagged import JaggedBytes
from petastream.torch._loader import TorchLoader, loader, resolve_rank_world
from petastream.torch._processes import DataLoaderExecutor

__all__ = ["DataLoaderExecutor", "JaggedBytes", "MDSIterableDataset", "TorchLoader", "loader", "resolve_rank_world", "to_torch"]
