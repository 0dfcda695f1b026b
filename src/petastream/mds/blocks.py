"""A block of rows of MDS columns encoded at once into sample payloads (the writer's bulk
path, :meth:`petastream.mds.writer.MDSWriter.write_columns`): fixed-size columns checked for
lossy casts and packed as one structured array; variable-size ones interleaved with the
per-sample length header in one Arrow pass."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from petastream.errors import EncodingError
from petastream.mds.arrow_numpy import empty_large_binary, list_lengths, list_values, values
from petastream.mds.layout import ColumnLayout

__all__ = ["encode_block", "in_column"]


def _fixed_column(name: str, enc: Any, col: Any, n: int) -> np.ndarray:
    """A fixed-size column as an array of the encoding's dtype, checked for lossy casts."""
    import pyarrow as pa

    if isinstance(col, (pa.Array, pa.ChunkedArray)):
        if col.null_count:
            raise EncodingError(f"column {name!r}: {col.null_count} null value(s); MDS cannot store nulls")
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        if pa.types.is_fixed_size_list(col.type) or pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
            width = int(np.prod(enc.dtype.shape)) if enc.dtype.shape else 1
            lengths = (np.full(n, col.type.list_size) if pa.types.is_fixed_size_list(col.type)
                       else list_lengths(col))
            if (lengths != width).any():
                bad = int(np.argmax(lengths != width))
                raise EncodingError(
                    f"column {name!r}: row {bad} has {int(lengths[bad])} values; {enc.name} "
                    f"needs exactly {width} per row (use ndarray:{enc.dtype.base.name} for variable lengths)"
                )
            arr = values(list_values(col)).reshape((n, *enc.dtype.shape))
        else:
            arr = values(col)
    else:
        arr = np.asarray(col)
    base = enc.dtype.base
    want_shape = (n, *enc.dtype.shape)
    if arr.shape != want_shape:
        raise EncodingError(f"column {name!r}: expected shape {want_shape} for {enc.name}, got {arr.shape}")
    if arr.dtype != base:
        if arr.dtype == np.bool_ and base.kind in "iu":
            pass
        elif not np.can_cast(arr.dtype, base, casting="same_kind"):
            raise EncodingError(f"column {name!r}: cannot store {arr.dtype} values as {enc.name} without loss")
        elif base.kind in "iu" and arr.size:
            info = np.iinfo(base)
            lo, hi = arr.min(), arr.max()
            if lo < info.min or hi > info.max:
                raise EncodingError(
                    f"column {name!r}: values in [{lo}, {hi}] do not fit {enc.name} ({base})"
                )
    return arr


def encode_block(layout: ColumnLayout, cols: Mapping[str, Any], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Encode n rows to concatenated sample payloads (uint8) and their sizes.

    All fixed-size: one structured array. Otherwise every column becomes an Arrow
    ``large_binary`` array of its per-row bytes (fixed columns and the per-sample length
    header as ``(n, size)`` byte matrices, zero copy) and Arrow's ``binary_join_element_wise``
    interleaves them row by row in one pass in C++ (no per-byte index, no Python loop).
    """
    if layout.all_fixed:
        table = np.empty(n, dtype=layout.fixed_dtype())
        for name, enc in zip(layout.names, layout.encodings):
            table[name] = _fixed_column(name, enc, cols[name], n)
        return table.view(np.uint8), np.full(n, table.dtype.itemsize, dtype=np.int64)
    import pyarrow as pa
    import pyarrow.compute as pc

    parts: list[Any] = []
    var_lengths = []
    for name, enc in zip(layout.names, layout.encodings):
        if enc.size is not None:
            arr = _fixed_column(name, enc, cols[name], n)
            assert enc.dtype is not None  # fixed-size encodings have one
            mat = np.ascontiguousarray(arr, dtype=enc.dtype.base).view(np.uint8).reshape(n, enc.size)
            parts.append(_rows_as_binary(mat))
        else:
            try:
                offsets, data = enc.encode_column(cols[name])
            except EncodingError as e:
                raise in_column(e, name) from e
            var_lengths.append(np.diff(offsets))
            parts.append(pa.Array.from_buffers(
                pa.large_binary(), n,
                [None, pa.py_buffer(np.ascontiguousarray(offsets, dtype=np.int64)),
                 pa.py_buffer(data.reshape(-1))]))
    header = np.stack(var_lengths, axis=1).astype("<u4").view(np.uint8)  # (n, 4 * nvar)
    joined = pc.binary_join_element_wise(_rows_as_binary(header), *parts, empty_large_binary())
    _, off_buf, data_buf = joined.buffers()
    offsets = np.frombuffer(off_buf, dtype=np.int64)[joined.offset : joined.offset + n + 1]
    out = np.frombuffer(data_buf, dtype=np.uint8)[offsets[0] : offsets[-1]]
    return out, np.diff(offsets)


def in_column(error: EncodingError, name: str) -> EncodingError:
    """``error`` with the column named, of the same class (so still catchable as the builtin
    Mosaic raises for it: AttributeError, KeyError, OverflowError...)."""
    return type(error)(f"column {name!r}: {error}")


def _rows_as_binary(mat: np.ndarray) -> Any:
    """An ``(n, k)`` uint8 matrix as a ``large_binary`` Arrow array of its rows (no copy)."""
    import pyarrow as pa

    n, k = mat.shape
    offsets = np.arange(0, (n + 1) * k, k, dtype=np.int64)
    return pa.Array.from_buffers(pa.large_binary(), n,
                                 [None, pa.py_buffer(offsets), pa.py_buffer(mat.reshape(-1))])
