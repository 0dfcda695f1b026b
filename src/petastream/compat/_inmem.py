"""What ``InMemBatchedDataLoader`` holds: up to ``rows_capacity`` rows of a reader, read once.

As Petastorm's: rows are read in the reader's order (its shuffle, shard, epochs and
``TransformSpec``) until there are ``rows_capacity`` of them (an endless reader,
``num_epochs=None``, wraps into its next epoch, so rows may repeat), the reader is then stopped
and joined, and each numeric column goes through ``transform_fn`` as numpy: booleans as uint8,
uint16/uint32 widened to int32/int64 (Petastorm's promotions for torch). Unlike Petastorm, a
``str``/``bytes``/decimal column is kept as a list and a variable-length array column as a list
of tensors (Petastorm raises ``TypeError``); ``transform_fn`` does not see them.

``transform_fn`` runs once per column on all the loaded rows, where Petastorm ran it on each row
group it read before copying the results into one tensor: the same tensors for any per-value
function (``torch.as_tensor``, ``torch.from_numpy``, a dtype cast), without the copy.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, cast

import numpy as np

from petastream.columns.ops import concat_columns, widen_unsigned
from petastream.columns.ragged import Ragged
from petastream.compat.errors import stopped_error
from petastream.compat.reader import ROWS_PER_ITEM
from petastream.pipeline import BatchLoader
from petastream.torch import to_torch

__all__ = ["load_rows"]


def _first_rows(col: Any, n: int) -> Any:
    if len(col) <= n:
        return col
    return col.take(np.arange(n)) if isinstance(col, Ragged) else col[:n]


def _column(col: Any, transform_fn: Callable[[Any], Any]) -> Any:
    if isinstance(col, np.ndarray) and col.dtype.kind in "biufc":
        # Petastorm's promotions before transform_fn: torch has no arithmetic on bool and few
        # ops on wide unsigned ints.
        col = col.astype(np.uint8 if col.dtype == np.bool_ else widen_unsigned(col.dtype), copy=False)
        return transform_fn(col)
    if isinstance(col, np.ndarray):
        return col.tolist()  # str, bytes, Decimal values
    return to_torch(col)  # variable-length arrays: a list of tensors


def load_rows(reader: Any, transform_fn: Callable[[Any], Any], rows_capacity: int) -> dict[str, Any]:
    """The first ``rows_capacity`` rows of ``reader`` (fewer if it ends first), as columns in the
    reader's order; the reader is stopped and joined afterwards, as Petastorm's loader does."""
    if reader.stopped:
        raise stopped_error()
    if getattr(reader, "is_batched_reader", True) is False:
        return _load_make_reader_rows(reader, transform_fn, rows_capacity)
    # The reader's own plan (what iterating it reads), with the stored dtypes the torch loaders
    # use (logical_types=False: timestamps as int64, not datetime64 that torch cannot hold).
    loader = BatchLoader(reader.dataset, logical_types=False,
                         **reader.loader_kwargs(min(rows_capacity, ROWS_PER_ITEM)))
    parts: list[dict[str, Any]] = []
    loaded = 0
    # iter(BatchLoader) is a generator: closing it stops the pass
    batches = cast(Generator[dict[str, Any], None, None], iter(loader))
    try:
        for batch in batches:
            take = min(len(next(iter(batch.values()))), rows_capacity - loaded)
            parts.append({name: _first_rows(col, take) for name, col in batch.items()})
            loaded += take
            if loaded >= rows_capacity:
                break
    finally:
        batches.close()  # an endless reader: stop its decode workers now, not at garbage collection
    reader.stop()
    reader.join()
    columns = concat_columns(parts)
    # In the reader's column order (after its TransformSpec), the keys of Petastorm's row dicts.
    return {name: _column(columns[name], transform_fn) for name in reader.schema_fields}


def _stacked(values: list[Any]) -> np.ndarray:
    """One field's values of many rows: one array when they stack (numbers, equal shapes),
    else an object array (strings, decimals, arrays of different shapes, None)."""
    arrays = [np.asarray(v) for v in values]
    if arrays and all(a.dtype.kind in "biufc" and a.shape == arrays[0].shape and a.dtype == arrays[0].dtype
                      for a in arrays):
        return np.stack(arrays)
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out


def _load_make_reader_rows(reader: Any, transform_fn: Callable[[Any], Any], rows_capacity: int) -> dict[str, Any]:
    """``make_reader``'s rows (namedtuples), gathered into columns of the schema's fields."""
    import itertools

    rows = list(itertools.islice(reader, rows_capacity))
    reader.stop()
    reader.join()
    names = list(reader.schema.fields)
    columns = {n: _stacked([getattr(r, n) for r in rows]) for n in names}
    return {n: (_column(c, transform_fn) if c.dtype != object else list(c)) for n, c in columns.items()}
