"""``MDSIterableDataset``: the pipeline's decode work as an ``IterableDataset`` for your own
``DataLoader``.

Each iteration of the ``DataLoader`` is the next epoch, as for every petastream loader, also
with non-persistent workers (new processes each iteration, each holding a fresh copy of the
dataset object) and with ``num_workers=0``. The workers of one iteration must agree on its
epoch without the main process telling them (a ``DataLoader`` calls nothing on an
``IterableDataset`` before its workers start), so they count in a small ledger file: every
worker calls ``iter(dataset)`` exactly once per ``DataLoader`` iteration (at start-up, or on
resume with persistent workers), so worker ``w``'s ``k``-th call belongs to iteration ``k`` on
every worker. ``set_epoch(e)`` restarts the count at epoch ``e``.
"""

from __future__ import annotations

import json
import os
import tempfile
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch.utils.data
from filelock import FileLock

from petastream.errors import InvalidArgumentError, InvalidArgumentTypeError
from petastream.parent_death import exit_with_parent
from petastream.pipeline.onerror import OnError
from petastream.pipeline.stats import ReportRun
from petastream.source import Source
from petastream.torch._loader import TorchLoader
from petastream.torch._processes import worker_slot

__all__ = ["MDSIterableDataset"]

_DATALOADERS = ("device", "pin_memory", "num_epochs", "worker_type", "num_workers", "prefetch")


def _remove(paths: tuple[str, ...], owner: int) -> None:
    if os.getpid() == owner:  # forked workers inherit the finalizer; only the creator cleans up
        for p in paths:
            try:
                os.remove(p)
            except FileNotFoundError:
                pass


class _IterationLedger:
    """Per worker slot, how many iterations have started; and the epoch they count from."""

    def __init__(self) -> None:
        fd, self.path = tempfile.mkstemp(prefix="petastream-iterations-", suffix=".json")
        os.close(fd)
        self._write({"epoch": 0, "started": {}})
        weakref.finalize(self, _remove, (self.path, self.path + ".lock"), os.getpid())

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path = state["path"]

    def _lock(self) -> FileLock:
        return FileLock(self.path + ".lock")

    def _write(self, state: dict[str, Any]) -> None:
        with open(self.path, "w") as f:
            json.dump(state, f)

    def set_epoch(self, epoch: int) -> None:
        with self._lock():
            self._write({"epoch": epoch, "started": {}})

    def begin(self, worker_id: int, num_workers: int) -> int:
        """The epoch of the iteration this worker's ``iter()`` belongs to."""
        slot = f"{worker_id}/{num_workers}"
        with self._lock():
            with open(self.path) as f:
                state = json.load(f)
            k = state["started"].get(slot, 0)
            state["started"][slot] = k + 1
            self._write(state)
        return int(state["epoch"]) + k


class MDSIterableDataset(torch.utils.data.IterableDataset):
    """An MDS dataset as batches for a ``torch.utils.data.DataLoader`` of your own.

    ``DataLoader(MDSIterableDataset(url, 1024, shuffle=True), batch_size=None, num_workers=4)``:
    each worker decodes its share of the epoch's batches (bulk, as :class:`TorchLoader`), every
    sample comes exactly once per epoch over all workers, and the batches arrive in the same
    order whatever ``num_workers``. Each iteration of the ``DataLoader`` is the next epoch;
    ``set_epoch(e)`` (as with ``DistributedSampler``) makes the next one epoch ``e``. Keep
    ``num_workers`` the same from one iteration to the next, or call ``set_epoch`` when you
    change it. The arguments are :class:`TorchLoader`'s ordering and selection ones (the
    ``DataLoader`` takes care of workers, prefetch, pinning and epochs). For ``state_dict`` checkpoints and device copies handled for you, use
    ``TorchLoader(worker_type="process")``. ``on_error`` as :class:`TorchLoader`'s: skipped
    samples are counted and logged in the worker that met them. ``strings`` as
    :class:`TorchLoader`'s (``"jagged"``: str/bytes columns as ``JaggedBytes``, which the
    ``DataLoader``'s ``pin_memory`` pins through its method).
    """

    def __init__(self, dataset: Source | str, batch_size: int = 32, *, shuffle: bool = False, seed: int = 0,
                 drop_last: bool = False, columns: Sequence[str] | None = None, rank: int | None = None,
                 world_size: int | None = None, block_size: int | None = None, window: int | None = None,
                 transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                 dataset_options: dict[str, Any] | None = None, logical_types: bool = True,
                 readahead: int = 2, on_error: OnError = "raise", strings: str | Mapping[str, str] = "objects",
                 **not_here: Any):
        for name in not_here:  # the loader's arguments that belong to the user's DataLoader
            if name in _DATALOADERS:
                raise InvalidArgumentError(
                    f"MDSIterableDataset does not take {name}=: the DataLoader you wrap it in does "
                    "the epochs, workers, prefetch and pinning (DataLoader(..., batch_size=None, "
                    "num_workers=..., pin_memory=...))")
            raise InvalidArgumentTypeError(f"MDSIterableDataset got an unexpected keyword argument {name!r}")
        self._loader = TorchLoader(dataset, batch_size, shuffle=shuffle, seed=seed, drop_last=drop_last,
                                   columns=columns, num_workers=1, rank=rank, world_size=world_size,
                                   block_size=block_size, window=window, transform=transform,
                                   dataset_options=dataset_options, logical_types=logical_types,
                                   readahead=readahead, on_error=on_error, strings=strings)
        # What rebuilds the loader where this dataset is unpickled (DataLoader workers started
        # with spawn or forkserver): the opened source (it pickles by reopening) and the rest.
        ld = self._loader
        self._args: dict[str, Any] = dict(dataset=ld.dataset, batch_size=batch_size, shuffle=shuffle, seed=seed,
                          drop_last=drop_last, columns=columns, num_workers=1, rank=ld.planner.rank,
                          world_size=ld.planner.world_size, block_size=block_size, window=window,
                          transform=transform, logical_types=logical_types, readahead=readahead,
                          on_error=on_error, strings=strings)
        self._ledger = _IterationLedger()

    def __getstate__(self) -> dict[str, Any]:
        return {"args": self._args, "ledger": self._ledger}  # not the loader's locks and threads

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._args, self._ledger = state["args"], state["ledger"]
        self._loader = TorchLoader(**self._args)

    def __len__(self) -> int:
        """Batches per epoch (per rank)."""
        return self._loader.batches_per_epoch

    def set_epoch(self, epoch: int) -> None:
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise InvalidArgumentError(f"epoch must be an int >= 0, got {epoch!r}")
        self._ledger.set_epoch(epoch)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        # Not a generator: the ledger must count when the DataLoader worker calls iter(), which
        # it does once per iteration, not at the first next().
        ld = self._loader
        ld.driver.check_nonempty()
        w, workers = worker_slot()
        if torch.utils.data.get_worker_info() is not None:
            exit_with_parent()  # a worker of a killed trainer would otherwise live on, pinning shards
        ld.planner.start_epoch(self._ledger.begin(w, workers))
        work = ld.pass_work(ld.planner.plan(), workers)
        # The reports stop here: skips are counted and logged in this worker (no loader to
        # hold them; there is no state_dict to carry them either).
        return ReportRun((batch for _, batch in work(w, workers)), ld.counters)
