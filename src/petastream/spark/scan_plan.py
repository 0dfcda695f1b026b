"""Is a DataFrame a plain scan of Parquet files? (issue #35: the converter's direct path)

``make_spark_converter(df)`` may read ``df``'s own Parquet files instead of materializing
them, but only where that gives exactly the rows and columns Spark would: :func:`recognise`
answers with a :class:`FileScan` (the files, the columns in order, the filter as a
``pyarrow.compute`` Expression) or None, always with the reason. Any doubt is a None: the
caller materializes as before.

Recognised: a chain of column selections (plain columns, no aliases or expressions) and
filters over one Parquet relation read by path, with no options, no user schema, no
partition directories and no buckets; filter conditions built of ``and``/``or``/``not``,
comparisons of a column with a literal, ``isin`` of literals, ``isNull``/``isNotNull``, over
integer, string and boolean columns. Not recognised (each a reason): anything else (joins,
aggregations, UDFs, limits, samples, sorts, unions, casts, computed columns), comparisons on
float columns (Spark orders NaN above every number and equal to itself; Arrow does not),
dates and timestamps (time zones), partitioned directories (Spark infers the partition
values' types its own way).

Delta relations are recognised too, as ``FileScan(format="delta", files=(table URL,),
version=...)``, the version pinned when :func:`recognise` runs:

* Spark Connect: a ``Read`` of format ``delta`` with one path and no options but
  ``versionAsOf``/``timestampAsOf``, recognised from the client's plan alone (the server is
  not asked: it may have no Delta jars); the columns' types and the version come from the
  table's log (``deltalake``). A filter is refused on a table with column mapping.
* classic PySpark: a ``HadoopFsRelation`` whose location is Delta Lake's ``TahoeLogFileIndex``
  (its ``path()``; the version: ``snapshotAtAnalysis().version()`` for a time-travel query,
  else ``version()``, the log's latest snapshot when asked) with no ``partitionFilters()``, or
  its ``PreparedDeltaFileIndex`` (``path()``, ``version()``: the scanned snapshot's). Names
  from Delta Lake's ``files/TahoeFileIndex.scala`` and ``stats/PrepareDeltaScan.scala``.
  **Untested**: this machine's Spark has no Delta jars, so no classic Delta relation was ever
  built here; any other file index (batch, CDC), any failing call, and any extra option is a
  refusal.

How the plan is seen:

* classic PySpark: the JVM's optimized logical plan (``queryExecution().optimizedPlan()``, its
  JSON for the nodes and expressions, and py4j for the relation: a ``HadoopFsRelation`` of
  ``ParquetFileFormat``);
* Spark Connect: the client's unresolved plan (``df._plan``'s protobuf): a ``Read`` of a
  ``parquet`` data source under ``Project``/``Filter`` relations. A filter given as a SQL
  string (``df.where("id > 3")``) is not parsed: not recognised.

The files are Spark's own listing of the relation (``df.inputFiles()``), so the files read are
the files Spark would read.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from petastream.errors import PetastreamError

__all__ = ["FileScan", "ScanVerdict", "recognise"]

_CATALYST = "org.apache.spark.sql.catalyst.expressions."
_LOGICAL = "org.apache.spark.sql.catalyst.plans.logical."
#: Spark types a filter may compare (as Arrow compares them: integers, UTF-8 bytes, booleans).
_COMPARABLE = {"long", "integer", "short", "byte", "string", "boolean"}
_CLASSIC_OPS = {"EqualTo": "==", "GreaterThan": ">", "GreaterThanOrEqual": ">=", "LessThan": "<",
                "LessThanOrEqual": "<="}
_FLIPPED = {"==": "==", ">": "<", ">=": "<=", "<": ">", "<=": ">="}


@dataclass(frozen=True)
class FileScan:
    """What a recognised DataFrame reads: these Parquet files, these columns (in order), the
    rows ``filter`` keeps (None: all)."""

    format: str
    files: tuple[str, ...]  # a Delta table: its root URL alone
    columns: tuple[str, ...]
    filter: Any = None  # pyarrow.compute.Expression
    version: int | None = None  # a Delta table: the snapshot read


@dataclass(frozen=True)
class ScanVerdict:
    """:func:`recognise`'s answer: the scan (None: materialize) and why."""

    scan: FileScan | None
    reason: str


class _Doubt(PetastreamError):
    """Not a plain file scan (the message says why): caught by :func:`recognise`, never raised
    to a caller."""


def recognise(df: Any) -> ScanVerdict:
    """Whether ``df`` (a classic or Spark Connect DataFrame) is a plain scan of Parquet files
    (see the module doc); never raises for a plan it does not know: that is a None scan."""
    try:
        if hasattr(df, "_jdf"):
            files_format, columns, condition, table = _classic(df)
        else:
            files_format, columns, condition, table = _connect(df)
        # Spark lists Hadoop URIs, percent-encoded (a space is %20): the files' own names are read
        files = (table.url,) if table is not None else tuple(unquote(str(f)) for f in df.inputFiles())
    except _Doubt as e:
        return ScanVerdict(None, str(e))
    except Exception as e:  # noqa: BLE001 - a plan we cannot inspect is a plan we do not read directly
        return ScanVerdict(None, f"its plan could not be inspected ({type(e).__name__}: {e})")
    if not files:
        return ScanVerdict(None, "Spark lists no files for it")
    what = (f"a scan of {len(files)} {files_format} file(s)" if table is None else
            f"a scan of the Delta table {table.url} at version {table.version}") + f", columns {list(columns)}"
    return ScanVerdict(FileScan(files_format, files, columns, condition, None if table is None else table.version),
                       what + (" with a filter" if condition is not None else ""))


@dataclass(frozen=True)
class _Table:
    """A Delta table a plan reads: its root and the version pinned."""

    url: str
    version: int


def _delta_table(path: str, version: int | None, timestamp: Any) -> tuple[_Table, dict[str, str], bool]:
    """The table at ``path`` pinned (latest, or the version/timestamp asked for), its columns'
    Spark type names (for filters) and whether it maps column names."""
    from petastream.delta.log import open_snapshot
    from petastream.storage.location import resolve

    loc = resolve(path)
    snap = open_snapshot(loc, version=version, timestamp=timestamp)
    types = {n: _spark_name(t) for n, t in list(snap.fields) + list(snap.partition_fields)}
    return _Table(loc.url, snap.version), types, bool(snap.column_names)


def _spark_name(arrow_type: Any) -> str:
    """The Spark type name of a Delta column's Arrow type, for the filter's type checks (types
    a filter may not compare keep their Arrow name)."""
    names = {"int64": "long", "int32": "integer", "int16": "short", "int8": "byte", "string": "string",
             "large_string": "string", "string_view": "string", "bool": "boolean"}
    return names.get(str(arrow_type), str(arrow_type))


# -- filters, from either form -----------------------------------------------------------------
def _compare(name: str, op: str, value: Any, types: dict[str, str]) -> Any:
    import pyarrow.compute as pc

    _check_type(name, types)
    if value is None:
        raise _Doubt(f"a comparison of {name!r} with null")
    field = pc.field(name)
    return {"==": field == value, ">": field > value, ">=": field >= value, "<": field < value,
            "<=": field <= value}[op]


def _check_type(name: str, types: dict[str, str]) -> None:
    kind = types.get(name)
    if kind is None:
        raise _Doubt(f"its filter names {name!r}, not a column of the files")
    if kind not in _COMPARABLE:
        why = (" (Spark orders NaN above every number and equal to itself; Arrow does not)"
               if kind in ("double", "float") else "")
        raise _Doubt(f"its filter compares column {name!r} of type {kind}{why}")


def _boolean_column(name: str, types: dict[str, str]) -> Any:
    import pyarrow.compute as pc

    if types.get(name) != "boolean":
        raise _Doubt(f"its filter uses column {name!r} ({types.get(name)}) as a condition")
    return pc.field(name)


def _is_in(name: str, values: list[Any], types: dict[str, str]) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    _check_type(name, types)
    if any(v is None for v in values) or not values:
        raise _Doubt(f"an isin over {name!r} with null or no values")
    return pc.field(name).isin(pa.array(values))


# -- classic: the JVM's optimized plan ---------------------------------------------------------
def _tree(nodes: list[dict], pos: int = 0) -> tuple[dict, int]:
    """A pre-order list of Catalyst tree nodes (``toJSON``) as nested ``{"node", "kids"}``."""
    node = nodes[pos]
    kids, nxt = [], pos + 1
    for _ in range(int(node.get("num-children", 0))):
        kid, nxt = _tree(nodes, nxt)
        kids.append(kid)
    return {"node": node, "kids": kids}, nxt


def _short(node: dict) -> str:
    return str(node.get("class", "")).rsplit(".", 1)[-1]


def _literal(node: dict) -> Any:
    value, kind = node.get("value"), node.get("dataType")
    if value is None:
        return None
    if kind in ("long", "integer", "short", "byte"):
        return int(value)
    if kind == "string":
        return str(value)
    if kind == "boolean":
        return str(value).lower() == "true"
    raise _Doubt(f"its filter has a literal of type {kind}")


def _classic_filter(t: dict, types: dict[str, str]) -> Any:
    node, kids = t["node"], t["kids"]
    name = _short(node)
    if name in ("And", "Or"):
        a, b = (_classic_filter(k, types) for k in kids)
        return (a & b) if name == "And" else (a | b)
    if name == "Not":
        return ~_classic_filter(kids[0], types)
    if name == "AttributeReference":
        return _boolean_column(_classic_column(t), types)
    if name in ("IsNull", "IsNotNull"):
        col = _classic_column(kids[0])
        _known(col, types)
        import pyarrow.compute as pc

        return pc.field(col).is_null() if name == "IsNull" else pc.field(col).is_valid()
    if name in _CLASSIC_OPS:
        left, right = kids
        op = _CLASSIC_OPS[name]
        if _short(left["node"]) == "Literal":
            left, right, op = right, left, _FLIPPED[op]
        if _short(right["node"]) != "Literal":
            raise _Doubt(f"its filter compares {_short(left['node'])} with {_short(right['node'])}")
        col = _classic_column(left)
        _check_type(col, types)  # before the literal: the column's type is the reason to give
        return _compare(col, op, _literal(right["node"]), types)
    if name == "In":
        values = []
        for k in kids[1:]:
            if _short(k["node"]) != "Literal":
                raise _Doubt("its filter has an isin over non-literal values")
            values.append(_literal(k["node"]))
        return _is_in(_classic_column(kids[0]), values, types)
    raise _Doubt(f"its filter holds {name}")


def _known(name: str, types: dict[str, str]) -> None:
    if name not in types:
        raise _Doubt(f"its filter names {name!r}, not a column of the files")


def _classic_column(t: dict) -> str:
    if _short(t["node"]) != "AttributeReference":
        raise _Doubt(f"it computes {_short(t['node'])} where a column is expected")
    return str(t["node"]["name"])


def _classic(df: Any) -> tuple[str, tuple[str, ...], Any, _Table | None]:
    jplan = df._jdf.queryExecution().optimizedPlan()
    root, _ = _tree(json.loads(jplan.toJSON()))
    chain, t = [], root
    while True:
        chain.append(t)
        if not t["kids"]:
            break
        if len(t["kids"]) != 1:
            raise _Doubt(f"it combines inputs ({_short(t['node'])})")
        t = t["kids"][0]
    leaf = chain[-1]["node"]
    if _short(leaf) != "LogicalRelation":
        raise _Doubt(f"it reads {_short(leaf)}, not files")
    types = {str(a[0]["name"]): str(a[0]["dataType"]) for a in leaf.get("output", [])}
    table = _classic_relation(jplan.collectLeaves().head())
    columns: tuple[str, ...] | None = None
    conditions = []
    for t in chain[:-1]:
        node, name = t["node"], _short(t["node"])
        if name == "Project":
            if columns is None:  # the outermost projection is what the DataFrame holds
                columns = tuple(_classic_column(_tree(e)[0]) for e in node["projectList"])
        elif name == "Filter":
            conditions.append(_classic_filter(_tree(node["condition"])[0], types))
        else:
            raise _Doubt(f"its plan holds {name} ({'aggregation, join, limit, sort, ...'})")
    fmt = "delta" if table is not None else "parquet"
    return fmt, columns if columns is not None else tuple(types), _all(conditions), table


def _classic_relation(leaf: Any) -> _Table | None:
    """None for a plain Parquet relation, the table for a Delta one (see the module doc)."""
    rel = leaf.relation()
    kind = rel.getClass().getName()
    if not kind.endswith(".HadoopFsRelation"):
        raise _Doubt(f"it reads a {kind.rsplit('.', 1)[-1]}, not files")
    fmt = rel.fileFormat().getClass().getName()
    index = rel.location()
    delta = "Delta" in fmt or "Tahoe" in index.getClass().getName()
    if not delta and not fmt.endswith(".ParquetFileFormat"):
        raise _Doubt(f"it reads {fmt.rsplit('.', 1)[-1]} files, not Parquet")
    if not delta and rel.partitionSchema().length():
        raise _Doubt("its Parquet directory is partitioned (Spark types partition values its own way)")
    if rel.bucketSpec().isDefined():
        raise _Doubt("its relation is bucketed")
    options = [k for k in str(rel.options().keys().mkString("\u0000")).split("\u0000") if k]
    allowed = ("path", "paths") + (("versionasof", "timestampasof") if delta else ())
    extra = sorted(k for k in options if k.lower() not in allowed)
    if extra:
        raise _Doubt(f"it is read with options {extra}")
    return _classic_delta(index) if delta else None


def _classic_delta(index: Any) -> _Table:
    """A Delta relation's table and version, from its file index (untested: see the module doc)."""
    from petastream.storage.location import resolve

    kind = index.getClass().getName().rsplit(".", 1)[-1]
    if kind == "TahoeLogFileIndex":
        if not index.partitionFilters().isEmpty():
            raise _Doubt("its Delta file index holds partition filters")
        snapshot = index.snapshotAtAnalysis()
        version = int(snapshot.version() if index.isTimeTravelQuery() else index.version())
    elif kind == "PreparedDeltaFileIndex":
        version = int(index.version())
    else:
        raise _Doubt(f"it reads a Delta relation through a {kind}, not a table snapshot")
    return _Table(resolve(str(index.path().toString())).url, version)


def _all(conditions: list[Any]) -> Any:
    out = None
    for c in conditions:
        out = c if out is None else out & c
    return out


# -- Spark Connect: the client's plan ----------------------------------------------------------
def _connect_literal(lit: Any) -> Any:
    kind = lit.WhichOneof("literal_type")
    if kind in ("long", "integer", "short", "byte", "string", "boolean"):
        return getattr(lit, kind)
    if kind == "null":
        return None
    raise _Doubt(f"its filter has a literal of type {kind}")


def _connect_column(expr: Any) -> str:
    if expr.WhichOneof("expr_type") != "unresolved_attribute":
        raise _Doubt(f"it computes {expr.WhichOneof('expr_type')} where a column is expected")
    name = str(expr.unresolved_attribute.unparsed_identifier)
    if not name or any(c in name for c in ".`*") or expr.unresolved_attribute.HasField("plan_id"):
        raise _Doubt(f"it names the column {name!r} by a qualified or quoted name")
    return name


_CONNECT_OPS = {"==", ">", ">=", "<", "<="}


def _connect_filter(expr: Any, types: dict[str, str]) -> Any:
    import pyarrow.compute as pc

    kind = expr.WhichOneof("expr_type")
    if kind == "unresolved_attribute":
        return _boolean_column(_connect_column(expr), types)
    if kind == "expression_string":
        raise _Doubt("its filter is a SQL string (not parsed here); use column expressions")
    if kind != "unresolved_function":
        raise _Doubt(f"its filter holds {kind}")
    fn = expr.unresolved_function
    name, args = str(fn.function_name), list(fn.arguments)
    if fn.is_distinct:
        raise _Doubt(f"its filter holds a distinct {name}")
    if name in ("and", "or") and len(args) == 2:
        a, b = (_connect_filter(x, types) for x in args)
        return (a & b) if name == "and" else (a | b)
    if name == "not" and len(args) == 1:
        return ~_connect_filter(args[0], types)
    if name in ("isNull", "isNotNull") and len(args) == 1:
        col = _connect_column(args[0])
        _known(col, types)
        return pc.field(col).is_null() if name == "isNull" else pc.field(col).is_valid()
    if name in _CONNECT_OPS and len(args) == 2:
        left, right, op = args[0], args[1], name
        if left.WhichOneof("expr_type") == "literal":
            left, right, op = right, left, _FLIPPED[op]
        if right.WhichOneof("expr_type") != "literal":
            raise _Doubt(f"its filter compares {left.WhichOneof('expr_type')} with {right.WhichOneof('expr_type')}")
        col = _connect_column(left)
        _check_type(col, types)
        return _compare(col, op, _connect_literal(right.literal), types)
    if name == "in" and len(args) >= 2:
        if any(a.WhichOneof("expr_type") != "literal" for a in args[1:]):
            raise _Doubt("its filter has an isin over non-literal values")
        return _is_in(_connect_column(args[0]), [_connect_literal(a.literal) for a in args[1:]], types)
    raise _Doubt(f"its filter holds the function {name!r}")


def _connect(df: Any) -> tuple[str, tuple[str, ...], Any, _Table | None]:
    rel = df._plan.to_proto(df.sparkSession.client).root
    chain = []
    while True:
        kind = rel.WhichOneof("rel_type")
        chain.append((kind, rel))
        if kind == "project":
            if not rel.project.HasField("input"):
                raise _Doubt("it selects from no input")
            rel = rel.project.input
        elif kind == "filter":
            rel = rel.filter.input
        elif kind == "read":
            break
        else:
            raise _Doubt(f"its plan holds {kind} (aggregation, join, limit, sort, ...)")
    read = rel.read
    if read.WhichOneof("read_type") != "data_source":
        raise _Doubt(f"it reads a {read.WhichOneof('read_type')} (a catalog table: its files are not known here)")
    source = read.data_source
    fmt = str(source.format).lower()
    table, mapped = None, False
    if fmt == "delta":
        table, types, mapped = _connect_delta(source)
    elif fmt != "parquet":
        raise _Doubt(f"it reads {fmt or 'unnamed'} files, not Parquet")
    else:
        if source.schema:
            raise _Doubt("it is read with a user schema")
        if source.options or list(source.predicates):
            raise _Doubt(f"it is read with options {sorted(source.options)}")
        types = _file_types(df, list(source.paths))
    columns: tuple[str, ...] | None = None
    conditions = []
    for kind, r in reversed(chain[:-1]):  # from the read outwards
        if kind == "project":
            names = tuple(_connect_column(e) for e in r.project.expressions)
            unknown = [n for n in names if n not in (columns or tuple(types))]
            if unknown:
                raise _Doubt(f"it selects {unknown}, not columns of the files as named there")
            columns = names
        else:
            available = set(columns or types)
            cond = _connect_filter(r.filter.condition, {k: v for k, v in types.items() if k in available})
            conditions.append(cond)
    if mapped and conditions:
        raise _Doubt("it filters a Delta table that maps its column names (delta.columnMapping.mode)")
    return fmt, columns if columns is not None else tuple(types), _all(conditions), table


def _connect_delta(source: Any) -> tuple[_Table, dict[str, str], bool]:
    """A Connect ``Read`` of a Delta table: the table pinned, its types, whether it maps names."""
    paths = list(source.paths)
    if len(paths) != 1 or source.schema or list(source.predicates):
        raise _Doubt("it reads a Delta table with a user schema, predicates or not one path")
    options = {k.lower(): v for k, v in source.options.items()}
    extra = sorted(k for k in options if k not in ("versionasof", "timestampasof"))
    if extra or len(options) > 1:
        raise _Doubt(f"it reads a Delta table with options {sorted(source.options)}")
    version, moment = options.get("versionasof"), options.get("timestampasof")
    if version is not None and not str(version).strip().isdigit():
        raise _Doubt(f"it reads a Delta table with versionAsOf={version!r}")
    if moment is not None and not re.search(r"(Z|[+-]\d\d:?\d\d)$", str(moment).strip()):
        # Spark reads a zone-less timestamp in the session's time zone, deltalake in UTC
        raise _Doubt(f"it reads a Delta table with timestampAsOf={moment!r} (no time zone given)")
    return _delta_table(paths[0], None if version is None else int(version), moment)


def _file_types(df: Any, paths: list[str]) -> dict[str, str]:
    """The relation's columns and Spark types (the server's reading of the files), by name;
    refused where its files lie in ``key=value`` directories (partition columns)."""
    if not paths:
        raise _Doubt("it reads no paths")
    for f in df.inputFiles():
        if any("=" in part for part in str(f).split("://", 1)[-1].split("/")[:-1]):
            raise _Doubt("its Parquet directory is partitioned (Spark types partition values its own way)")
    schema = df.sparkSession.read.parquet(*paths).schema
    return {f.name: f.dataType.typeName() for f in schema.fields}
