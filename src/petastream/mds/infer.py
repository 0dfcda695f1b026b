"""Choosing MDS encodings for Arrow and numpy columns.

Used when a caller gives data without a ``columns`` mapping (``write_mds``) and by the Spark
materializer. The choice keeps values exact and sizes fixed wherever possible, since
fixed-size columns are what the bulk reader turns into zero-copy views.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from petastream.errors import EncodingError
from petastream.mds.ndarray import DTYPE_CODES

__all__ = ["encoding_for_arrow_type", "encoding_for_numpy"]

_NUMERIC = set(DTYPE_CODES)


def encoding_for_numpy(name: str, arr: np.ndarray) -> str:
    """Encoding for a numpy column: 1-D numeric -> scalar, (n, *shape) numeric -> fixed ndarray."""
    dt = arr.dtype
    if dt == np.bool_:
        return "uint8" if arr.ndim == 1 else _fixed_ndarray("uint8", arr.shape[1:])
    if dt.name in _NUMERIC:
        return dt.name if arr.ndim == 1 else _fixed_ndarray(dt.name, arr.shape[1:])
    if dt.kind == "U":
        return "str"
    if dt.kind == "S":
        return "bytes"
    if dt.kind == "O" and len(arr):
        first = arr[0]
        if isinstance(first, str):
            return "str"
        if isinstance(first, bytes):
            return "bytes"
        if isinstance(first, np.ndarray) and first.dtype.name in _NUMERIC:
            return f"ndarray:{first.dtype.name}"
    raise EncodingError(
        f"column {name!r}: cannot choose an MDS encoding for numpy dtype {dt}; "
        "pass columns={...} with an explicit encoding"
    )


def _fixed_ndarray(dtype: str, shape: tuple[int, ...]) -> str:
    return f"ndarray:{dtype}:{','.join(map(str, shape))}"


def _numpy_dtype(typ: Any) -> str:
    """The numpy dtype name of an Arrow integer or floating type. (Not ``to_pandas_dtype()``:
    it imports pandas on pyarrow < 15, and pandas is no dependency of the core.)"""
    import pyarrow as pa

    if pa.types.is_floating(typ):
        return f"float{typ.bit_width}"
    return f"{'' if pa.types.is_signed_integer(typ) else 'u'}int{typ.bit_width}"


def encoding_for_arrow_type(name: str, typ: Any, *, fixed_length: int | None = None) -> str:
    """Encoding for an Arrow type. ``fixed_length`` marks a list column whose rows all have
    that length (known only from the data), which then gets a fixed-size ``ndarray``."""
    import pyarrow as pa

    t = pa.types
    if t.is_boolean(typ):
        return "uint8"
    if t.is_integer(typ) or t.is_floating(typ):
        return _numpy_dtype(typ)
    if t.is_string(typ) or t.is_large_string(typ):
        return "str"
    if t.is_binary(typ) or t.is_large_binary(typ) or t.is_fixed_size_binary(typ):
        return "bytes"
    if t.is_decimal(typ):
        return "str_decimal"
    if t.is_fixed_size_list(typ) or t.is_list(typ) or t.is_large_list(typ):
        inner = typ.value_type
        if t.is_integer(inner) or t.is_floating(inner):
            dtype = _numpy_dtype(inner)
            size = typ.list_size if t.is_fixed_size_list(typ) else fixed_length
            return _fixed_ndarray(dtype, (size,)) if size else f"ndarray:{dtype}"
        if t.is_boolean(inner):
            size = typ.list_size if t.is_fixed_size_list(typ) else fixed_length
            return _fixed_ndarray("uint8", (size,)) if size else "ndarray:uint8"
    raise EncodingError(
        f"column {name!r}: Arrow type {typ} has no MDS encoding here; cast it to a supported "
        "type (numbers, strings, binary, decimal, arrays of numbers) or pass columns={...}"
    )
