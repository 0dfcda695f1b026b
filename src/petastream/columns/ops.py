"""Operations on decoded column blocks (dicts of numpy arrays, object arrays or Ragged)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from petastream.columns.pool import pooled_empty
from petastream.columns.ragged import Ragged

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


def _per_row(col: Any) -> bool:
    """Whether a column holds one Python object per row (``Ragged`` included): what cannot be
    written into a preallocated numeric array."""
    return isinstance(col, Ragged) or (isinstance(col, np.ndarray) and col.dtype == object)


def _as_objects(col: Any) -> np.ndarray:
    """An object array of the column's rows (a ``Ragged``'s rows are views of its values)."""
    if not isinstance(col, Ragged):
        return col
    out = np.empty(len(col), dtype=object)
    for i in range(len(col)):
        out[i] = col[i]
    return out


def _concat(parts: Sequence[Any]) -> Any:
    """Parts of one column, stacked. An ``ndarray`` column decodes per shard to a ``Ragged``
    (1-D arrays of one dtype) or an object array of arrays (other ranks, mixed dtypes): parts
    of both kinds, or ``Ragged`` parts of different dtypes, stack as an object array that
    keeps every array as written (numpy's concatenation would promote int32 and uint8 values
    to one type, and a ``Ragged`` cannot hold 2-D rows)."""
    filled = [p for p in parts if len(p)] or list(parts[:1])
    if isinstance(filled[0], Ragged) and all(
            isinstance(p, Ragged) and p.values.dtype == filled[0].values.dtype for p in filled):
        values = np.concatenate([p.values for p in filled])
        lengths = np.concatenate([p.lengths() for p in filled])
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return Ragged(values, offsets)
    if any(_per_row(p) for p in filled):
        return np.concatenate([_as_objects(p) for p in filled])
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
    into place (one copy, no intermediate concatenation); columns with a :class:`Ragged` part
    are concatenated (see :func:`_concat`) and reordered.
    """
    if len(parts) == 1 and np.array_equal(positions[0], np.arange(n)):
        return parts[0]
    out: dict[str, Any] = {}
    for name, first in parts[0].items():
        if any(isinstance(p[name], Ragged) for p in parts):
            same = _scatter_same_length([p[name] for p in parts], positions, n)
            if same is not None:
                out[name] = same
                continue
            merged = _concat([p[name] for p in parts])
            inverse = np.empty(n, dtype=np.int64)
            inverse[np.concatenate(positions)] = np.arange(n)
            out[name] = merged.take(inverse) if isinstance(merged, Ragged) else merged[inverse]
            continue
        col = pooled_empty((n, *first.shape[1:]), first.dtype)
        rows = _as_items(col)
        for part, pos in zip(parts, positions):
            src = part[name]
            if rows is not None and src.dtype == col.dtype:  # strided views: one copy, then items
                rows[pos] = _as_items(np.ascontiguousarray(src))
            else:
                col[pos] = src
        out[name] = col
    return out


def _scatter_same_length(cols: Sequence[Any], positions: Sequence[np.ndarray], n: int) -> Ragged | None:
    """Ragged parts whose rows all have one length (fixed-size blobs, hashes): written into
    place as whole rows, one copy (concatenating, then taking, copies every byte twice); None
    where the parts are not all such ``Ragged`` of one dtype and length."""
    if not all(isinstance(c, Ragged) for c in cols) or len({c.values.dtype for c in cols}) != 1:
        return None
    length = None
    for c in cols:
        lengths = c.lengths()
        if len(lengths):
            if length is None:
                length = int(lengths[0])
            if length == 0 or (lengths != length).any():
                return None
    if length is None:
        return None
    dtype = cols[0].values.dtype
    item = np.dtype((np.void, length * dtype.itemsize))
    values = pooled_empty(n * length, dtype)  # reused block to block (see .pool)
    rows = values.view(item)
    for c, pos in zip(cols, positions):
        if len(c):
            part = np.ascontiguousarray(c.values[int(c.offsets[0]):int(c.offsets[-1])])
            rows[pos] = part.view(item)
    return Ragged(values, np.arange(n + 1, dtype=np.int64) * length)


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
        item = np.dtype((np.void, field.itemsize))
        items = np.ndarray((n,), dtype=item, buffer=rows, offset=offset, strides=(dtype.itemsize,))
        col = pooled_empty((n, *field.shape), field.base)  # reused chunk to chunk (see .pool)
        if field.itemsize:
            col.reshape(n, -1).view(item).reshape(n)[...] = items
        out[name] = col
    return out


def pack_rows(columns: dict[str, np.ndarray], dtype: np.dtype) -> np.ndarray:
    """The inverse of :func:`split_rows`: columns (one per field of the structured ``dtype``,
    of its shape) as packed rows, one opaque ``V<row bytes>`` item each. Each column is
    written as opaque items of its own size through a strided view (the fast copy, as there)."""
    fields = dtype.fields
    assert fields is not None
    n = len(next(iter(columns.values()))) if columns else 0
    rows = np.empty(n, dtype=np.dtype((np.void, dtype.itemsize)))
    for name, col in columns.items():
        field, offset = fields[name][:2]
        if n == 0 or field.itemsize == 0:
            continue
        items = np.ndarray((n,), dtype=np.dtype((np.void, field.itemsize)), buffer=rows,
                           offset=offset, strides=(dtype.itemsize,))
        src = np.ascontiguousarray(col, dtype=field.base)
        items[...] = src.reshape(n, -1).view(np.dtype((np.void, field.itemsize))).reshape(n)
    return rows


def _as_items(a: np.ndarray) -> np.ndarray | None:
    """A C-contiguous array of n-D rows as n opaque ``V<row bytes>`` items (fast to fancy-index)."""
    if a.ndim < 2 or a.dtype.hasobject or not a.flags.c_contiguous or a.dtype.itemsize == 0:
        return None
    elems = int(np.prod(a.shape[1:]))
    if elems == 0:
        return None
    return a.reshape(len(a), elems).view(np.dtype((np.void, a.dtype.itemsize * elems))).reshape(len(a))
