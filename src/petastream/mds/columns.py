"""Operations on decoded column blocks (dicts of numpy arrays, object arrays or Ragged)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from petastream.mds.ndarray import Ragged

__all__ = ["concat_columns", "take_columns", "scatter_columns", "split_rows", "num_rows", "WIDEN_UNSIGNED",
           "widen_unsigned"]

#: Unsigned dtypes that torch and TensorFlow handle poorly, and the signed type that holds them
#: (Petastorm's mapping: uint16 -> int32, uint32 -> int64).
WIDEN_UNSIGNED: dict[np.dtype, np.dtype] = {np.dtype("uint16"): np.dtype("int32"), np.dtype("uint32"): np.dtype("int64"),
                  np.dtype("uint64"): np.dtype("int64")}


def widen_unsigned(dtype: np.dtype) -> np.dtype:
    return WIDEN_UNSIGNED.get(np.dtype(dtype), np.dtype(dtype))


def num_rows(block: dict[str, Any]) -> int:
    return len(next(iter(block.values()))) if block else 0


def _concat(parts: Sequence[Any]) -> Any:
    if isinstance(parts[0], Ragged):
        values = np.concatenate([p.values for p in parts])
        lengths = np.concatenate([p.lengths() for p in parts])
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return Ragged(values, offsets)
    return np.concatenate(parts)


def concat_columns(blocks: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Stack blocks with the same columns, row-wise."""
    if len(blocks) == 1:
        return blocks[0]
    return {name: _concat([b[name] for b in blocks]) for name in blocks[0]}


def take_columns(block: dict[str, Any], ids: np.ndarray) -> dict[str, Any]:
    """Rows ``ids`` of every column, in that order."""
    return {name: (col.take(ids) if isinstance(col, Ragged) else col[ids]) for name, col in block.items()}


def scatter_columns(parts: Sequence[dict[str, Any]], positions: Sequence[np.ndarray], n: int) -> dict[str, Any]:
    """One block of ``n`` rows where row ``positions[k][j]`` is row ``j`` of ``parts[k]``.

    The positions of all parts together must cover ``0..n-1`` once each. Arrays are written
    into place (one copy, no intermediate concatenation); :class:`Ragged` columns are
    concatenated and reordered.
    """
    if len(parts) == 1 and np.array_equal(positions[0], np.arange(n)):
        return parts[0]
    out: dict[str, Any] = {}
    for name, first in parts[0].items():
        if isinstance(first, Ragged):
            merged = _concat([p[name] for p in parts])
            inverse = np.empty(n, dtype=np.int64)
            inverse[np.concatenate(positions)] = np.arange(n)
            out[name] = merged.take(inverse)
            continue
        col = np.empty((n, *first.shape[1:]), dtype=first.dtype)
        rows = _as_items(col)
        for part, pos in zip(parts, positions):
            src = part[name]
            if rows is not None and src.dtype == col.dtype:  # strided views: one copy, then items
                rows[pos] = _as_items(np.ascontiguousarray(src))
            else:
                col[pos] = src
        out[name] = col
    return out


def split_rows(rows: np.ndarray, dtype: np.dtype, wanted: Sequence[str]) -> dict[str, np.ndarray]:
    """Packed rows (``V<itemsize>`` items of the structured ``dtype``) -> one C-contiguous
    array per wanted column. Each column is copied as opaque items of its own size through a
    strided view: about twice as fast as numpy's copy of an unaligned strided field, and the
    batches sliced from it need no copy of their own before torch or TensorFlow take them."""
    n = len(rows)
    fields = dtype.fields
    assert fields is not None  # a structured dtype: ColumnLayout.fixed_dtype()
    out = {}
    for name in wanted:
        if n == 0:
            out[name] = np.empty((0, *fields[name][0].shape), fields[name][0].base)
            continue
        field, offset = fields[name][:2]
        items = np.ndarray((n,), dtype=np.dtype((np.void, field.itemsize)), buffer=rows,
                           offset=offset, strides=(dtype.itemsize,))
        out[name] = items.copy().view(field.base).reshape(n, *field.shape)
    return out


def _as_items(a: np.ndarray) -> np.ndarray | None:
    """A C-contiguous array of n-D rows as n opaque ``V<row bytes>`` items (fast to fancy-index)."""
    if a.ndim < 2 or a.dtype.hasobject or not a.flags.c_contiguous or a.dtype.itemsize == 0:
        return None
    elems = int(np.prod(a.shape[1:]))
    if elems == 0:
        return None
    return a.reshape(len(a), elems).view(np.dtype((np.void, a.dtype.itemsize * elems))).reshape(len(a))
