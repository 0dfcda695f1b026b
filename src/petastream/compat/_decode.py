"""Decode a Parquet batch of a Unischema dataset into numpy columns, a column at a time.

``decode_table(schema, table)`` gives, per field, what Petastorm's ``make_reader`` yields for each
row, gathered in one numpy array per field (row ``i`` of the batch is element ``i``):

- a scalar field: a 1-D array of the field's numpy type (``'<U'`` for ``np.str_``, ``'S'`` for
  ``np.bytes_``, object for ``Decimal``), so element ``i`` is ``np.int32(..)``, ``np.str_(..)``,
  ``Decimal(..)`` as Petastorm casts it. Timestamps are ``datetime64[us]`` and dates
  ``datetime64[D]`` (Petastorm goes through pandas and ``np.datetime64(value)``). A null is None
  in an object array, except in float columns, where it is NaN, as Petastorm's pandas
  conversion makes it (Petastorm fails on a null timestamp; here it is None);
- an array field (``NdarrayCodec``, ``CompressedNdarrayCodec``, ``CompressedImageCodec``, list
  columns): one ``(rows, *shape)`` array when every row has the same shape and dtype and none is
  null, else an object array of per-row arrays (and None).

``NdarrayCodec`` columns of equal-length values are decoded in bulk: every value is an ``.npy``
file, and when they all share one header (dtype, C order, shape) the payloads sit at a fixed
stride in the Arrow data buffer: one strided view, one copy, no per-row Python.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa

from petastream.compat.codecs import CompressedImageCodec, NdarrayCodec, ScalarCodec
from petastream.compat.unischema import row_type, schema_name
from petastream.compat.utils import DecodeFieldError
from petastream.errors import InvalidArgumentError, InvalidArgumentTypeError

__all__ = ["decode_table", "decode_column", "decode_values", "make_rows"]


def decode_table(schema: Any, table: pa.Table | pa.RecordBatch,
                 fields: Iterable[str] | None = None) -> dict[str, np.ndarray]:
    """``{field name: column}`` for the schema's fields (or ``fields``), decoded from ``table``.
    Partition columns (dictionary-encoded strings) are decoded like any other column."""
    names = list(schema.fields) if fields is None else list(fields)
    missing = [n for n in names if n not in table.column_names]
    if missing:
        raise InvalidArgumentError(f"decode_table: fields {missing} of schema {schema_name(schema)!r} are not in the "
                                   f"Parquet batch (its columns: {table.column_names}); read them too or "
                                   "decode a schema view without them")
    return {n: decode_column(schema.fields[n], table.column(n)) for n in names}


def decode_column(field: Any, column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """One field's column, decoded (see the module docstring for the layout)."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    try:
        parts = [_decode_array(field, _plain(chunk)) for chunk in chunks]
    except DecodeFieldError:
        raise
    except Exception as e:
        raise DecodeFieldError(f'Decoding field "{field.name}" failed') from e
    return _concat(field, parts)


def decode_values(field: Any, values: Any) -> np.ndarray:
    """A codec field's column from its stored values (bytes, or None where null), one by one
    (an image codec's decode is one C call per value), as :func:`decode_column` gives it."""
    try:
        return _codec_values(field, values)
    except DecodeFieldError:
        raise
    except Exception as e:
        raise DecodeFieldError(f'Decoding field "{field.name}" failed') from e


def make_rows(schema: Any, columns: dict[str, np.ndarray]) -> list[Any]:
    """The batch as one namedtuple (the schema's type) per row, Petastorm's ``make_reader`` items."""
    make = row_type(schema)
    return [make(*values) for values in zip(*(columns[n] for n in schema.fields))]


def _plain(array: pa.Array) -> pa.Array:
    return array.dictionary_decode() if pa.types.is_dictionary(array.type) else array


def _decode_array(field: Any, array: pa.Array) -> np.ndarray:
    codec = field.codec
    if codec is None or isinstance(codec, ScalarCodec):
        t = array.type
        if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            return _list_column(field, array)
        return _scalar_column(field, array)
    if isinstance(codec, NdarrayCodec) and array.null_count == 0:
        dense = _npy_column(array)
        if dense is not None:
            return dense
    return _codec_values(field, _binary_values(array))


def _codec_values(field: Any, values: Sequence[Any]) -> np.ndarray:
    """Each stored value (None: null) through the field's codec, stacked where they stack. An
    image codec's column is decoded by :func:`~petastream.compat._images.decode_many` (unless a
    subclass decodes otherwise): straight into the stacked array, no codec call per value."""
    codec = field.codec
    if isinstance(codec, CompressedImageCodec) and type(codec).decode is CompressedImageCodec.decode:
        from petastream.compat import _images

        return _images.decode_many(values, getattr(field, "name", "?"))
    return _stack_or_objects([None if v is None else codec.decode(field, v) for v in values])


# -- scalars -------------------------------------------------------------------------------------

def _casts(numpy_dtype: Any) -> bool:
    return isinstance(numpy_dtype, type) and issubclass(numpy_dtype, (np.generic, Decimal))


def _target_dtype(numpy_dtype: Any, arrow_type: pa.DataType) -> Any:
    if numpy_dtype is np.datetime64:
        # Petastorm: np.datetime64(pandas value): microseconds for a timestamp, days for a date.
        return "datetime64[D]" if pa.types.is_date(arrow_type) else "datetime64[us]"
    if numpy_dtype is Decimal:
        return object
    return numpy_dtype


def _dense_scalars(field: Any, array: pa.Array) -> np.ndarray:
    """The non-null values of ``array``, cast as Petastorm casts them (floats: nulls are NaN)."""
    values = array.to_numpy(zero_copy_only=False)
    target = _target_dtype(field.numpy_dtype, array.type)
    return values if target is object else values.astype(target, copy=False)


def _scalar_column(field: Any, array: pa.Array) -> np.ndarray:
    if not _casts(field.numpy_dtype):  # Petastorm hands such values over as they are
        return _objects(array.to_pylist())
    floating = pa.types.is_floating(array.type) and np.issubdtype(field.numpy_dtype, np.floating)
    if array.null_count == 0 or floating:
        return _dense_scalars(field, array)
    dense = _dense_scalars(field, array.drop_null())
    out = np.full(len(array), None, dtype=object)
    out[array.is_valid().to_numpy(zero_copy_only=False)] = list(dense)  # keeps np.int32(..) etc.
    return out


def _list_column(field: Any, array: pa.Array) -> np.ndarray:
    dtype = _target_dtype(field.numpy_dtype, array.type.value_type) if _casts(field.numpy_dtype) else None
    rows: list[Any] = []
    for value in array:
        if not value.is_valid:
            rows.append(None)
            continue
        items = value.values.to_numpy(zero_copy_only=False)
        rows.append(items.astype(dtype) if dtype not in (None, object) else np.array(items))
    return _stack_or_objects(rows)


# -- binary columns ------------------------------------------------------------------------------

def _offsets_and_data(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    large = pa.types.is_large_binary(array.type) or pa.types.is_large_string(array.type)
    _, offsets_buf, data_buf = array.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int64 if large else np.int32)
    offsets = offsets[array.offset: array.offset + len(array) + 1].astype(np.int64)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.empty(0, np.uint8)
    return offsets, data


def _binary_values(array: pa.Array) -> list[memoryview | None]:
    if not (pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type)):
        raise InvalidArgumentTypeError(f"expected a binary column, got {array.type}")
    offsets, data = _offsets_and_data(array)
    valid = array.is_valid().to_numpy(zero_copy_only=False) if array.null_count else None
    raw = data.data
    return [raw[offsets[i]: offsets[i + 1]] if valid is None or valid[i] else None
            for i in range(len(array))]


def _npy_header(value: memoryview) -> tuple[int, tuple[int, ...], bool, np.dtype] | None:
    f = io.BytesIO(value)
    try:
        version = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read(f)
    except ValueError:
        return None
    return f.tell(), shape, fortran, dtype


def _npy_column(array: pa.Array) -> np.ndarray | None:
    """All values' arrays as one ``(rows, *shape)`` array, if they share one .npy header."""
    if not (pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type)) or len(array) == 0:
        return None
    offsets, data = _offsets_and_data(array)
    lengths = np.diff(offsets)
    length = int(lengths[0])
    if not (lengths == length).all():
        return None
    first = data.data[offsets[0]: offsets[0] + length]
    header = _npy_header(first)
    if header is None:
        return None
    header_len, shape, fortran, dtype = header
    if fortran or dtype.hasobject or header_len + dtype.itemsize * int(np.prod(shape)) != length:
        return None
    table = data[offsets[0]: offsets[0] + length * len(array)].reshape(len(array), length)
    if not (table[:, :header_len] == table[0, :header_len]).all():
        return None
    payload = np.ascontiguousarray(table[:, header_len:])
    return payload.view(dtype).reshape((len(array), *shape))


# -- assembling ----------------------------------------------------------------------------------

def _objects(values: list[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):  # one by one: numpy would broadcast equal-shape arrays
        out[i] = v
    return out


def _stack_or_objects(values: list[Any]) -> np.ndarray:
    if values and all(isinstance(v, np.ndarray) for v in values):
        first = values[0]
        if all(v.shape == first.shape and v.dtype == first.dtype for v in values):
            return np.stack(values)
    return _objects(values)


def _empty(field: Any) -> np.ndarray:
    shape = tuple(field.shape or ())
    if None in shape or not _casts(field.numpy_dtype):
        return np.empty(0, dtype=object)
    dtype = _target_dtype(field.numpy_dtype, pa.timestamp("us"))
    return np.empty((0, *shape), dtype=dtype)


def _concat(field: Any, parts: list[np.ndarray]) -> np.ndarray:
    parts = [p for p in parts if len(p)]
    if not parts:
        return _empty(field)
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    # Same dtype, or strings of different widths (numpy widens them).
    if all(p.dtype != object and (p.dtype == first.dtype or p.dtype.kind == first.dtype.kind in "US")
           and p.shape[1:] == first.shape[1:] for p in parts):
        return np.concatenate(parts)
    return _objects([v for p in parts for v in (p if p.dtype == object else list(p))])
