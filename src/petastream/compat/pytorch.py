"""``petastorm.pytorch``: ``DataLoader``, ``BatchedDataLoader``, ``InMemBatchedDataLoader``.

Each takes a :class:`~petastream.compat.reader.Reader` (what ``make_batch_reader`` returns, and
what the converter's context manager passes as ``reader=``) and runs petastream's bulk loader
(:class:`~petastream.torch.TorchLoader`) with its plan; or a ``make_reader`` reader, whose rows
are collated in the iterating thread as Petastorm does (:mod:`petastream.compat._row_batches`; the
default collate column by column). Batches are ``dict[str, Tensor]`` in the
reader's column order; unlike Petastorm, string, binary and decimal columns come back as lists
instead of a ``TypeError``.

Iteration (``DataLoader``, ``BatchedDataLoader``): each loader owns one
:class:`~petastream.torch.TorchLoader`, so each new pass is the next epoch in a new order, as
for every petastream loader (with the converter's default ``num_epochs=None`` one pass never
ends). Petastorm's rules stay: a new pass logs Petastorm's
"Start a new pass" warning, a second ``iter()`` while a pass is running is an error, and so is
one after a pass failed.

``InMemBatchedDataLoader`` is Petastorm's: it reads its rows when constructed and stops the
reader, and is iterated once (``num_epochs`` epochs in that pass).

``DataLoader(reader, collate_fn=fn)`` with your own ``fn`` runs it as Petastorm does: on a list
of ``batch_size`` row dicts (numpy values), in the iterating thread. The default
``decimal_friendly_collate`` is done in bulk instead (same tensors, no per-row work).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any

from petastream.checks import (
    callable_or_none,
    nonnegative_int,
    optional_positive_int,
    positive_int,
    require_callable,
)

__all__ = ["DataLoader", "BatchedDataLoader", "InMemBatchedDataLoader", "decimal_friendly_collate"]

logger = logging.getLogger(__name__)

_PARALLEL_ITER_ERROR = (
    "You must finish a full pass of Petastorm DataLoader before making another pass from the "
    "beginning.If you do need to terminate early and restart from beginning, please re-create "
    "the reader and the data loader."
)
# Petastorm's text, with the indentation its line continuation put inside the string.
_IN_MEM_REUSE_ERROR = ("InMemBatchedDataLoader couldn't be used multiple times, please" + " " * 20
                       + "specify total number of epochs using num_epochs in constructor.")


def decimal_friendly_collate(batch: Any) -> Any:
    """Petastorm's collate: ``default_collate``, except for what it cannot stack.

    Decided by the first sample, as Petastorm does: ``Decimal``, ``str`` or ``bytes`` -> the
    batch itself, unchanged; a mapping (row dict) -> a dict collated key by key; any other
    sequence (a row as a tuple, list or namedtuple) -> a list collated position by position
    (``zip``: rows are cut to the shortest, and a Decimal/str position comes back as the tuple
    ``zip`` made). An empty batch is an ``IndexError``.
    """
    first = batch[0]
    if isinstance(first, (Decimal, str, bytes)):
        return batch
    if isinstance(first, Mapping):
        return {key: decimal_friendly_collate([row[key] for row in batch]) for key in first}
    if isinstance(first, Sequence):  # after str/bytes, which are sequences too
        return [decimal_friendly_collate(position) for position in zip(*batch)]
    from torch.utils.data.dataloader import default_collate

    return default_collate(batch)


def _check_batch_size(batch_size: Any) -> None:
    optional_positive_int("batch_size", batch_size, "rows per batch",
                          fix="pass batch_size=1 or more, or None for one batch at the end of the data")


def _check_capacity(capacity: Any) -> None:
    nonnegative_int("shuffling_queue_capacity", capacity, "rows in the shuffling queue; 0: none")


class LoaderBase:
    def __init__(self, reader: Any, batch_size: int | None, shuffling_queue_capacity: int = 0):
        _check_batch_size(batch_size)
        _check_capacity(shuffling_queue_capacity)
        self.reader = reader
        self.batch_size = batch_size
        self.shuffling_queue_capacity = shuffling_queue_capacity
        self._in_iter: bool | None = None
        self._error: BaseException | None = None
        self._loader: Any = None

    def _torch_loader(self, collate_fn: Any = None) -> Any:
        """The one TorchLoader behind this loader (built on first use; each pass re-iterates it)."""
        if self._loader is None:
            from petastream.compat._collate import collating_loader
            from petastream.torch import TorchLoader

            # Petastorm's DataLoader with batch_size=None emits one batch at the end of data.
            size = self.batch_size or max(1, len(self.reader.dataset))
            worker_type = "process" if self.reader.pool_type == "process" else "thread"
            # logical_types=False: Petastorm's torch loader gives booleans as uint8 tensors.
            kwargs = dict(worker_type=worker_type, logical_types=False,
                          **self.reader.loader_kwargs(size, self.shuffling_queue_capacity))
            self._loader = (TorchLoader(self.reader.dataset, **kwargs) if collate_fn is None
                            else collating_loader(self.reader.dataset, collate_fn, **kwargs))
        return self._loader

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self._error is not None:
            raise RuntimeError(f"Cannot start a new iteration because last time iteration failed with error {self._error!r}.")
        if self._in_iter is True:
            raise RuntimeError(_PARALLEL_ITER_ERROR)
        if self._in_iter is False:
            logger.warning("Start a new pass of Petastorm DataLoader, reset underlying Petastorm reader to position 0.")
            self.reader.reset()
        self._in_iter = True
        try:
            yield from self._iter_impl()
        except Exception as e:
            self._error = e
            raise
        finally:
            self._in_iter = False

    def _iter_impl(self) -> Iterator[dict[str, Any]]:
        if self.reader.stopped:
            from petastream.compat.reader import stopped_error

            raise stopped_error()
        if getattr(self.reader, "is_batched_reader", True) is False:  # make_reader: rows, collated here
            from petastream.compat._row_batches import row_batches

            for batch in row_batches(self.reader, self.batch_size, self._row_collate(), self.shuffling_queue_capacity):
                yield self._finish(batch)
            return
        for batch in self._torch_loader():
            yield self._finish(batch)

    def _row_collate(self) -> Any:
        return decimal_friendly_collate

    def _finish(self, batch: dict[str, Any]) -> dict[str, Any]:
        return batch

    def __enter__(self) -> LoaderBase:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._loader is not None:
            # Its workers stop now (a pass left early would keep reading ahead), before the
            # reader's join hands its source on to the next reader (compat._source_reuse).
            self._loader.close()
        self.reader.stop()
        self.reader.join()


class DataLoader(LoaderBase):
    def __init__(self, reader: Any, batch_size: int | None = 1, collate_fn: Any = decimal_friendly_collate,
                 shuffling_queue_capacity: int = 0):
        super().__init__(reader, batch_size, shuffling_queue_capacity)
        require_callable("collate_fn", collate_fn, "a list of row dicts -> batch")
        self.collate_fn = collate_fn

    def _row_collate(self) -> Any:
        return self.collate_fn

    def _torch_loader(self, collate_fn: Any = None) -> Any:
        custom = None if self.collate_fn is decimal_friendly_collate else self.collate_fn
        return super()._torch_loader(custom)


class BatchedDataLoader(LoaderBase):
    def __init__(self, reader: Any, batch_size: int | None = 1, transform_fn: Any = None,
                 shuffling_queue_capacity: int = 0):
        super().__init__(reader, batch_size, shuffling_queue_capacity)
        self.transform_fn = transform_fn

    def _finish(self, batch: dict[str, Any]) -> dict[str, Any]:
        if self.transform_fn is None:
            return batch
        return {k: self.transform_fn(v) if not isinstance(v, list) else v for k, v in batch.items()}


class InMemBatchedDataLoader:
    """Petastorm's in-memory loader: reads up to ``rows_capacity`` rows from ``reader`` when
    constructed (then stops the reader; see :mod:`petastream.compat._inmem`), and serves
    ``num_epochs`` epochs of them in batches of ``batch_size``, each epoch in the order of
    ``torch.randperm(rows, generator=torch.Generator().manual_seed(seed + epoch))`` when
    ``shuffle``. It is iterated once (all epochs in that one pass), as in Petastorm: any other
    iteration raises Petastorm's ``RuntimeError`` when it starts."""

    def __init__(self, reader: Any, batch_size: int = 1, transform_fn: Any = None, num_epochs: int = 1,
                 seed: int = 0, rows_capacity: int = 1024, shuffle: bool = False):
        # Checked before reading: Petastorm would load, then fail in range() when iterated.
        batch_size = positive_int("batch_size", batch_size, "rows per batch")
        num_epochs = nonnegative_int("num_epochs", num_epochs, "passes over the loaded rows")
        rows_capacity = positive_int("rows_capacity", rows_capacity, "rows loaded into memory")
        callable_or_none("transform_fn", transform_fn, "a numpy column -> tensor")
        import torch

        from petastream.compat._inmem import load_rows

        self.reader = reader
        self.batch_size, self.num_epochs, self.seed, self.shuffle = batch_size, num_epochs, seed, shuffle
        self.rows_capacity = rows_capacity
        self._in_iter = False
        self._columns = load_rows(reader, transform_fn or torch.as_tensor, rows_capacity)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        # A generator, as Petastorm's: a second iteration fails at its first next(), not at iter().
        if self._in_iter:
            raise RuntimeError(_IN_MEM_REUSE_ERROR)
        self._in_iter = True
        import torch

        rows = len(next(iter(self._columns.values())))
        for epoch in range(self.num_epochs):
            if self.shuffle:
                order = torch.randperm(rows, generator=torch.Generator().manual_seed(self.seed + epoch)).tolist()
            else:
                order = list(range(rows))
            for start in range(0, rows, self.batch_size):
                idx = order[start : start + self.batch_size]
                yield {name: ([col[i] for i in idx] if isinstance(col, list) else col[idx])
                       for name, col in self._columns.items()}

    def __enter__(self) -> InMemBatchedDataLoader:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass  # the reader was stopped once the rows were loaded
