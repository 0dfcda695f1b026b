"""Batches of ``make_reader`` rows for the ``petastorm.pytorch`` loaders, as Petastorm makes them.

Rows (namedtuples) become dicts, an optional shuffling queue mixes them (a buffer of
``capacity`` rows, a random one taken as each new one comes in; seeded by the reader's seed),
and every ``batch_size`` of them are handed to ``collate_fn`` (the last batch may be short).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = ["row_batches"]


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
