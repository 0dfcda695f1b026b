"""Arrow (Parquet) column types -> the MDS encoding names every adapter plans from.

The mapping follows the Spark materialization path (:mod:`petastream.spark.schema`), so a
Parquet read of a table gives the columns an MDS read of the same table written by petastream
gives (:mod:`petastream.parquet.convert` turns the values):

=================================================  ===========================  =========================
Arrow type (as pyarrow reads the Parquet file)      MDS encoding                 value read back
=================================================  ===========================  =========================
bool                                                ``uint8``, logical ``bool``  0 / 1 (viewed as bool)
int8..int64, uint8..uint64, float16/32/64           same name
decimal128 / decimal256                             ``str_decimal``              ``decimal.Decimal``
string, large_string (string_view)                  ``str``                      ``str``
binary, large_binary, fixed_size_binary             ``bytes``                    ``bytes``
date32 / date64                                     ``int64``                    ns since 1970-01-01
timestamp (any unit, with or without time zone)     ``int64``                    ns since the epoch (UTC,
                                                                                 or wall time without zone)
fixed_size_list<number|bool> (nested: n-d)          ``ndarray:<dtype>:<shape>``  ``(rows, *shape)`` array
list / large_list<number|bool>                      ``ndarray:<dtype>``          ``Ragged`` (1-D each)
  ... with ``array_lengths={col: n}``               ``ndarray:<dtype>:<n>``      ``(rows, n)``, checked
list / large_list<string>                           ``json``                     list of str
dictionary<...>                                     as its value type
struct, map, other lists, time, duration, null      error naming the column (leave it out: ``columns=``)
=================================================  ===========================  =========================

Hive partition columns are typed as pyarrow infers them (``int32`` or ``string``) and read as
above. Parquet files written by Spark store arrays as ``list`` (Parquet has no fixed-size
list), so an ``array<float>`` column is ``Ragged`` unless ``array_lengths`` declares its length;
files written by pyarrow from a ``fixed_size_list`` column keep that type (the Arrow schema is
stored in the file) and read as a fixed-size array.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from petastream.checks import positive_int
from petastream.errors import InvalidArgumentError, InvalidArgumentTypeError, UnsupportedColumnError

__all__ = ["ColumnSpec", "column_specs", "nullable_spec", "UnsupportedColumnError"]


@dataclass(frozen=True)
class ColumnSpec:
    """How one column is read. ``kind`` names the conversion (:mod:`petastream.parquet.convert`):
    ``plain`` (numbers), ``bool``, ``date``, ``timestamp``, ``decimal``, ``str``, ``bytes``,
    ``fixed`` (arrays of ``shape``), ``list`` (variable-length arrays), ``json`` (lists of str),
    ``object`` (Python objects: booleans holding nulls under ``null_policy="petastorm"``)."""

    name: str
    encoding: str
    kind: str
    #: numpy dtype of the values (``plain``, ``bool``, ``fixed``, ``list``; int64 for dates).
    dtype: str = ""
    #: Shape of one value of a ``fixed`` column.
    shape: tuple[int, ...] = ()
    #: The dtype readers view the column as (``"bool"`` for booleans stored as uint8), or None.
    logical: str | None = None
    #: A Hive partition column (a constant per file, not read from the file).
    partition: bool = False
    #: The Arrow type, for messages.
    arrow_type: str = ""


def _numpy_name(t: Any) -> str | None:
    import pyarrow as pa

    if pa.types.is_boolean(t):
        return "uint8"
    if pa.types.is_floating(t):
        return f"float{t.bit_width}"
    if pa.types.is_integer(t):
        return f"{'' if pa.types.is_signed_integer(t) else 'u'}int{t.bit_width}"
    return None


def _is_text(t: Any) -> str | None:
    import pyarrow as pa

    if pa.types.is_string(t) or pa.types.is_large_string(t) or str(t) == "string_view":
        return "str"
    if (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)
            or str(t) == "binary_view"):
        return "bytes"
    return None


class _Common(TypedDict):
    partition: bool
    arrow_type: str


def spec_for(name: str, t: Any, length: int | None = None, partition: bool = False) -> ColumnSpec:
    """The :class:`ColumnSpec` of a column of Arrow type ``t``; ``length``: a list column's
    declared fixed length (``array_lengths``)."""
    import pyarrow as pa

    ty = t.value_type if pa.types.is_dictionary(t) else t
    common = _Common(partition=partition, arrow_type=str(t))
    number = _numpy_name(ty)
    if number is not None:
        if pa.types.is_boolean(ty):
            return ColumnSpec(name, "uint8", "bool", "uint8", logical="bool", **common)
        return ColumnSpec(name, number, "plain", number, **common)
    text = _is_text(ty)
    if text is not None:
        return ColumnSpec(name, text, text, **common)
    if pa.types.is_decimal(ty):
        return ColumnSpec(name, "str_decimal", "decimal", **common)
    if pa.types.is_date(ty):
        return ColumnSpec(name, "int64", "date", "int64", **common)
    if pa.types.is_timestamp(ty):
        return ColumnSpec(name, "int64", "timestamp", "int64", **common)
    if pa.types.is_fixed_size_list(ty):
        shape, inner = [], ty
        while pa.types.is_fixed_size_list(inner):
            shape.append(inner.list_size)
            inner = inner.value_type
        elem = _numpy_name(inner)
        if elem is not None and min(shape) >= 1:
            logical = "bool" if pa.types.is_boolean(inner) else None
            return ColumnSpec(name, f"ndarray:{elem}:{','.join(map(str, shape))}", "fixed", elem,
                              tuple(shape), logical, **common)
    if pa.types.is_list(ty) or pa.types.is_large_list(ty):
        inner = ty.value_type
        elem = _numpy_name(inner)
        logical = "bool" if pa.types.is_boolean(inner) else None
        if elem is not None:
            if length is not None:
                return ColumnSpec(name, f"ndarray:{elem}:{length}", "fixed", elem, (length,), logical, **common)
            return ColumnSpec(name, f"ndarray:{elem}", "list", elem, logical=logical, **common)
        if _is_text(inner) == "str":
            return ColumnSpec(name, "json", "json", **common)
    raise UnsupportedColumnError(
        f"column {name!r}: Arrow type {t} is not supported; leave it out with columns=[...] (or "
        "rewrite it as numbers, strings, binary, decimal, date, timestamp or arrays of numbers)")


def nullable_spec(spec: ColumnSpec) -> ColumnSpec:
    """How ``null_policy="petastorm"`` reads a column that holds nulls, as Petastorm's batch
    reader (pandas) gives it: integers as float64 with NaN, booleans as Python objects
    (``True``/``False``/``None``); every other kind keeps its spec (its nulls are NaN, None,
    ``'None'`` or NaT within its own type: see :mod:`petastream.parquet.convert`)."""
    if spec.kind == "plain" and spec.dtype[:5] != "float":
        return ColumnSpec(spec.name, "float64", "plain", "float64", partition=spec.partition,
                          arrow_type=spec.arrow_type)
    if spec.kind == "bool":
        return ColumnSpec(spec.name, "pkl", "object", partition=spec.partition, arrow_type=spec.arrow_type)
    return spec


def column_specs(fields: Sequence[tuple[str, Any]], partition_fields: Sequence[tuple[str, Any]],
                 columns: Sequence[str] | None = None,
                 array_lengths: Mapping[str, int | None] | None = None,
                 where: str = "the Parquet files") -> list[ColumnSpec]:
    """Specs of the columns read: ``columns`` (file or partition columns, in that order), or
    all of them (the files' columns, then the partition columns). ``fields``: the columns of
    ``where`` (the first file: every other file is checked against it)."""
    import pyarrow as pa

    types = dict(fields)
    parts = dict(partition_fields)
    clash = sorted(set(types) & set(parts))
    if clash:
        raise UnsupportedColumnError(
            f"columns {clash} are both in the Parquet files and Hive partition directories "
            "(key=value); rename the directories or the columns")
    every = [n for n, _ in fields] + [n for n, _ in partition_fields]
    if columns is None:
        wanted = every
    else:
        if isinstance(columns, str) or not isinstance(columns, Sequence):
            raise InvalidArgumentTypeError(f"columns must be a list of column names, got {columns!r}")
        wanted = list(columns)
        unknown = [c for c in wanted if c not in types and c not in parts]
        if unknown:
            raise InvalidArgumentError(f"columns {unknown} are not in {where}; its columns are {every}")
        if len(set(wanted)) != len(wanted):
            raise InvalidArgumentError(f"columns lists a column twice: {wanted}")
    lengths = dict(array_lengths or {})
    for name, n in lengths.items():
        t = types.get(name)
        if t is None or not (pa.types.is_list(t) or pa.types.is_large_list(t)):
            raise InvalidArgumentError(
                f"array_lengths[{name!r}]: not a list column of the files (their list columns: "
                f"{[k for k, v in types.items() if pa.types.is_list(v) or pa.types.is_large_list(v)]})")
        if n is not None:
            positive_int(f"array_lengths[{name!r}]", n, "every array's length",
                         fix="give a length >= 1, or None for arrays of any length")
    return [spec_for(c, types[c], lengths.get(c)) if c in types else spec_for(c, parts[c], partition=True)
            for c in wanted]
