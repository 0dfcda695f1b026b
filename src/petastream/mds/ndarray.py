"""The ``ndarray[:<dtype>[:<d0>,<d1>,...]]`` encoding (Mosaic's ``NDArray``).

Byte layout of one value::

    dynamic dtype, dynamic shape : [u8 dtype_code][u8 (ndim<<2)|shape_code][ndim x dims][values]
    static  dtype, dynamic shape :                [u8 (ndim<<2)|shape_code][ndim x dims][values]
    static  dtype, static  shape :                                                    [values]

``dims`` use the smallest unsigned type (shape_code 0..3 = uint8/16/32/64) with
``max(shape) < 2**(8*size)``; ``values`` is ``arr.tobytes()`` in C order, little-endian.
ndim is 1..63 and every dimension >= 1 (0-d and empty arrays are rejected, as Mosaic does,
with its error messages).
With dtype and shape both given the encoding is fixed-size: ``prod(shape) * itemsize`` bytes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from petastream.columns.gather import gather_ranges
from petastream.columns.ragged import Ragged
from petastream.errors import EncodingError, UnknownEncodingError
from petastream.mds import arrow_numpy
from petastream.mds.encodings import Encoding, wrong_type
from petastream.mds.segments import copy_segments

__all__ = ["NDArray", "DTYPE_CODES"]

DTYPE_CODES: dict[str, int] = {
    "uint8": 8, "int8": 9,
    "uint16": 16, "int16": 17, "float16": 18,
    "uint32": 32, "int32": 33, "float32": 34,
    "uint64": 64, "int64": 65, "float64": 66,
}
_CODE_DTYPES = {code: np.dtype(name).newbyteorder("<") for name, code in DTYPE_CODES.items()}
_SHAPE_DTYPES: list[np.dtype] = [np.dtype("<u1"), np.dtype("<u2"), np.dtype("<u4"), np.dtype("<u8")]


def _shape_code(shape: tuple[int, ...]) -> int:
    biggest = max(shape)
    for code, dt in enumerate(_SHAPE_DTYPES):
        if biggest < 1 << (8 * dt.itemsize):
            return code
    raise EncodingError(f"ndarray dimension {biggest} is too large")


class NDArray(Encoding):
    def __init__(self, dtype: str | None = None, shape: tuple[int, ...] | None = None):
        # Mosaic asserts on these (AssertionError); ours is its writer's error for an encoding
        # it does not support (TypeError), and a ValueError (FormatError).
        if shape is not None and dtype is None:
            raise UnknownEncodingError("ndarray encoding: a shape needs a dtype (ndarray:<dtype>:<shape>)")
        if dtype is not None and dtype not in DTYPE_CODES:
            raise UnknownEncodingError(
                f"ndarray dtype {dtype!r} is not supported; valid: {', '.join(DTYPE_CODES)}"
            )
        if shape is not None and (not 1 <= len(shape) <= 63 or min(shape) < 1):
            raise UnknownEncodingError(f"ndarray shape {shape} must have 1..63 dimensions, each >= 1")
        self.value_dtype = np.dtype(dtype).newbyteorder("<") if dtype else None
        self.shape = shape
        parts = ["ndarray"]
        if dtype:
            parts.append(dtype)
        if shape:
            parts.append(",".join(map(str, shape)))
        self.name = ":".join(parts)
        if self.value_dtype is not None and shape is not None:
            self.size = int(np.prod(shape)) * self.value_dtype.itemsize
            self.dtype = np.dtype((self.value_dtype, shape))
        else:
            self.size = None
            self.dtype = None

    @classmethod
    def from_name(cls, name: str) -> NDArray:
        parts = name.split(":")
        if parts[0] != "ndarray" or len(parts) > 3:
            raise UnknownEncodingError(f"bad ndarray encoding {name!r}; use ndarray[:<dtype>[:<d0>,<d1>...]]")
        dtype = parts[1] if len(parts) > 1 and parts[1] else None
        shape = None
        if len(parts) == 3:
            try:
                shape = tuple(int(d) for d in parts[2].split(","))
            except ValueError as e:
                raise UnknownEncodingError(f"bad ndarray shape in {name!r}; use <d0>,<d1>... (ints)") from e
        return cls(dtype, shape)

    # -- per sample --------------------------------------------------------------------------
    def encode(self, value: Any) -> bytes:
        # Checks in Mosaic's order, with its messages first (tests match on them).
        arr = value if isinstance(value, np.ndarray) else np.asarray(value)
        if not isinstance(value, np.ndarray) and arr.dtype.name not in DTYPE_CODES:
            # Lists of numbers are taken; Mosaic reads .dtype of any value (AttributeError)
            raise wrong_type(self.name, np.ndarray, value, f"pass a numpy array of {', '.join(DTYPE_CODES)}")
        if arr.dtype.name not in DTYPE_CODES:
            raise EncodingError(
                f"Unsupported dtype: {arr.dtype.name}. The ndarray encoding takes {', '.join(DTYPE_CODES)}: "
                "cast the array (arr.astype(...)) or use 'pkl'")
        if self.value_dtype is not None:
            if arr.dtype.newbyteorder("<") != self.value_dtype and arr.dtype != self.value_dtype:
                raise EncodingError(
                    f"Wrong dtype: expected {self.value_dtype.name}, got {arr.dtype.name}. Cast the "
                    f"array (arr.astype({self.value_dtype.name!r})) or declare the column 'ndarray'")
        if arr.size == 0:
            raise EncodingError(
                f"Attempting to encode a numpy array with 0 elements. Its shape is {arr.shape}: MDS "
                "cannot store empty arrays; drop the row or store a placeholder")
        if arr.ndim == 0:
            raise EncodingError(
                "Attempting to encode a scalar with NDArray encoding. Please use a scalar encoding "
                f"({arr.dtype.name}), or reshape it to (1,)")
        if arr.ndim > 63:
            raise EncodingError(f"Array has too many axes: maximum 63, got {arr.ndim}.")
        if self.shape is not None and arr.shape != self.shape:
            raise EncodingError(
                f"Wrong shape: expected {self.shape}, got {arr.shape}. Reshape the array or declare "
                f"the column 'ndarray:{arr.dtype.name if self.value_dtype is None else self.value_dtype.name}' "
                "(any shape)")
        values = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes()
        if self.shape is not None:
            return values
        header = bytearray()
        if self.value_dtype is None:
            header.append(DTYPE_CODES[arr.dtype.name])
        code = _shape_code(arr.shape)
        header.append((arr.ndim << 2) | code)
        header += np.asarray(arr.shape, dtype=_SHAPE_DTYPES[code]).tobytes()
        return bytes(header) + values

    def decode(self, data: bytes | memoryview) -> np.ndarray:
        if self.shape is not None:
            return np.frombuffer(data, dtype=self.value_dtype).reshape(self.shape)
        view = memoryview(data)
        pos = 0
        if self.value_dtype is None:
            dtype = _CODE_DTYPES.get(view[0])
            if dtype is None:
                raise EncodingError(f"ndarray value has unknown dtype code {view[0]}")
            pos = 1
        else:
            dtype = self.value_dtype
        ndim, code = view[pos] >> 2, view[pos] & 3
        pos += 1
        sdt = _SHAPE_DTYPES[code]
        shape = tuple(int(d) for d in np.frombuffer(view[pos : pos + ndim * sdt.itemsize], sdt))
        pos += ndim * sdt.itemsize
        return np.frombuffer(view[pos:], dtype=dtype).reshape(shape)

    # -- bulk --------------------------------------------------------------------------------
    def encode_column(self, values: Any) -> tuple[np.ndarray, np.ndarray]:
        flat = _list_array_parts(values, self.value_dtype)
        if flat is None:
            return super().encode_column(values)
        lengths, data = flat
        if (lengths == 0).any():
            i = int(np.argmax(lengths == 0))
            raise EncodingError(f"Attempting to encode a numpy array with 0 elements. Value {i} is "
                                "empty: MDS cannot store empty arrays; drop the row or store a placeholder")
        return _encode_1d(lengths, data, self.value_dtype is None)

    def decode_column(self, offsets: np.ndarray, data: np.ndarray) -> Any:
        """1-D values of one dtype decode to a :class:`Ragged` without a Python loop."""
        n = len(offsets) - 1
        if n == 0 or self.shape is not None:
            return super().decode_column(offsets, data)
        starts = offsets[:-1]
        pos = starts
        if self.value_dtype is None:
            codes = data[starts]
            if (codes != codes[0]).any() or int(codes[0]) not in _CODE_DTYPES:
                return super().decode_column(offsets, data)
            dtype = _CODE_DTYPES[int(codes[0])]
            pos = starts + 1
        else:
            dtype = self.value_dtype
        hdr = data[pos]
        if (hdr >> 2 != 1).any():  # not all 1-D: per-sample path keeps each shape
            return super().decode_column(offsets, data)
        codes = (hdr & 3).astype(np.int64)
        widths = 1 << codes
        pos = pos + 1
        lengths = np.zeros(n, dtype=np.int64)
        for code in np.unique(codes):
            sel = codes == code
            w = 1 << int(code)
            raw = data[pos[sel][:, None] + np.arange(w)]
            lengths[sel] = raw.view(_SHAPE_DTYPES[int(code)]).reshape(-1)
        vstart = pos + widths
        nbytes = lengths * dtype.itemsize
        if not np.array_equal(vstart + nbytes, offsets[1:]):
            raise EncodingError("ndarray values do not fill their sample: corrupt data or wrong encoding")
        values = gather_ranges(data, vstart, nbytes).view(dtype)
        voff = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=voff[1:])
        return Ragged(values, voff)


def _list_array_parts(values: Any, dtype: np.dtype | None) -> tuple[np.ndarray, np.ndarray] | None:
    """``(lengths, flat values)`` of an Arrow list column, or None for other inputs."""
    import pyarrow as pa

    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if not isinstance(arr, pa.Array) or not (
        pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)
    ):
        return None
    if arr.null_count:
        raise EncodingError(f"column has {arr.null_count} null array(s); the ndarray encoding cannot store nulls")
    flat = arrow_numpy.list_values(arr)
    if flat.null_count:
        raise EncodingError(f"arrays hold {flat.null_count} null element(s); the ndarray encoding cannot store nulls")
    np_flat = arrow_numpy.values(flat)  # not to_numpy: that imports pandas (see arrow_numpy)
    if dtype is not None:
        if np_flat.dtype.newbyteorder("<") != dtype and np_flat.dtype != dtype:
            raise EncodingError(f"Wrong dtype: expected {dtype.name}, got {np_flat.dtype.name}. Cast the "
                                "Arrow column or declare it 'ndarray'")
    elif np_flat.dtype.name not in DTYPE_CODES:
        return None
    return arrow_numpy.list_lengths(arr), np.ascontiguousarray(np_flat, dtype=np_flat.dtype.newbyteorder("<"))


def _encode_1d(lengths: np.ndarray, flat: np.ndarray, with_dtype: bool) -> tuple[np.ndarray, np.ndarray]:
    """Encode 1-D arrays given as lengths + concatenated values, without a per-value loop."""
    n = len(lengths)
    codes = np.zeros(n, dtype=np.int64)
    for dt in _SHAPE_DTYPES[:-1]:
        codes += lengths >= (1 << (8 * dt.itemsize))
    widths = 1 << codes
    head = int(with_dtype) + 1
    item = flat.dtype.itemsize
    sizes = head + widths + lengths * item
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    out = np.zeros(int(offsets[-1]), dtype=np.uint8)
    starts = offsets[:-1]
    if with_dtype:
        out[starts] = DTYPE_CODES[flat.dtype.name]
    out[starts + head - 1] = ((1 << 2) | codes).astype(np.uint8)
    for code in np.unique(codes):
        sel = codes == code
        w = 1 << int(code)
        dims = lengths[sel].astype(_SHAPE_DTYPES[int(code)]).view(np.uint8).reshape(-1, w)
        out[(starts[sel] + head)[:, None] + np.arange(w)] = dims
    vstart = starts + head + widths
    nbytes = lengths * item
    total = int(nbytes.sum())
    if total:
        src_starts = np.zeros(n, dtype=np.int64)
        np.cumsum(nbytes[:-1], out=src_starts[1:])
        copy_segments(out, vstart, flat.view(np.uint8).reshape(-1), src_starts, nbytes)
    return offsets, out
