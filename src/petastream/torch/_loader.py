"""``TorchLoader``: the pipeline with torch conversion, thread or process workers, device staging."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import torch

from petastream.errors import InvalidArgumentError
from petastream.pipeline import BatchLoader, PassRun, PassWork
from petastream.pipeline.threads import ThreadRun
from petastream.stream import EpochPlan
from petastream.torch._convert import pinning_for, to_tensors
from petastream.torch._processes import ProcessRun
from petastream.torch._staging import DeviceRun

__all__ = ["TorchLoader", "loader", "resolve_rank_world"]


def resolve_rank_world(rank: int | None, world_size: int | None) -> tuple[int, int]:
    """This process's ``(rank, world_size)``, first found of: the arguments;
    ``torch.distributed`` when initialised; torchrun's ``RANK``/``WORLD_SIZE`` environment
    variables; a single process ``(0, 1)``."""
    if rank is not None or world_size is not None:
        return (0 if rank is None else rank), (1 if world_size is None else world_size)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    env_rank, env_world = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
    if env_rank is not None and env_world is not None:
        try:
            return int(env_rank), int(env_world)
        except ValueError:
            raise InvalidArgumentError(
                f"RANK={env_rank!r} / WORLD_SIZE={env_world!r} in the environment are not integers; "
                "fix them or pass rank= and world_size= to the loader") from None
    return 0, 1


def _check_device(device: Any) -> torch.device | None:
    if device is None:
        return None
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise InvalidArgumentError(f"device {device!r} is not a torch device ('cuda', 'cuda:1', 'cpu'): {e}") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise InvalidArgumentError(
                f"device={device!r}, but torch.cuda.is_available() is False (no GPU, or a CPU-only "
                "torch build); pass device=None to keep batches on the host")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise InvalidArgumentError(
                f"device={device!r}, but torch sees {torch.cuda.device_count()} CUDA device(s)")
    return dev


class TorchLoader(BatchLoader):
    """:class:`~petastream.pipeline.BatchLoader` yielding ``dict[str, Tensor | list]``.

    ``worker_type``: ``"thread"`` (default) or ``"process"`` (DataLoader worker processes;
    ``multiprocessing_context`` as in ``DataLoader``, e.g. ``"spawn"``). ``device``: batches
    arrive there, copied one batch ahead on a side stream (see
    :mod:`petastream.torch._staging`); ``pin_memory`` defaults to True for CUDA. ``rank`` /
    ``world_size``: see :func:`resolve_rank_world` for the defaults.
    """

    def __init__(self, dataset: Any, batch_size: int = 32, *, device: str | torch.device | None = None,
                 pin_memory: bool | None = None, rank: int | None = None, world_size: int | None = None,
                 worker_type: str = "thread", multiprocessing_context: Any = None, **kwargs: Any):
        if worker_type not in ("thread", "process"):
            raise InvalidArgumentError(f"worker_type must be 'thread' or 'process', got {worker_type!r}")
        self.device = _check_device(device)  # before any work: a bad device fails here, clearly
        rank, world_size = resolve_rank_world(rank, world_size)
        super().__init__(dataset, batch_size, rank=rank, world_size=world_size, **kwargs)
        cuda = self.device is not None and self.device.type == "cuda"
        self.pin_memory = cuda if pin_memory is None else bool(pin_memory) and torch.cuda.is_available()
        self.worker_type = worker_type
        self.multiprocessing_context = multiprocessing_context
        # Threads pin as they convert (for the device of the pass, see _work); worker processes
        # hand tensors over in shared memory and the DataLoader's pin thread pins them in this
        # process, where CUDA lives.
        self._pin_in_threads = self.pin_memory and worker_type == "thread"
        self._convert = to_tensors

    def _work(self, plan: EpochPlan) -> PassWork:
        work = super()._work(plan)
        if not self._pin_in_threads:
            return work
        # Resolved per pass, in the iterating thread: device="cuda" (or pin_memory without a
        # device) means the device current there now, as after torch.cuda.set_device(local_rank).
        indexed = self.device is not None and self.device.type == "cuda" and self.device.index is not None
        index = self.device.index if indexed else torch.cuda.current_device()
        return dataclasses.replace(work, convert=pinning_for(index))

    def _execute(self, work: PassWork) -> PassRun:
        if self.worker_type == "thread":
            return ThreadRun(work, work.num_batches, self.num_workers, self.prefetch)
        return ProcessRun(work, num_workers=self.num_workers, prefetch=self.prefetch,
                          pin_memory=self.pin_memory, multiprocessing_context=self.multiprocessing_context)

    def _stage(self, run: PassRun) -> PassRun:
        if self.device is None or self.device.type == "cpu":
            return run
        return DeviceRun(run, self.device)


def loader(url_or_dataset: Any, batch_size: int = 32, **kwargs: Any) -> TorchLoader:
    """A :class:`TorchLoader` over the MDS dataset at ``url_or_dataset``."""
    return TorchLoader(url_or_dataset, batch_size, **kwargs)
