"""Unischema fields inferred from an Arrow schema (``Unischema.from_arrow_schema``).

For Parquet datasets Petastorm did not write: every supported column becomes a codec-less field
(scalars, or shape ``(None,)`` for a list column), hive partition keys come first as string or
int64 fields, as in Petastorm. Beyond Petastorm's table, unsigned 16/32/64-bit integers and the
``large_`` string/binary/list types are mapped too (Petastorm drops those columns with a
warning); float16 is not, as in Petastorm (dropped with the warning, or its ``ValueError`` with
``omit_unsupported_fields=False``).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa

from petastream.compat.unischema import UnischemaField
from petastream.errors import InvalidArgumentTypeError

__all__ = ["unischema_fields_from_arrow", "numpy_type_from_arrow", "batch_reader_columns"]


def numpy_type_from_arrow(arrow_type: pa.DataType) -> Any:
    """The ``numpy_dtype`` of a field stored as ``arrow_type`` (a list: its element's)."""
    t = pa.types
    if pa.types.is_dictionary(arrow_type):
        return numpy_type_from_arrow(arrow_type.value_type)
    if t.is_list(arrow_type) or t.is_large_list(arrow_type) or t.is_fixed_size_list(arrow_type):
        return numpy_type_from_arrow(arrow_type.value_type)
    if t.is_integer(arrow_type) or t.is_boolean(arrow_type) or (t.is_floating(arrow_type)
                                                                and not t.is_float16(arrow_type)):
        return arrow_type.to_pandas_dtype()
    if t.is_string(arrow_type) or t.is_large_string(arrow_type):
        return np.str_
    if t.is_decimal(arrow_type):
        return Decimal
    if t.is_binary(arrow_type) or t.is_large_binary(arrow_type) or t.is_fixed_size_binary(arrow_type):
        return np.bytes_
    if t.is_date(arrow_type) or t.is_timestamp(arrow_type):
        return np.datetime64
    raise ValueError(f"Cannot auto-create unischema due to unsupported column type {arrow_type}")


def _legacy_piece_schema(dataset: Any) -> Any:
    # Petastorm read pyarrow's legacy ParquetDataset as ``pieces[0].get_metadata().schema
    # .to_arrow_schema()``; objects shaped so (and mocks of them in users' tests) still work
    try:
        return dataset.pieces[0].get_metadata().schema.to_arrow_schema()
    except (AttributeError, IndexError, TypeError, KeyError):
        return None


def _arrow_schema(dataset: Any) -> pa.Schema:
    if isinstance(dataset, pa.Schema):
        return dataset
    schema: Any = getattr(dataset, "schema", None)
    if not isinstance(schema, pa.Schema) and hasattr(schema, "to_arrow_schema"):  # a ParquetSchema
        schema = schema.to_arrow_schema()
    if not isinstance(schema, pa.Schema):
        schema = _legacy_piece_schema(dataset)
    if not isinstance(schema, pa.Schema):
        raise InvalidArgumentTypeError(f"from_arrow_schema: expected a pyarrow.Schema or a dataset with one, "
                                       f"got {type(dataset).__name__}")
    return schema


def _partition_fields(dataset: Any) -> list[tuple[str, pa.DataType]]:
    partitioning: Any = getattr(dataset, "partitioning", None)
    if isinstance(getattr(partitioning, "schema", None), pa.Schema):
        # A discovered hive partitioning may list fields that are not directories: keep those
        # the files' directories name (``key=value``).
        files = list(getattr(dataset, "files", None) or [])
        keys = {part.split("=", 1)[0] for part in files[0].split("/")[:-1] if "=" in part} if files else set()
        return [(f.name, f.type) for f in partitioning.schema if f.name in keys]
    # pyarrow's legacy ParquetPartitions (or a list of objects with ``name`` and
    # ``dictionary.type``, as Petastorm read them)
    legacy = getattr(dataset, "partitions", None)
    if not isinstance(legacy, (list, tuple)) and not hasattr(type(legacy), "__iter__"):
        return []
    return [(p.name, p.dictionary.type) for p in (legacy or [])]


def unischema_fields_from_arrow(dataset: Any, omit_unsupported_fields: bool = True,
                                partition_fields: list[tuple[str, pa.DataType]] | None = None) -> list[UnischemaField]:
    """``partition_fields``: the Hive partition keys ((name, Arrow type)), when ``dataset`` is
    a schema that does not say them (default: those of its partitioning)."""
    schema = _arrow_schema(dataset)
    fields = []
    partition_names = set()
    keys = partition_fields if partition_fields is not None else _partition_fields(dataset)
    for name, arrow_type in keys:
        value_type = arrow_type.value_type if pa.types.is_dictionary(arrow_type) else arrow_type
        if pa.types.is_string(value_type) or pa.types.is_large_string(value_type):
            numpy_dtype: Any = np.str_
        elif pa.types.is_integer(value_type):
            numpy_dtype = np.int64
        else:
            raise RuntimeError("Expected partition type to be one of currently supported types: string or "
                               f"int64. Got {arrow_type}")
        fields.append(UnischemaField(name, numpy_dtype, (), None, False))
        partition_names.add(name)
    for arrow_field in schema:
        if arrow_field.name in partition_names:
            continue
        arrow_type = arrow_field.type
        shape: tuple[int | None, ...] = ()
        if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type):
            inner = arrow_type.value_type
            if pa.types.is_nested(inner):
                warnings.warn(f"[ARROW-1644] Ignoring unsupported structure {arrow_type!r} for field "
                              f"{arrow_field.name!r}", stacklevel=3)
                continue
            shape = (None,)
        try:
            numpy_dtype = numpy_type_from_arrow(arrow_type)
        except ValueError:
            if not omit_unsupported_fields:
                raise
            warnings.warn(f"Column {arrow_field.name!r} has an unsupported field {arrow_type!r}. Ignoring...",
                          stacklevel=3)
            continue
        fields.append(UnischemaField(arrow_field.name, numpy_dtype, shape, None, arrow_field.nullable))
    return fields


def batch_reader_columns(file_fields: list[tuple[str, pa.DataType]],
                         partition_fields: list[tuple[str, pa.DataType]],
                         schema_fields: Any = None, also: Iterable[str] = ()) -> list[str]:
    """The columns ``make_batch_reader`` reads from a Parquet store: those of Petastorm's
    inferred Unischema. As in Petastorm, a column of a type it cannot infer (a struct, a map, a
    list of lists or of structs, a time...) is left out with its warning (``Column 'x' has an
    unsupported field StructType(...). Ignoring...``), not an error. With ``schema_fields``
    (names, regular expressions or fields), only the columns they match, and ``also`` (a
    predicate's fields), are read; where none match, all are (the reader then raises
    Petastorm's error)."""
    kept = {f.name for f in unischema_fields_from_arrow(pa.schema([pa.field(n, t) for n, t in file_fields]))}
    inferred = [n for n, _ in file_fields if n in kept] + [n for n, _ in partition_fields]
    if schema_fields is None:
        return inferred
    patterns = [getattr(f, "name", f) for f in schema_fields]
    extra = set(also)
    chosen = [c for c in inferred if c in extra or any(re.fullmatch(p, c) for p in patterns)]
    return chosen if set(chosen) - extra else inferred
