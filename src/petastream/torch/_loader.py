"""``TorchLoader``: the pipeline with torch conversion, thread or process workers, device staging."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from petastream.capabilities import reading_strings
from petastream.columns.strings import jagged_columns
from petastream.errors import InvalidArgumentError
from petastream.pipeline import BatchLoader, PassRun, PassWork
from petastream.pipeline.executor import Executor
from petastream.pipeline.onerror import OnError
from petastream.pipeline.threads import ThreadExecutor
from petastream.source import Source
from petastream.torch._convert import pinning_for, to_pinned_tensors, to_tensors
from petastream.torch._packing import PIN_MIN_BYTES, pack_from
from petastream.torch._processes import DataLoaderExecutor
from petastream.torch._staging import DeviceRun

__all__ = ["TorchLoader", "loader", "resolve_rank_world"]

_WORKER_TYPES = ("thread", "process")


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


def _pin_per_pass(device: torch.device | None, min_bytes: int,
                  jagged: Mapping[str, str]) -> Callable[[PassWork], PassWork]:
    """A work stage: the pass's decode threads pin for the CUDA device of the pass, resolved in
    the iterating thread when the pass starts (``device="cuda"`` or ``pin_memory`` without a
    device mean the device current there, as after ``torch.cuda.set_device(local_rank)``).

    Bound for a CUDA device, a batch's numeric columns are packed into one pinned block, which
    the device stage copies in one transfer (:mod:`petastream.torch._packing`), when they hold
    at least ``min_bytes`` (smaller batches stay pageable); without a device (pinned batches for
    the user), each tensor is pinned by itself."""
    cuda = device is not None and device.type == "cuda"

    def stage(work: PassWork) -> PassWork:
        index = device.index if cuda and device is not None and device.index is not None \
            else torch.cuda.current_device()
        pin = pinning_for(index, pack_from(min_bytes, jagged=jagged)) if cuda else \
            pinning_for(index, functools.partial(to_pinned_tensors, jagged=jagged))
        return dataclasses.replace(work, convert=pin)
    return stage


def _read_ragged(work: PassWork) -> PassWork:
    """A work stage: the pass reads str/bytes columns as their bytes and offsets (for the
    jagged form), through a copy of the source (others may read the source itself as objects).
    Worker processes reopen the source and read objects; the conversion takes either."""
    return dataclasses.replace(work, dataset=reading_strings(work.dataset, "ragged"))


def _to_device(device: torch.device) -> Callable[[PassRun], PassRun]:
    return lambda run: DeviceRun(run, device)


class TorchLoader(BatchLoader):
    """A :class:`~petastream.pipeline.BatchLoader` yielding ``dict[str, Tensor | list]``.

    Reading (as :class:`~petastream.pipeline.BatchLoader`):

    * ``dataset``: a :class:`~petastream.source.Source` or an MDS dataset URL (opened with
      ``dataset_options``); ``batch_size`` rows per batch and rank; ``columns`` (None: all).
    * ``shuffle``, ``seed``, ``block_size``, ``window``: the seeded shuffle (the same for every
      worker count, worker type and world size); ``num_epochs`` per iteration (None: forever);
      ``drop_last``.
    * ``rank``, ``world_size``: default from :func:`resolve_rank_world` (``torch.distributed``,
      torchrun's environment).
    * ``transform(batch) -> batch``: in the workers, on numpy columns; ``logical_types``:
      logical dtypes (Spark booleans as bool); ``readahead``: chunks announced to the source.

    Workers and devices:

    * ``num_workers``, ``prefetch``: decode workers and items each keeps ready.
    * ``worker_type``: ``"thread"`` (default) or ``"process"`` (``torch.utils.data.DataLoader``
      worker processes, for a Python ``transform`` or object columns, which hold the GIL;
      ``multiprocessing_context`` as in ``DataLoader``, e.g. ``"spawn"``).
    * ``device``: batches arrive there, copied one batch ahead on a side stream (see
      :mod:`petastream.torch._staging`). ``pin_memory``: None (default) pins a CUDA device's
      batches by size, those of at least ``PIN_MIN_BYTES`` (4 MiB) of numeric columns, where
      pinned copies pay (smaller ones copy from pageable memory); True always, False never.
    * ``convert(batch)``: numpy columns to what is handed out, in the workers (default:
      tensors, lists where a tensor cannot hold a column; None: numpy columns).
    * ``strings``: how ``str``/``bytes`` columns are handed out: ``"objects"`` (default: a list
      of ``str``/``bytes`` per batch) or ``"jagged"`` (a :class:`~petastream.torch.JaggedBytes`:
      ``values`` uint8 + ``offsets`` int64 tensors, no Python object per value; pinned, packed
      and copied to ``device`` with the numeric columns); or ``{column: form}`` (columns not
      named: objects). With the default ``convert`` only; see docs/native-api.md.

    Bad samples and figures (as :class:`~petastream.pipeline.BatchLoader`): ``on_error``
    (``"raise"``, ``"skip"``, ``"warn"`` or ``fn(BadSample) -> bool``), ``loader.stats()``,
    ``log_every`` (seconds between INFO lines of them), ``log_summary`` (a line per epoch).
    """

    def __init__(self, dataset: Source | str, batch_size: int = 32, *, shuffle: bool = False,
                 seed: int = 0, num_epochs: int | None = 1, drop_last: bool = False,
                 columns: Sequence[str] | None = None, num_workers: int = 2, prefetch: int = 2,
                 rank: int | None = None, world_size: int | None = None, block_size: int | None = None,
                 window: int | None = None, transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                 dataset_options: dict[str, Any] | None = None, logical_types: bool = True,
                 readahead: int = 2, device: str | torch.device | None = None,
                 pin_memory: bool | None = None, worker_type: str = "thread",
                 multiprocessing_context: Any = None,
                 convert: Callable[[dict[str, Any]], Any] | None = to_tensors, on_error: OnError = "raise",
                 log_every: float | None = None, log_summary: bool = False,
                 strings: str | Mapping[str, str] = "objects"):
        if worker_type not in _WORKER_TYPES:
            raise InvalidArgumentError(f"worker_type must be 'thread' or 'process', got {worker_type!r}")
        self.device = _check_device(device)  # before any work: a bad device fails here, clearly
        rank, world_size = resolve_rank_world(rank, world_size)
        cuda = self.device is not None and self.device.type == "cuda"
        self.pin_memory = cuda if pin_memory is None else bool(pin_memory) and torch.cuda.is_available()
        self.worker_type = worker_type
        self.multiprocessing_context = multiprocessing_context
        if strings != "objects" and convert is not to_tensors:
            raise InvalidArgumentError(
                f"strings={strings!r} shapes what the default convert hands out; a convert of your "
                "own gets the numpy columns (str/bytes as objects): drop strings= or convert=")
        executor: Executor
        if worker_type == "thread":
            executor = ThreadExecutor(num_workers, prefetch)
        else:  # worker processes hand tensors over in shared memory; the DataLoader pins here
            executor = DataLoaderExecutor(num_workers, prefetch, pin_memory=self.pin_memory,
                                          multiprocessing_context=multiprocessing_context)
        staged = self.device is not None and self.device.type != "cpu"
        super().__init__(dataset, batch_size, shuffle=shuffle, seed=seed, num_epochs=num_epochs,
                         drop_last=drop_last, columns=columns, num_workers=num_workers,
                         prefetch=prefetch, rank=rank, world_size=world_size, block_size=block_size,
                         window=window, transform=transform, dataset_options=dataset_options,
                         logical_types=logical_types, readahead=readahead, convert=convert,
                         executor=executor, on_error=on_error,
                         log_every=log_every, log_summary=log_summary,
                         stages=[_to_device(self.device)] if staged and self.device is not None else [])
        #: ``{column: "str" | "bytes"}``: the columns handed out as JaggedBytes (``strings``).
        self.jagged = jagged_columns(strings, self.dataset.columns, self.columns or list(self.dataset.columns),
                                     getattr(self.dataset, "null_policy", None))
        if self.jagged:
            self.convert = functools.partial(to_tensors, jagged=self.jagged)
            if transform is None:  # (a transform is given the str/bytes objects, as ever)
                self.work_stages.append(_read_ragged)
                reading_strings(self.dataset, "ragged")  # now: read-ahead may load before a pass starts
        if worker_type == "thread" and self.pin_memory and convert is to_tensors:  # threads pin as they convert
            min_bytes = PIN_MIN_BYTES if pin_memory is None else 0
            self.work_stages.append(_pin_per_pass(self.device, min_bytes, self.jagged))


#: ``petastream.torch.loader(url, batch_size, ...)``: the :class:`TorchLoader` itself, so that
#: its signature (every argument) is the one editors and ``help()`` show.
loader = TorchLoader
