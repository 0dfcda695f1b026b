"""Arrow arrays as numpy arrays, and the few Arrow values the writer makes, without pyarrow's
pandas shim.

pyarrow imports pandas the first time a process calls ``Array.to_numpy`` (any arguments),
``pa.array`` or ``pa.scalar`` (its ``_pandas_api`` shim checks for pandas objects): 0.4-0.5 s
of CPU and ~60 MB per process where pandas is installed (pyarrow 14-21). A Spark Python worker
that runs a materialization task has no other use for pandas, and every worker of a fresh
session pays it once, on the critical path of its first batch (the JVM waits for the worker
to read). These helpers read the buffers directly instead (zero copy where the layout allows),
and fall back to ``to_numpy`` for the types they do not cover.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from petastream.errors import InvalidArgumentTypeError

__all__ = ["values", "list_lengths", "list_values", "validity", "empty_large_binary", "record_batch"]


def _fixed_dtype(t: Any) -> np.dtype | None:
    import pyarrow as pa

    if pa.types.is_integer(t):
        return np.dtype(f"{'i' if pa.types.is_signed_integer(t) else 'u'}{t.bit_width // 8}")
    if pa.types.is_floating(t):
        return np.dtype(f"f{t.bit_width // 8}")
    return None


def values(arr: Any) -> np.ndarray:
    """The values of a primitive (integer, floating, boolean) Arrow array as a read-only numpy
    array (zero copy but for booleans, which are unpacked from bits); what null slots hold is
    undefined, as in ``to_numpy(zero_copy_only=False)``'s numeric results. Other types:
    ``to_numpy(zero_copy_only=False)``."""
    import pyarrow as pa

    n, off = len(arr), arr.offset
    dtype = _fixed_dtype(arr.type)
    if dtype is not None:
        buf = arr.buffers()[1]
        if buf is None:  # a zero-length array may have no data buffer
            return np.empty(0, dtype)
        return np.frombuffer(buf, dtype=dtype, count=n, offset=off * dtype.itemsize)
    if pa.types.is_boolean(arr.type):
        return _bits(arr.buffers()[1], off, n).view(np.bool_)
    return np.asarray(arr.to_numpy(zero_copy_only=False))


def validity(arr: Any) -> np.ndarray | None:
    """A boolean mask of the non-null slots, or None when the array has no nulls."""
    if not arr.null_count:
        return None
    return _bits(arr.buffers()[0], arr.offset, len(arr)).view(np.bool_)


def list_lengths(arr: Any) -> np.ndarray:
    """The lengths of a list or large list array's rows as int64 (0 for a null row)."""
    import pyarrow as pa

    width = 8 if pa.types.is_large_list(arr.type) else 4
    n = len(arr)
    buf = arr.buffers()[1]
    if buf is None or n == 0:
        return np.zeros(n, np.int64)
    offsets = np.frombuffer(buf, dtype=f"<i{width}", count=n + 1, offset=arr.offset * width)
    return np.diff(offsets).astype(np.int64, copy=False)


def list_values(arr: Any) -> Any:
    """``arr.flatten()`` of a list array (any kind): the values of its rows, in order. Without
    nulls, a zero-copy slice of the child array (``flatten`` imports ``pyarrow.compute``, 0.1 s
    of a fresh worker's CPU); with nulls, ``flatten`` (which skips what null rows cover)."""
    import pyarrow as pa

    if arr.null_count or not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
        return arr.flatten()  # fixed-size lists: their child has no offsets buffer
    width = 8 if pa.types.is_large_list(arr.type) else 4
    n = len(arr)
    child = arr.values
    if n == 0:
        return child.slice(0, 0)
    offsets = np.frombuffer(arr.buffers()[1], dtype=f"<i{width}", count=n + 1, offset=arr.offset * width)
    return child.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))


def _bits(buf: Any, offset: int, n: int) -> np.ndarray:
    """``n`` bits of an Arrow bitmap (LSB first) from bit ``offset`` as uint8 0/1."""
    first, skip = divmod(offset, 8)
    raw = np.frombuffer(buf, dtype=np.uint8, count=(skip + n + 7) // 8, offset=first)
    return np.unpackbits(raw, bitorder="little")[skip:skip + n]


def empty_large_binary() -> Any:
    """``pa.scalar(b"", pa.large_binary())``, made from buffers."""
    import pyarrow as pa

    zero = pa.py_buffer(np.zeros(2, np.int64))
    return pa.Array.from_buffers(pa.large_binary(), 1, [None, zero, pa.py_buffer(b"")])[0]


def record_batch(columns: dict[str, tuple[Any, list[Any]]]) -> Any:
    """A small record batch from ``{name: (arrow type, python values)}`` for int32, int64,
    float64 and string columns, without nulls (a task's result row)."""
    import pyarrow as pa

    arrays = []
    for t, vals in columns.values():
        dtype = _fixed_dtype(t)
        if dtype is not None:
            arrays.append(pa.Array.from_buffers(t, len(vals), [None, pa.py_buffer(np.array(vals, dtype))]))
        elif pa.types.is_string(t):
            data = [v.encode() for v in vals]
            offsets = np.zeros(len(data) + 1, np.int32)
            np.cumsum([len(d) for d in data], out=offsets[1:])
            arrays.append(pa.Array.from_buffers(t, len(vals), [None, pa.py_buffer(offsets),
                                                               pa.py_buffer(b"".join(data))]))
        else:
            raise InvalidArgumentTypeError(
                f"record_batch: column type {t} is not supported; use int32, int64, float64 or string")
    return pa.RecordBatch.from_arrays(arrays, names=list(columns))
