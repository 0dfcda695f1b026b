"""Spark schema -> MDS column encodings, and the Spark-side preparation of the columns.

Everything here runs on the driver and builds Spark expressions only (no data moves). The
result is a :class:`ColumnPlan` per column, shipped to the tasks, which convert each Arrow
column accordingly (:mod:`petastream.spark._task`).

Type mapping, after the ``dtype`` conversion (``'float32'``, Petastorm's default, casts double
to float and ``array<double>`` to ``array<float>``; ``'float64'`` the opposite; ``None`` keeps):

==========================================  ===========================  =========================
Spark type                                  MDS encoding                 value read back
==========================================  ===========================  =========================
boolean                                     ``uint8``                    0 / 1
byte / short / int / long                   ``int8/int16/int32/int64``
float / double                              ``float32`` / ``float64``
decimal(p, s)                               ``str_decimal``              ``decimal.Decimal``
string                                      ``str``
binary                                      ``bytes``
date                                        ``int64``                    ns since 1970-01-01
timestamp (with time zone)                  ``int64``                    ns since the epoch, UTC
timestamp_ntz                               ``int64``                    ns since 1970-01-01 (wall)
array<numeric or boolean>, one length n     ``ndarray:<dtype>:<n>``      fixed size (fast path)
array<numeric or boolean>, lengths vary     ``ndarray:<dtype>``          1-D arrays
ML / MLlib vector                           as ``array<float|double>``   ``vector_to_array`` first
                                                                         (double if dtype=None)
array<string>                               ``json``                     list of str
struct / map / other arrays                 error, or ``json`` with      dict / list
                                            ``nested='json'``
==========================================  ===========================  =========================

Dates and timestamps are int64 nanoseconds since the Unix epoch, as Petastorm's TensorFlow path
delivers them (``datetime64[ns]`` viewed as int64); the range is therefore 1677-09-21 ..
2262-04-11, and a value outside it fails the write with the column named.

Array lengths: a fixed-size encoding needs one length over the whole DataFrame (every shard of
a dataset shares one column layout). ``array_lengths='optimistic'`` (default) writes in one
pass: each task takes the length of its first batch's non-null arrays (fixed ``n`` when they
all have one length, variable otherwise) and the driver checks, before anything is published,
that every task chose the same; where they did not, or a task met another length later, the
column is written again as variable-length (the first attempt is discarded, never read). A
task whose first batch holds only null arrays under ``null_policy='fill'`` has no length to
fill them to: that column is then decided by ``'infer'`` and written again. ``'infer'`` runs
one aggregate job over the array columns (``min/max(size(col))`` and their null counts) before
the write; ``'dynamic'`` always writes variable-length arrays; a mapping ``{column: n}`` fixes
lengths by hand (``None`` = variable; the other array columns are decided in one pass). The
ndarray encoding cannot store empty arrays: a column holding one is an error, found by the
tasks (one pass) or by the aggregate (``'infer'``).

Nulls: MDS has no null. ``null_policy='error'`` (default) fails naming the columns and their
null counts; ``'fill'`` fills: 0 for integers, decimals, booleans (False), dates and timestamps
(the epoch); NaN for floats; ``""`` for strings; ``b""`` for binary; JSON ``null`` for json
columns; null elements inside arrays as their scalar type; a null array as ``n`` fill values
when the column has the fixed length ``n`` (a null array in a variable-length column stays an
error). Scalar columns are filled by Spark (``coalesce``), array columns by the tasks (they
know the length).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from petastream.checks import one_of, positive_int
from petastream.errors import InvalidArgumentError
from petastream.spark._errors import NullValuesError, UnsupportedColumnError

__all__ = ["ColumnPlan", "prepare", "infer_lengths", "infer_columns", "apply_fill", "check_dtype",
           "ARRAY_LENGTHS"]

_DTYPES = ("float32", "float64")
_NUMERIC = {
    "ByteType": "int8", "ShortType": "int16", "IntegerType": "int32", "LongType": "int64",
    "FloatType": "float32", "DoubleType": "float64",
}
_TEMPORAL = {"DateType": "date", "TimestampType": "timestamp", "TimestampNTZType": "timestamp"}


@dataclass(frozen=True)
class ColumnPlan:
    """How one column is written. ``kind`` tells the task how to turn its Arrow column into
    what the encoding takes: ``plain``, ``date``, ``timestamp``, ``decimal``, ``json``,
    ``list`` (variable length) or ``list_fixed`` (``length`` elements each)."""

    name: str
    encoding: str
    kind: str
    length: int | None = None
    elem_dtype: str | None = None
    spark_type: str = ""


def check_dtype(dtype: str | None) -> None:
    if dtype is not None and dtype not in _DTYPES:
        raise InvalidArgumentError(f"dtype {dtype!r} is not supported; use 'float32', 'float64' or None")


def _functions(df: Any) -> tuple[Any, Any]:
    """``pyspark.sql.functions`` and ``vector_to_array`` for the DataFrame's flavour, so a
    Connect DataFrame gets Connect columns even in a process that also runs classic Spark."""
    if type(df).__module__.startswith("pyspark.sql.connect"):
        from pyspark.ml.connect.functions import vector_to_array as connect_vector_to_array
        from pyspark.sql.connect import functions as connect_functions

        return connect_functions, connect_vector_to_array
    from pyspark.ml.functions import vector_to_array
    from pyspark.sql import functions

    return functions, vector_to_array


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _is_vector(dt: Any) -> bool:
    from pyspark.ml.linalg import VectorUDT
    from pyspark.mllib.linalg import VectorUDT as OldVectorUDT

    return isinstance(dt, (VectorUDT, OldVectorUDT))


def _nested_error(name: str, dt: Any) -> UnsupportedColumnError:
    return UnsupportedColumnError(
        f"column {name!r}: {dt.simpleString()} is not supported; cast it to a JSON string with "
        "to_json() or drop it (or pass nested='json' to store it as a JSON column)"
    )


def prepare(df: Any, *, dtype: str | None, nested: str) -> tuple[Any, list[ColumnPlan]]:
    """Convert vectors, floating-point precision and JSON columns; return the new DataFrame
    and a plan per column (array lengths still undecided: ``kind='list'``)."""
    from pyspark.sql import types as T

    check_dtype(dtype)
    one_of("nested", nested, ("error", "json"))
    F, vector_to_array = _functions(df)
    names = [f.name for f in df.schema.fields]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InvalidArgumentError(f"the DataFrame has duplicate column names {dupes}; an MDS dataset "
                         "needs unique names: rename or drop them (e.g. after a join)")
    exprs, plans = [], []
    for field in df.schema.fields:
        name, dt = field.name, field.dataType
        col = F.col(quote(name))
        if _is_vector(dt):
            col = vector_to_array(col, dtype or "float64")
            dt = T.ArrayType(T.FloatType() if dtype == "float32" else T.DoubleType(), False)
        col, dt = _convert_precision(col, dt, dtype)
        tname = type(dt).__name__
        spark_type = dt.simpleString()
        if tname == "BooleanType":
            plan = ColumnPlan(name, "uint8", "plain", spark_type=spark_type)
        elif tname in _NUMERIC:
            plan = ColumnPlan(name, _NUMERIC[tname], "plain", spark_type=spark_type)
        elif tname == "StringType" or tname in ("CharType", "VarcharType"):
            plan = ColumnPlan(name, "str", "plain", spark_type=spark_type)
        elif tname == "BinaryType":
            plan = ColumnPlan(name, "bytes", "plain", spark_type=spark_type)
        elif tname == "DecimalType":
            plan = ColumnPlan(name, "str_decimal", "decimal", spark_type=spark_type)
        elif tname in _TEMPORAL:
            plan = ColumnPlan(name, "int64", _TEMPORAL[tname], spark_type=spark_type)
        elif isinstance(dt, T.ArrayType) and (
            type(dt.elementType).__name__ in _NUMERIC or isinstance(dt.elementType, T.BooleanType)
        ):
            elem = _NUMERIC.get(type(dt.elementType).__name__, "uint8")
            plan = ColumnPlan(name, f"ndarray:{elem}", "list", elem_dtype=elem, spark_type=spark_type)
        elif isinstance(dt, T.ArrayType) and isinstance(dt.elementType, T.StringType):
            col = F.to_json(col)
            plan = ColumnPlan(name, "json", "json", spark_type=spark_type)
        elif isinstance(dt, (T.StructType, T.MapType, T.ArrayType)):
            if nested != "json":
                raise _nested_error(name, dt)
            col = F.to_json(col)
            plan = ColumnPlan(name, "json", "json", spark_type=spark_type)
        else:
            raise UnsupportedColumnError(
                f"column {name!r}: {dt.simpleString()} is not supported; cast it to a number, "
                "string, binary, decimal, date, timestamp or array of numbers, or drop it"
            )
        exprs.append(col.alias(name))
        plans.append(plan)
    return df.select(*exprs), plans


def _convert_precision(col: Any, dt: Any, dtype: str | None) -> tuple[Any, Any]:
    from pyspark.sql import types as T

    if dtype is None:
        return col, dt
    src, dst = (T.DoubleType, T.FloatType()) if dtype == "float32" else (T.FloatType, T.DoubleType())
    if isinstance(dt, src):
        return col.cast(dst), dst
    if isinstance(dt, T.ArrayType) and isinstance(dt.elementType, src):
        new = T.ArrayType(dst, dt.containsNull)
        return col.cast(new), new
    return col, dt


ARRAY_LENGTHS = ("optimistic", "infer", "dynamic")


def infer_lengths(
    df: Any,
    plans: list[ColumnPlan],
    array_lengths: str | Mapping[str, int | None],
    *,
    count_nulls: bool,
) -> tuple[list[ColumnPlan], dict[str, int] | None]:
    """Decide fixed or variable encodings for array columns. ``'optimistic'`` (and the
    columns a mapping leaves out) leaves them to the tasks (``kind='list_auto'``); ``'infer'``
    runs one aggregate job over the array columns only (Spark prunes the others). Returns the
    plans and, when the aggregate ran and ``count_nulls``, the null counts of the array
    columns (else None)."""
    given: Mapping[str, int | None] = {}
    if isinstance(array_lengths, Mapping):
        given, mode = array_lengths, "optimistic"
    elif array_lengths in ARRAY_LENGTHS:
        mode = array_lengths
    else:
        raise InvalidArgumentError(
            f"array_lengths={array_lengths!r}: use 'optimistic', 'infer', 'dynamic' or a mapping"
        )
    names = {p.name for p in plans}
    unknown = set(given) - names
    if unknown:
        raise InvalidArgumentError(f"array_lengths names columns the DataFrame lacks: {sorted(unknown)}")
    lists = [p for p in plans if p.kind == "list"]
    todo = [p for p in lists if p.name not in given] if mode == "infer" else []
    stats, nulls = _length_stats(df, todo, count_nulls) if todo else ({}, None)
    out = []
    for p in plans:
        if p.kind != "list":
            out.append(p)
        elif p.name in given:
            out.append(with_length(p, given[p.name]))
        elif mode == "optimistic":
            out.append(ColumnPlan(p.name, p.encoding, "list_auto", None, p.elem_dtype, p.spark_type))
        elif p.name in stats:
            out.append(_decided(p, *stats[p.name]))
        else:
            out.append(with_length(p, None))
    return out, nulls


def infer_columns(df: Any, plans: list[ColumnPlan], names: list[str]) -> list[ColumnPlan]:
    """The plans with the array columns ``names`` decided by one aggregate job (as
    ``'infer'``), the others unchanged: the one-pass mode's fallback."""
    todo = [p for p in plans if p.name in names]
    stats, _ = _length_stats(df, todo, count_nulls=False)
    return [_decided(p, *stats[p.name]) if p.name in stats else p for p in plans]


def _length_stats(df: Any, todo: list[ColumnPlan], count_nulls: bool
                  ) -> tuple[dict[str, tuple[Any, Any]], dict[str, int] | None]:
    """``{column: (min size, max size)}`` over the non-null arrays, and the null counts."""
    F, _ = _functions(df)
    aggs: list[Any] = []
    for p in todo:
        c = F.col(quote(p.name))
        size = F.when(c.isNotNull(), F.size(c))
        aggs += [F.min(size).alias(f"min_{len(aggs)}"), F.max(size).alias(f"max_{len(aggs)}")]
    if count_nulls:  # only the columns read anyway; scalar nulls are caught by the tasks
        aggs += _null_count_exprs(F, todo)
    values = list(df.agg(*aggs).collect()[0])
    stats = {p.name: (values[2 * i], values[2 * i + 1]) for i, p in enumerate(todo)}
    nulls = dict(zip([p.name for p in todo], values[2 * len(todo):])) if count_nulls else None
    return stats, nulls


def _decided(p: ColumnPlan, lo: int | None, hi: int | None) -> ColumnPlan:
    if lo == 0:
        raise empty_error(p.name)
    return with_length(p, lo if lo is not None and lo == hi else None)


def empty_error(name: str) -> UnsupportedColumnError:
    return UnsupportedColumnError(
        f"column {name!r}: some arrays are empty, and the MDS ndarray encoding cannot store "
        f"empty arrays; filter them out (size({name}) > 0) or pad them"
    )


def with_length(p: ColumnPlan, length: int | None) -> ColumnPlan:
    """The plan of array column ``p`` with a fixed ``length``, or variable (None)."""
    if length is None:
        return ColumnPlan(p.name, f"ndarray:{p.elem_dtype}", "list", None, p.elem_dtype, p.spark_type)
    length = positive_int(f"array_lengths[{p.name!r}]", length, "every array's length",
                          fix="give a length >= 1, or None for arrays of any length")
    return ColumnPlan(p.name, f"ndarray:{p.elem_dtype}:{length}", "list_fixed",
                      length, p.elem_dtype, p.spark_type)


def _null_count_exprs(F: Any, plans: list[ColumnPlan]) -> list[Any]:
    exprs = []
    for i, p in enumerate(plans):
        c = F.col(quote(p.name))
        cond = c.isNull()
        if p.kind in ("list", "list_fixed", "list_auto"):
            cond = cond | F.exists(c, lambda x: x.isNull())
        exprs.append(F.sum(F.when(cond, 1).otherwise(0)).alias(f"nulls_{i}"))
    return exprs


def count_nulls(df: Any, plans: list[ColumnPlan]) -> dict[str, int]:
    """Null values (or arrays holding a null) per column: one aggregate job."""
    F, _ = _functions(df)
    row = df.agg(*_null_count_exprs(F, plans)).collect()[0]
    return {p.name: int(v or 0) for p, v in zip(plans, row)}


def null_error(nulls: Mapping[str, int]) -> NullValuesError:
    bad = {k: int(v) for k, v in nulls.items() if v}
    listing = ", ".join(f"{k!r}: {v} row(s)" for k, v in bad.items())
    first = next(iter(bad), "col")
    return NullValuesError(
        f"column(s) with null values ({listing}); MDS cannot store nulls. Filter them out "
        f"(df.na.drop(subset=[{first!r}])), fill them (df.na.fill(...)), or pass "
        "null_policy='fill' (0, NaN, '', b'', epoch, JSON null)"
    )


def apply_fill(df: Any, plans: list[ColumnPlan]) -> Any:
    """``null_policy='fill'``: replace nulls in the scalar columns by the documented fill
    values (dates and timestamps are filled in the task, after their conversion to int64, and
    array columns too, once the task knows their length)."""
    F, _ = _functions(df)
    schema = {f.name: f.dataType for f in df.schema.fields}
    exprs = []
    for p in plans:
        c = F.col(quote(p.name))
        dt = schema[p.name]
        if p.kind == "json":
            c = F.coalesce(c, F.lit("null"))
        elif p.kind in ("plain", "decimal"):
            c = F.coalesce(c, _fill_literal(F, dt))
        exprs.append(c.alias(p.name))
    return df.select(*exprs)


def _fill_literal(F: Any, dt: Any) -> Any:
    tname = type(dt).__name__
    if tname in ("FloatType", "DoubleType"):
        return F.lit(float("nan")).cast(dt)
    if tname == "BooleanType":
        return F.lit(False)
    if tname == "StringType" or tname in ("CharType", "VarcharType"):
        return F.lit("")
    if tname == "BinaryType":
        return F.lit(bytearray())
    return F.lit(0).cast(dt)
