"""Batches of ``make_reader`` rows for the ``petastorm.pytorch`` loaders, as Petastorm makes them.

Rows (namedtuples) become dicts, an optional shuffling queue mixes them (a buffer of
``capacity`` rows, a random one taken as each new one comes in; seeded by the reader's seed),
and every ``batch_size`` of them are handed to ``collate_fn`` (the last batch may be short).

With the default collate and no shuffling queue, the reader's rows are taken as columns
(:meth:`~petastream.compat.row_reader.RowReader.take_columns`) and collated column by column:
a numeric column is one tensor of the column's rows, which is what ``default_collate`` makes of
its values one by one (same dtype, shape and values; a fresh tensor), without a dict and a
tensor per row; any other column (strings, decimals, objects...) goes through the collate as
its values, as before.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

__all__ = ["row_batches"]

#: Columns collated as one tensor: what ``default_collate`` stacks (numbers, booleans), but not
#: uint64, whose numpy scalars it refuses (a column of them keeps that behaviour).
_TENSOR_KINDS = "biufc"


def _shuffled(rows: Iterable[dict[str, Any]], capacity: int, seed: int | None) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed)
    buffer: list[dict[str, Any]] = []
    for row in rows:
        buffer.append(row)
        if len(buffer) > capacity:
            i = rng.randrange(len(buffer))
            buffer[i], buffer[-1] = buffer[-1], buffer[i]
            yield buffer.pop()
    rng.shuffle(buffer)
    yield from buffer


def row_batches(reader: Any, batch_size: int | None, collate_fn: Callable[[list[Any]], Any],
                shuffling_queue_capacity: int = 0) -> Iterator[Any]:
    from petastream.compat.pytorch import decimal_friendly_collate

    if (collate_fn is decimal_friendly_collate and not shuffling_queue_capacity and batch_size is not None
            and hasattr(reader, "take_columns") and getattr(reader, "ngram", None) is None):
        yield from _column_batches(reader, batch_size, collate_fn)
        return
    rows: Iterable[dict[str, Any]] = (row._asdict() for row in reader)
    if shuffling_queue_capacity > 0:
        rows = _shuffled(rows, shuffling_queue_capacity, getattr(reader, "seed", None))
    batch: list[dict[str, Any]] = []
    for row in rows:
        batch.append(row)
        if batch_size is not None and len(batch) == batch_size:
            yield collate_fn(batch)
            batch = []
    if batch:
        yield collate_fn(batch)


def _column_batches(reader: Any, batch_size: int, collate: Callable[[list[Any]], Any]) -> Iterator[dict[str, Any]]:
    """``row_batches`` of the default collate, column by column (see the module doc)."""
    parts: list[dict[str, Any]] = []
    have = 0
    while True:
        part = reader.take_columns(batch_size - have)
        if part is None:
            break
        parts.append(part)
        have += len(next(iter(part.values())))
        if have >= batch_size:
            yield {name: _collated([p[name] for p in parts], collate) for name in parts[0]}
            parts, have = [], 0
    if have:
        yield {name: _collated([p[name] for p in parts], collate) for name in parts[0]}


def _collated(pieces: list[Any], collate: Callable[[list[Any]], Any]) -> Any:
    """One column of a batch (its rows in ``pieces``), as ``collate`` makes its values."""
    first = pieces[0]
    if (all(isinstance(p, np.ndarray) and p.dtype == first.dtype and p.shape[1:] == first.shape[1:] for p in pieces)
            and first.dtype.kind in _TENSOR_KINDS and first.dtype != np.uint64):
        import torch

        # (a copy: the tensor is the batch's own, as default_collate's stack makes it)
        return torch.from_numpy(np.concatenate(pieces) if len(pieces) > 1 else np.array(first))
    return collate([value for p in pieces for value in p])
