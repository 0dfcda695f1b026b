"""The converter's choice (issue #35): read a DataFrame's own files, or materialize it.

``make_spark_converter(df)`` reads ``df``'s Parquet files (or its Delta table) in place, and
writes nothing, where :func:`petastream.spark.scan_plan.recognise` sees a plain scan of them
(columns selected, filters over columns) and where the rows, types, nulls and ``dtype``
conversions served are then those the materialized path would serve. Everything else, and
any doubt, materializes as before; the reason is kept (``converter.reason``) and logged.

What this module checks on top of the recogniser, at the converter's creation:

* **types**: every column read is one both paths serve alike: booleans, signed integers,
  float32/64, strings, binary, decimals, dates, timestamps, arrays of numbers or booleans,
  arrays of strings. Refused: structs (a Spark ML vector is a struct in a file, and the
  materialized path turns it into an array first), maps, arrays of anything else, unsigned
  integers and float16 (Spark widens them), and any column whose Spark type is not the one
  its Arrow type maps to (a Spark read option such as ``binaryAsString`` changed it).
* **nulls**: the materialized path refuses nulls (``NullValuesError``) and arrays it cannot
  store (empty ones), so a column whose file footers count any null value (a null array, a
  null element and an empty array all count) or do not count them materializes: then the
  materialized path decides, as before.
* **dtype**: ``'float32'`` casts double columns and arrays of doubles to float32 in each
  batch (``'float64'`` floats to float64), before a ``TransformSpec``, as Spark casts them
  before writing.
* **column order**: sorted by name, as an MDS dataset's columns are.
* **row order**: files ordered as Spark plans their splits (``FilePartition``: by size,
  largest first; equal sizes by path, the listing order of object stores and HDFS), so that
  with shuffling off the rows come in ``df.collect()`` order where each file is one split
  (files under ``spark.sql.files.maxPartitionBytes``; Spark splits larger ones).
* **rows**: ``len(converter)`` is the number of rows after the filter: the footers' row
  counts without one; with one, the filter's columns of the row groups its statistics keep
  are read on the driver when the source is opened (the open the first loader needs anyway,
  whose plan is kept for it in this process), which is cheaper than a Spark job
  (``df.count()``: a job's scheduling, and on a cluster the same columns read by executors).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from petastream.errors import InvalidArgumentError, PetastreamError

__all__ = ["DirectRead", "MATERIALIZE_CONF", "choose", "choose_table", "must_materialize"]

logger = logging.getLogger("petastream.compat.spark_dataset_converter")

MATERIALIZE_CONF = "petastream.spark.converter.materialize"
_MODES = ("auto", "always")
#: numpy dtypes both paths serve alike (signed integers, floats; booleans: uint8 viewed as bool).
_NUMBERS = {"int8", "int16", "int32", "int64", "float32", "float64"}
_KINDS = {"plain", "bool", "date", "timestamp", "decimal", "str", "bytes", "list", "fixed", "json"}
#: Spark's type name (``simpleString`` head) for each column kind and numpy dtype read.
_SPARK = {("bool", "uint8"): "boolean", ("plain", "int8"): "tinyint", ("plain", "int16"): "smallint",
          ("plain", "int32"): "int", ("plain", "int64"): "bigint", ("plain", "float32"): "float",
          ("plain", "float64"): "double", ("str", ""): "string", ("bytes", ""): "binary",
          ("date", "int64"): "date", ("json", ""): "array<string>"}


class _Refusal(PetastreamError):
    """Not read directly (the message says why): caught by :func:`choose`, never raised."""


@dataclass
class DirectRead:
    """What a converter reads in place: Parquet files (in Spark's split order) or one Delta
    table at a pinned version, these columns, the rows ``filter`` keeps, ``casts`` applied in
    each batch. Pickles without :attr:`plan` (a Spark task or a worker plans again)."""

    format: str
    urls: tuple[str, ...]
    columns: tuple[str, ...]
    filter: Any
    casts: dict[str, str]
    rows: int
    version: int | None = None
    #: The source's plan made at the converter's creation (this process only).
    plan: Any = field(default=None, repr=False, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "plan": None}

    def open(self, *, storage_options: dict | None = None, cache_limit: Any = None) -> Any:
        """The source of these rows (``storage_options``/``cache_limit``: the loader's)."""
        from petastream.parquet import ParquetSource

        options: dict[str, Any] = {"storage_options": storage_options, "cache_limit": cache_limit,
                                   "null_policy": "error"}
        if self.plan is not None:
            return ParquetSource(self.plan.root_urls, plan=self.plan, **options)
        if self.format == "delta":
            from petastream.delta import DeltaSource

            return DeltaSource(self.urls[0], version=self.version, columns=list(self.columns),
                               filters=self.filter, **options)
        return ParquetSource(list(self.urls), columns=list(self.columns), filters=self.filter, **options)

    def describe(self) -> str:
        what = (f"the Delta table {self.urls[0]} at version {self.version}" if self.format == "delta"
                else f"the DataFrame's {len(self.urls)} Parquet files")
        return f"reading {what} directly ({self.rows} rows{', filtered' if self.filter is not None else ''})"


def must_materialize(spark: Any, materialize: bool | None) -> bool:
    """The argument (True: materialize; None: the Spark conf ``petastream.spark.converter.
    materialize``, ``auto`` or ``always``)."""
    if materialize is not None:
        if materialize not in (True, False):
            raise InvalidArgumentError(f"materialize={materialize!r}: use True (always materialize), False or None "
                                       f"(the Spark conf {MATERIALIZE_CONF})")
        return bool(materialize)
    value = str(spark.conf.get(MATERIALIZE_CONF, "auto") or "auto").strip().lower()
    if value not in _MODES:
        raise InvalidArgumentError(f"the Spark conf {MATERIALIZE_CONF}={value!r} is not one of {list(_MODES)}: "
                                   "'auto' reads a plain table scan directly, 'always' materializes every DataFrame")
    return value == "always"


def choose(df: Any, dtype: str | None) -> tuple[DirectRead | None, str]:
    """How to serve ``df``: a :class:`DirectRead`, or None (materialize), and why."""
    from petastream.spark.scan_plan import recognise

    verdict = recognise(df)
    if verdict.scan is None:
        return None, f"it is not a plain scan of Parquet files or a Delta table: {verdict.reason}"
    scan = verdict.scan
    spark_types = None if scan.format == "delta" and not hasattr(df, "_jdf") else _spark_types(df)
    return _planned(scan.format, scan.files, scan.columns, scan.filter, scan.version, dtype, spark_types,
                    f"it is {verdict.reason}")


def choose_table(url: str, dtype: str | None) -> tuple[DirectRead | None, str]:
    """How to serve the Delta table at ``url`` (``make_spark_converter(path)``): its latest
    version, every column."""
    from petastream.delta.log import open_snapshot
    from petastream.storage.location import resolve

    try:
        snap = open_snapshot(resolve(url))
    except Exception as e:  # noqa: BLE001 - a table its log reader cannot open: Spark may
        return None, f"its Delta log could not be read ({type(e).__name__}: {e})"
    return _planned("delta", (snap.table,), tuple(snap.columns), None, snap.version, dtype, None,
                    "it is a Delta table's directory")


def _spark_types(df: Any) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in df.schema.fields}


def _planned(fmt: str, urls: tuple[str, ...], columns: tuple[str, ...], condition: Any, version: int | None,
             dtype: str | None, spark_types: dict[str, str] | None, why: str) -> tuple[DirectRead | None, str]:
    read = DirectRead(fmt, urls, tuple(sorted(columns)), condition, {}, 0, version)
    try:
        read.urls = urls if fmt == "delta" else _split_order(urls)
        source = read.open()
    except Exception as e:  # noqa: BLE001 - nulls, a type the reader refuses, a file gone: materialize
        return None, f"its files cannot be served as the materialized path would ({type(e).__name__}: {e})"
    try:
        read.casts = _checked(source.plan.specs, dtype, spark_types)
        _no_nulls(source.plan)
        read.rows, read.plan = len(source), source.plan
    except _Refusal as e:
        return None, str(e)
    except Exception as e:  # noqa: BLE001 - footers that cannot be read: any doubt materializes
        return None, f"its files' footers could not be checked ({type(e).__name__}: {e})"
    finally:
        source.close()
    return read, why


def _split_order(files: tuple[str, ...]) -> tuple[str, ...]:
    """Spark's order of a scan's splits (one per file): size descending, then path."""
    from petastream.parquet.discover import listing
    from petastream.storage.location import resolve

    sizes, listings = [], {}
    for url in files:
        parent = url.rstrip("/").rsplit("/", 1)[0]
        if parent not in listings:  # one listing per directory on an object store (a stat locally)
            listings[parent] = listing(resolve(parent))
        sizes.append(listings[parent](resolve(url).path)[0])
    return tuple(f for _, f in sorted(zip(sizes, files), key=lambda p: (-p[0], p[1])))


def _checked(specs: Any, dtype: str | None, spark_types: dict[str, str] | None) -> dict[str, str]:
    """The ``dtype`` casts of the columns read, once each is one both paths serve alike."""
    casts = {}
    for spec in specs:
        kind, elem = spec.kind, spec.dtype
        boolean = elem == "uint8" and spec.logical == "bool"
        if kind not in _KINDS or (kind in ("plain", "list", "fixed") and elem not in _NUMBERS and not boolean):
            raise _Refusal(f"column {spec.name!r} is {spec.arrow_type}, which the materialized path serves "
                           "otherwise (unsigned or half floats are widened by Spark)")
        if kind == "fixed" and len(spec.shape) != 1:
            raise _Refusal(f"column {spec.name!r} is {spec.arrow_type} (nested arrays)")
        want = spark_types.get(spec.name) if spark_types is not None else None
        if want is not None and not _agrees(kind, elem, want):
            raise _Refusal(f"column {spec.name!r} is {spec.arrow_type} in the files but {want} in Spark")
        if dtype is not None and elem in ("float32", "float64") and elem != dtype:
            casts[spec.name] = dtype
    return casts


def _agrees(kind: str, elem: str, spark: str) -> bool:
    if kind in ("list", "fixed"):
        inner = "boolean" if elem == "uint8" else _SPARK[("plain", elem)]
        return spark == f"array<{inner}>"
    if kind == "decimal":
        return spark.startswith("decimal")
    if kind == "timestamp":
        return spark in ("timestamp", "timestamp_ntz")
    if kind == "str":
        return spark == "string" or spark.startswith(("char", "varchar"))
    return _SPARK.get((kind, elem if kind in ("plain", "bool", "date") else "")) == spark


def _no_nulls(plan: Any) -> None:
    """Refuse where a footer counts a null value in a column read (or does not count them)."""
    import pyarrow.parquet as pq

    from petastream.storage.location import resolve

    wanted = set(plan.file_columns)
    served = {s.name for s in plan.specs if s.partition}
    parts = [i for i, (name, _) in enumerate(plan.partition_fields) if name in served]
    for info in plan.files:
        if any(info.ref.partition[i] is None for i in parts if i < len(info.ref.partition)):
            raise _Refusal(f"a partition value of {info.ref.url} is null, and the materialized path decides "
                           "what nulls become")
        loc = resolve(info.ref.url)
        if loc.is_local:
            meta = pq.read_metadata(loc.path)
        else:
            with loc.fs.open(loc.path, "rb") as handle:
                meta = pq.ParquetFile(handle).metadata
        for j in range(meta.num_columns if meta.num_row_groups else 0):
            top = meta.schema.column(j).path.split(".", 1)[0]
            if top not in wanted:
                continue
            for rg in range(meta.num_row_groups):
                stats = meta.row_group(rg).column(j).statistics
                if stats is None or not stats.has_null_count or stats.null_count:
                    name = plan.column_names.get(top, top)
                    what = "does not count nulls" if stats is None or not stats.has_null_count else (
                        f"counts {stats.null_count} null value(s) (or empty or null arrays)")
                    raise _Refusal(f"column {name!r}: the footer of {info.ref.url} {what}, and the "
                                   "materialized path decides what nulls become")
