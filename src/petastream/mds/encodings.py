"""MDS column encodings: the registry and the scalar/text encodings.

Every encoding has two paths:

* per sample, for random access and Mosaic's ``MDSWriter.write(dict)`` API:
  ``encode(value) -> bytes`` and ``decode(buffer) -> value`` with Mosaic's exact types
  (``int`` -> Python int, ``uint8`` -> ``np.uint8`` scalar, ``str`` -> str ...);
* in bulk, the hot path: a fixed-size encoding exposes ``dtype`` (a numpy dtype, possibly with a
  sub-array shape) so a whole column is one strided view over the shard bytes; a variable-size
  encoding turns a column into ``(offsets, data)`` and back without a Python loop where the
  payload is plain bytes or text (``bytes``, ``str``), and through the per-sample path otherwise.

Byte layouts are Mosaic Streaming's (``streaming/base/format/mds/encodings.py``): all integers
and floats little-endian, no padding. The rule that a ``bytes`` value is written unchanged under
any encoding (``mds_encode``) is applied by :func:`encode_value`, not by each encoding.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import numpy as np

from petastream.columns.text import arrow_decode, kind_name, ranges_to_objects
from petastream.errors import (
    EncodedSizeError,
    EncodingError,
    EncodingOverflowError,
    EncodingTypeError,
    FormatError,
    UnknownEncodingError,
    UnsafeEncodingError,
)

__all__ = [
    "Encoding",
    "get_encoding",
    "is_mds_encoding",
    "get_mds_encodings",
    "get_mds_encoded_size",
    "encode_value",
    "wrong_type",
    "UNSAFE_ENCODINGS",
]

UNSAFE_ENCODINGS = frozenset({"pkl"})


class Encoding:
    """One MDS encoding. ``size`` is the fixed encoded size in bytes, or None if it varies."""

    name: str = ""
    size: int | None = None
    #: numpy dtype of one value for fixed-size encodings (the bulk path's structured field).
    dtype: np.dtype | None = None

    def encode(self, value: Any) -> bytes:
        raise NotImplementedError

    def decode(self, data: bytes | memoryview) -> Any:
        raise NotImplementedError

    # -- bulk, variable-size ----------------------------------------------------------------
    def encode_column(self, values: Any) -> tuple[np.ndarray, np.ndarray]:
        """Encode a whole column to ``(offsets int64[n+1], data uint8[...])``.

        The generic path loops over values; ``bytes``/``str`` override it with Arrow. An Arrow
        binary array is taken as already encoded (as :func:`encode_value` takes a ``bytes``
        value), straight from its buffers: no loop.
        """
        if _is_arrow_binary(values):
            return _arrow_encode(values, "binary", None)
        parts = [encode_value(self, v) for v in values]
        return _pack(parts)

    def decode_column(self, offsets: np.ndarray, data: np.ndarray) -> np.ndarray:
        """Decode ``(offsets, data)`` to an object array (one Python value per sample)."""
        buf = data.tobytes()
        out = np.empty(len(offsets) - 1, dtype=object)
        for i in range(len(out)):
            out[i] = self.decode(buf[offsets[i] : offsets[i + 1]])
        return out

    def decode_ranges(self, buffer: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> Any:
        """Decode value i from ``buffer[starts[i]:starts[i]+lengths[i]]``, in the order given.

        The shard reader's entry point: ranges may come in any order and repeat. By default the
        bytes are gathered into ``(offsets, data)`` for :meth:`decode_column`; ``str``/``bytes``
        go from the buffer to Python objects through one Arrow take.
        """
        from petastream.columns.gather import gather_ranges

        lengths = np.asarray(lengths, dtype=np.int64)
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return self.decode_column(offsets, gather_ranges(buffer, starts, lengths))

    def __repr__(self) -> str:
        return f"<Encoding {self.name}>"


def _is_arrow_binary(values: Any) -> bool:
    if not type(values).__module__.startswith("pyarrow"):
        return False
    import pyarrow as pa

    return isinstance(values, (pa.Array, pa.ChunkedArray)) and (
        pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type))


def _pack(parts: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in parts], out=offsets[1:])
    data = np.frombuffer(b"".join(parts), dtype=np.uint8)
    return offsets, data


def encode_value(enc: Encoding, value: Any) -> bytes:
    """Mosaic's ``mds_encode``: a ``bytes`` value is taken as already encoded, for any encoding."""
    if type(value) is bytes:
        data = value
    else:
        data = enc.encode(value)
    if enc.size is not None and len(data) != enc.size:
        raise EncodedSizeError(  # Mosaic's KeyError and sentence, then what to do
            f"Unexpected data size; was this data typed with the correct encoding ({enc.name})? "
            f"It takes exactly {enc.size} bytes per value, got {len(data)}"
        )
    return data


def wrong_type(encoding: str, expected: Any, value: Any, fix: str) -> EncodingTypeError:
    """The error for a value of the wrong type: Mosaic's sentence (``data should be of type
    <class 'str'>, but instead, found as <class 'int'>``) after the encoding's name, then
    ``fix``. ``expected``: a class, or a description of what is taken."""
    shown = repr(value)
    shown = f" ({shown[:60]}...)" if len(shown) > 60 else f" ({shown})"
    return EncodingTypeError(f"encoding {encoding!r}: data should be of type {expected}, but instead, "
                             f"found as {type(value)}{shown}; {fix}")


# --- fixed-size numeric scalars ------------------------------------------------------------


class NumpyScalar(Encoding):
    """``uint8`` ... ``float64``: ``np.<t>(v).tobytes()``; decodes to a numpy scalar."""

    dtype: np.dtype

    def __init__(self, name: str):
        self.name = name
        self.dtype = np.dtype(name).newbyteorder("<")
        self.size = self.dtype.itemsize

    def encode(self, value: Any) -> bytes:
        # numpy's own error types (Mosaic's, since it calls numpy): None -> TypeError, an
        # out-of-range int -> OverflowError (numpy 2's; numpy 1 wraps it around, so checked here).
        # (Beyond 64 bits numpy raises its own "Python int too large to convert to C long".)
        if self.dtype.kind in "iu" and isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            info, v = np.iinfo(self.dtype), int(value)
            if -(1 << 63) <= v < 1 << 64 and not info.min <= v <= info.max:
                raise EncodingOverflowError(
                    f"cannot encode {value!r} as {self.name}: Python integer {value} out of bounds for "
                    f"{self.name}; pick a wider type")
        try:
            return np.asarray(value, dtype=self.dtype).reshape(()).tobytes()
        except TypeError as e:
            raise EncodingTypeError(f"cannot encode {value!r} as {self.name}: {e}") from e
        except OverflowError as e:
            raise EncodingOverflowError(
                f"cannot encode {value!r} as {self.name}: {e}; pick a wider type") from e
        except ValueError as e:
            raise EncodingError(f"cannot encode {value!r} as {self.name}: {e}") from e

    def decode(self, data: bytes | memoryview) -> Any:
        return np.frombuffer(data, dtype=self.dtype)[0]


class Int(Encoding):
    """``int``: int64 little-endian; decodes to a Python ``int``.

    Mosaic rejects numpy integers here; we accept them (same bytes) since Spark and pandas hand
    them out everywhere.
    """

    name = "int"
    size = 8
    dtype = np.dtype("<i8")

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, (int, np.integer)):
            raise wrong_type("int", int, value, "pass an int (int(x) converts numbers)")
        try:
            return np.int64(value).tobytes()
        except OverflowError as e:
            raise EncodingOverflowError(
                f"encoding 'int': {e} ({value!r} does not fit int64); use 'str_int' for integers "
                "of any size") from e

    def decode(self, data: bytes | memoryview) -> int:
        return int(np.frombuffer(data, dtype=self.dtype)[0])


# --- variable-size ---------------------------------------------------------------------------


class Bytes(Encoding):
    name = "bytes"

    def encode(self, value: Any) -> bytes:
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        raise wrong_type("bytes", bytes, value, "pass bytes, or use the encoding of its type ('str', 'int', 'json'...)")

    def decode(self, data: bytes | memoryview) -> bytes:
        return bytes(data)

    def encode_column(self, values: Any) -> tuple[np.ndarray, np.ndarray]:
        return _arrow_encode(values, "binary", self.encode)

    def decode_column(self, offsets: np.ndarray, data: np.ndarray) -> np.ndarray:
        return arrow_decode(offsets, data, "binary")

    def decode_ranges(self, buffer: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        return ranges_to_objects(buffer, starts, lengths, "binary")


class Str(Encoding):
    name = "str"

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, str):
            raise wrong_type("str", str, value, "pass str, or use the encoding of its type ('bytes', 'int'...)")
        return value.encode("utf-8")

    def decode(self, data: bytes | memoryview) -> str:
        return bytes(data).decode("utf-8")

    def encode_column(self, values: Any) -> tuple[np.ndarray, np.ndarray]:
        return _arrow_encode(values, "string", self.encode)

    def decode_column(self, offsets: np.ndarray, data: np.ndarray) -> np.ndarray:
        return arrow_decode(offsets, data, "string")

    def decode_ranges(self, buffer: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        return ranges_to_objects(buffer, starts, lengths, "string")


def _arrow_encode(values: Any, kind: str,
                  encode_one: Callable[[Any], bytes] | None) -> tuple[np.ndarray, np.ndarray]:
    """Offsets and bytes of a str/bytes column, taken straight from Arrow's buffers."""
    import pyarrow as pa

    arr = values
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if not isinstance(arr, pa.Array):
        try:
            arr = _to_arrow(values, kind)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            # Mixed input (say bytes in a str column, which Mosaic writes as-is): slow path.
            return _pack([encode_value(_REGISTRY[kind_name(kind)], v) for v in values])
    if arr.null_count:
        raise EncodingError(f"column has {arr.null_count} null value(s); MDS '{kind_name(kind)}' cannot store nulls")
    if pa.types.is_string(arr.type) or pa.types.is_binary(arr.type):
        arr = arr.cast(pa.large_binary())
    elif pa.types.is_large_string(arr.type):
        arr = arr.cast(pa.large_binary())
    elif not pa.types.is_large_binary(arr.type):
        raise EncodingError(f"encoding '{kind_name(kind)}' cannot take Arrow type {arr.type}")
    _, off_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(off_buf, dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    if offsets[0]:
        data = data[offsets[0] : offsets[-1]]
        offsets = offsets - offsets[0]
    else:
        data = data[: offsets[-1]]
    return offsets.astype(np.int64, copy=False), data


def _to_arrow(values: Any, kind: str) -> Any:
    """A str/bytes column (list, numpy ``U``/``S``/object array) as an Arrow array.

    pyarrow < 20 cannot convert a numpy string array to ``large_string``/``large_binary``
    directly (``NumPyConverter doesn't implement <large_string> conversion``): convert to
    ``string``/``binary`` there (chunked past 2 GiB) and let the caller cast.
    """
    import pyarrow as pa

    large, small = (pa.large_string(), pa.string()) if kind == "string" else (pa.large_binary(), pa.binary())
    try:
        return pa.array(values, type=large)
    except pa.ArrowNotImplementedError:
        arr = pa.array(values, type=small)
    if isinstance(arr, pa.ChunkedArray):  # over 2 GiB of characters
        return pa.chunked_array([c.cast(large) for c in arr.chunks], large).combine_chunks()
    return arr


class StrInt(Encoding):
    name = "str_int"

    def encode(self, value: Any) -> bytes:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise wrong_type("str_int", int, value, "pass an int (int(x) converts numbers)")
        return str(int(value)).encode()

    def decode(self, data: bytes | memoryview) -> int:
        return int(bytes(data).decode())


class StrFloat(Encoding):
    name = "str_float"

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, (float, np.floating)):
            raise wrong_type("str_float", float, value, "pass a float (float(x) converts numbers)")
        return str(float(value)).encode()

    def decode(self, data: bytes | memoryview) -> float:
        return float(bytes(data).decode())


class StrDecimal(Encoding):
    name = "str_decimal"

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, Decimal):
            raise wrong_type("str_decimal", Decimal, value, "pass a decimal.Decimal (Decimal(str(x)) converts)")
        return str(value).encode()

    def decode(self, data: bytes | memoryview) -> Decimal:
        return Decimal(bytes(data).decode())


class Json(Encoding):
    name = "json"

    def encode(self, value: Any) -> bytes:
        if isinstance(value, np.ndarray):
            value = value.tolist()
        try:
            return json.dumps(value).encode("utf-8")
        except TypeError as e:  # Mosaic lets json's TypeError through: ours is one too
            raise EncodingTypeError(
                f"encoding 'json': {e}; convert the value to dict, list, str, int, float, bool or "
                "None, or use 'pkl'") from e

    def decode(self, data: bytes | memoryview) -> Any:
        return json.loads(bytes(data).decode("utf-8"))


class Pickle(Encoding):
    """``pkl``: unsafe (unpickling runs code), refused on read unless allowed."""

    name = "pkl"

    def encode(self, value: Any) -> bytes:
        return pickle.dumps(value)

    def decode(self, data: bytes | memoryview) -> Any:
        return pickle.loads(bytes(data))


# --- registry --------------------------------------------------------------------------------

_REGISTRY: dict[str, Encoding] = {
    "bytes": Bytes(),
    "str": Str(),
    "int": Int(),
    "str_int": StrInt(),
    "str_float": StrFloat(),
    "str_decimal": StrDecimal(),
    "json": Json(),
    "pkl": Pickle(),
}
for _t in ("uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
           "float16", "float32", "float64"):
    _REGISTRY[_t] = NumpyScalar(_t)

# Loaded on first use: they import Pillow (images) or carry configuration (ndarray).
_LAZY = {"ndarray", "pil", "jpeg", "png", "jpeg_array", "jpegarray", "list[pil]", "list[jpeg]", "list[png]"}


def get_mds_encodings() -> set[str]:
    """The 28 encoding names Mosaic Streaming knows."""
    return set(_REGISTRY) | _LAZY


def get_encoding(name: str, *, allow_unsafe: bool = True) -> Encoding:
    """Look up an encoding by name (``ndarray:<dtype>[:<shape>]`` included)."""
    if not isinstance(name, str):
        raise UnknownEncodingError(f"an encoding name must be a string, got {name!r}")
    base, sep, config = name.partition(":")
    if base == "ndarray":
        from petastream.mds.ndarray import NDArray

        return NDArray.from_name(name)
    if sep:
        raise UnknownEncodingError(f"encoding {name!r}: only 'ndarray' takes a ':' configuration")
    if name in UNSAFE_ENCODINGS and not allow_unsafe:
        raise UnsafeEncodingError(
            f"encoding {name!r} unpickles arbitrary objects and can run code; "
            "pass allow_unsafe_types=True if you trust this dataset"
        )
    enc = _REGISTRY.get(name)
    if enc is not None:
        return enc
    if name in _LAZY:
        from petastream.mds.images import IMAGE_ENCODINGS

        return IMAGE_ENCODINGS[name]
    raise UnknownEncodingError(
        f"unknown MDS encoding {name!r}; valid: {', '.join(sorted(get_mds_encodings()))} "
        "(and ndarray:<dtype>[:<d0>,<d1>...])"
    )


def is_mds_encoding(name: str) -> bool:
    try:
        get_encoding(name)
    except FormatError:
        return False
    return True


def get_mds_encoded_size(name: str) -> int | None:
    """Fixed encoded size of ``name`` in bytes, or None when it varies."""
    return get_encoding(name).size
