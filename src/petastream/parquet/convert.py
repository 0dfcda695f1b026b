"""Arrow columns of a row group -> the numpy columns an MDS read gives, and rows taken from them.

A row group is converted once when it is loaded (:func:`prepare`): numbers, booleans (as
uint8), dates and timestamps (int64 nanoseconds, as the Spark path writes them) and
fixed-size arrays become numpy arrays; variable-length arrays a
:class:`~petastream.columns.ragged.Ragged`; decimals an object array of ``Decimal``;
``str``/``bytes`` stay Arrow arrays (:class:`Text`) until a read asks for Python objects (made
once per row group) or for their bytes and offsets (``strings="ragged"``). Reads then take rows
with numpy (:func:`take`): no per-row Python work but for the object columns MDS reads as
objects too.

Nulls, as the Spark path (``null_policy``): ``"error"`` fails naming the column, the file and
the row group; ``"fill"`` fills 0 (integers, booleans, decimals, dates and timestamps: the
epoch), NaN (floats), ``""``, ``b""``, JSON null (lists of strings); null elements inside arrays
as their scalar type; a null array in a fixed-length column as that many fill values (in a
variable-length column a null array stays an error: it has no length). ``"petastorm"`` keeps
them as Petastorm's batch reader gives them (through pandas): NaN in float columns, and in
integer columns, which a plan reads as float64 where the footers' statistics count nulls
(:func:`~petastream.parquet.types.nullable_spec`); ``None`` for bytes and decimals, and for
booleans, read as Python objects then; the text ``'None'`` for strings (Petastorm's
``astype(str)``); NaT (``int64`` min) for dates and timestamps; NaN for null elements of float
arrays; null arrays, and null elements of other arrays, stay errors (Petastorm fails on them).
``"rows"``: as ``"petastorm"`` but a null string is None (what ``make_reader`` rows hold).
Columns without nulls take the same path under every policy.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

import numpy as np

from petastream.columns.ragged import Ragged
from petastream.columns.text import binary_as_ragged
from petastream.errors import EncodingError, InternalError, NullValuesError
from petastream.parquet.types import ColumnSpec

if TYPE_CHECKING:
    from petastream.parquet.kept_objects import KeptObjects

__all__ = ["prepare", "constant", "take", "empty", "Text", "Json", "NULL_POLICIES", "NullValuesError"]

NULL_POLICIES = ("error", "fill", "petastorm", "rows")
_NS_PER = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
_NS_PER_DAY = 86_400 * 10**9


class Text:
    """A ``str``/``bytes`` column of one row group: Arrow ``large_binary``/``large_string``,
    and its Python objects once a read asked for them."""

    __slots__ = ("arrow", "_objects", "_keep")

    def __init__(self, arrow: Any):
        self.arrow = arrow
        self._objects: np.ndarray | None = None
        self._keep: tuple[KeptObjects, str, str] | None = None

    def __len__(self) -> int:
        return len(self.arrow)

    def keep_in(self, kept: KeptObjects, key: str, column: str) -> None:
        """Take this column's objects from ``kept`` (``column`` of the decoded cache entry
        ``key``, whose bytes this column's are) where they are there; else keep them there
        once made (see :mod:`~.kept_objects`)."""
        if self._objects is None:
            self._objects = kept.get(key, column, len(self.arrow))
        if self._objects is None:
            self._keep = (kept, key, column)

    def objects(self) -> np.ndarray:
        if self._objects is None:  # a race makes it twice, never wrong
            objects = (self.arrow.to_numpy(zero_copy_only=False) if len(self.arrow)
                       else np.empty(0, dtype=object))
            if self._keep is not None:
                kept, key, column = self._keep
                kept.put(key, column, objects, int(self.arrow.nbytes))
            self._objects = objects
        return self._objects

    @property
    def nbytes(self) -> int:
        return int(self.arrow.nbytes) + (0 if self._objects is None else 64 * len(self.arrow))


class Json:
    """A list<string> column of one row group; each read makes fresh lists (as MDS decodes them)."""

    __slots__ = ("arrow",)

    def __init__(self, arrow: Any):
        self.arrow = arrow

    def __len__(self) -> int:
        return len(self.arrow)


def _where(spec: ColumnSpec, where: str) -> str:
    return f"column {spec.name!r} ({spec.arrow_type}) in {where}"


def _null_error(spec: ColumnSpec, where: str, count: int, what: str = "null value(s)") -> NullValuesError:
    return NullValuesError(
        f"{_where(spec, where)} holds {count} {what}, which MDS-typed reads cannot hold: filter "
        f"them out (filters=pyarrow.compute.field({spec.name!r}).is_valid()), or pass "
        "null_policy='fill' (0, NaN, '', b'', the epoch, JSON null)")


def prepare(spec: ColumnSpec, arr: Any, null_policy: str, where: str) -> Any:
    """One column of a loaded row group, ready for :func:`take` (see the module doc)."""
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    fill = null_policy == "fill"
    try:
        if spec.kind not in ("fixed", "list", "json", "object") and arr.null_count:
            if null_policy in ("petastorm", "rows"):
                return _petastorm_nulls(spec, arr, where, null_policy)
            if not fill:
                raise _null_error(spec, where, arr.null_count)
            arr = _fill_scalar(spec, arr)
        return _CONVERT[spec.kind](spec, arr, null_policy, where)
    except pa.ArrowInvalid as e:
        raise EncodingError(f"{_where(spec, where)}: {e}") from e


_NAT = np.iinfo(np.int64).min  # numpy's NaT, as the int64 nanoseconds dates and timestamps are read as


def _petastorm_nulls(spec: ColumnSpec, arr: Any, where: str, policy: str = "petastorm") -> Any:
    """A scalar column holding nulls, as Petastorm's batch reader gives it (see the module doc);
    ``policy="rows"``: a null string is None, as Petastorm's ``make_reader`` gives it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if spec.kind == "plain" and spec.dtype[:5] == "float":  # nulls are NaN (an integer column: float64)
        return arr.cast(pa.from_numpy_dtype(np.dtype(spec.dtype))).to_numpy(zero_copy_only=False)
    if spec.kind == "str" and policy == "rows":
        return _text(spec, arr, policy, where)  # its objects hold None where null
    if spec.kind == "str":  # Petastorm's astype(np.str_) of an object array writes None as 'None'
        return _text(spec, pc.fill_null(arr, pa.scalar("None", arr.type)), "petastorm", where)
    if spec.kind in ("bytes", "decimal"):  # objects: None where null
        return _CONVERT[spec.kind](spec, arr, "petastorm", where)
    if spec.kind in ("date", "timestamp"):
        valid = arr.is_valid().to_numpy(zero_copy_only=False)
        out = _temporal(spec, _fill_scalar(spec, arr), "petastorm", where)
        out = out if out.flags.writeable else out.copy()
        out[~valid] = _NAT
        return out
    # An integer or boolean column whose footers' statistics counted no nulls, yet holds some.
    raise NullValuesError(
        f"{_where(spec, where)} holds {arr.null_count} null value(s) that the file's statistics do not "
        "count, so the column was planned as non-null; rewrite the file with statistics, filter them out "
        f"(filters=pyarrow.compute.field({spec.name!r}).is_valid()), or pass null_policy='fill'")


def _fill_scalar(spec: ColumnSpec, arr: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    t = arr.type
    if spec.kind == "str":
        value: Any = ""
    elif spec.kind == "bytes":
        value = b"\0" * t.byte_width if pa.types.is_fixed_size_binary(t) else b""
    elif spec.kind == "decimal":
        value = Decimal(0)
    elif pa.types.is_floating(t):
        value = float("nan")
    elif pa.types.is_boolean(t):
        value = False
    elif spec.kind in ("date", "timestamp"):
        return pc.fill_null(arr.cast(pa.int64()) if spec.kind == "timestamp" or pa.types.is_date64(t)
                            else arr.cast(pa.int32()), 0).cast(t)
    else:
        value = 0
    return pc.fill_null(arr, pa.scalar(value, t))


def _plain(spec: ColumnSpec, arr: Any, policy: str, where: str) -> np.ndarray:
    out = arr.to_numpy(zero_copy_only=False)
    return out if out.dtype == np.dtype(spec.dtype) else out.astype(spec.dtype)


def _bool(spec: ColumnSpec, arr: Any, policy: str, where: str) -> np.ndarray:
    import pyarrow as pa

    return arr.cast(pa.uint8()).to_numpy(zero_copy_only=False)


def _temporal(spec: ColumnSpec, arr: Any, policy: str, where: str) -> np.ndarray:
    """Nanoseconds since the epoch as int64, as the Spark path writes dates and timestamps."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_date32(arr.type):
        ints, factor = arr.cast(pa.int32()).cast(pa.int64()), _NS_PER_DAY
    elif pa.types.is_date64(arr.type):
        ints, factor = arr.cast(pa.int64()), 10**6
    else:
        ints, factor = arr.cast(pa.int64()), _NS_PER[arr.type.unit]
    if factor != 1:
        try:
            ints = pc.multiply_checked(ints, factor)
        except pa.ArrowInvalid as e:
            raise EncodingError(f"{_where(spec, where)}: a value is out of range for int64 nanoseconds "
                                "since the epoch (1677-09-21 .. 2262-04-11)") from e
    return ints.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def _decimal(spec: ColumnSpec, arr: Any, policy: str, where: str) -> np.ndarray:
    # The MDS path stores Arrow's decimal text and reads it back with Decimal(text): the same
    # value, digits and exponent as pyarrow's own Decimal objects.
    return arr.to_numpy(zero_copy_only=False) if len(arr) else np.empty(0, dtype=object)


def _text(spec: ColumnSpec, arr: Any, policy: str, where: str) -> Text:
    import pyarrow as pa

    t = arr.type
    if spec.kind == "str":
        if not pa.types.is_large_string(t):
            arr = arr.cast(pa.large_string())
    elif not pa.types.is_large_binary(t):
        arr = arr.cast(pa.large_binary())
    return Text(arr)


def _lengths(arr: Any) -> np.ndarray:
    import pyarrow.compute as pc

    lengths = pc.list_value_length(arr)
    if lengths.null_count:
        lengths = pc.fill_null(lengths, -1)
    return lengths.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def _values(spec: ColumnSpec, arr: Any, policy: str, where: str) -> Any:
    """The non-null arrays' values, one level (or, for nested fixed-size lists, all levels) down."""
    import pyarrow as pa
    import pyarrow.compute as pc

    fill = policy == "fill"
    values = arr.flatten()
    while pa.types.is_fixed_size_list(values.type):
        if values.null_count:
            if not fill:
                raise _null_error(spec, where, values.null_count, "null inner array(s)")
            values = pc.fill_null(values, pa.scalar([None] * values.type.list_size, values.type))
        values = values.flatten()
    if values.null_count and not (policy == "petastorm" and pa.types.is_floating(values.type)):  # else NaN
        if not fill:
            raise _null_error(spec, where, values.null_count, "null element(s) inside arrays")
        t = values.type
        value = float("nan") if pa.types.is_floating(t) else False if pa.types.is_boolean(t) else 0
        values = pc.fill_null(values, pa.scalar(value, t))
    if pa.types.is_boolean(values.type):
        values = values.cast(pa.uint8())
    return values


def _fixed(spec: ColumnSpec, arr: Any, policy: str, where: str) -> np.ndarray:
    import pyarrow as pa

    n = len(arr)
    width = int(np.prod(spec.shape))
    if not pa.types.is_fixed_size_list(arr.type):
        lengths = _lengths(arr)
        bad = (lengths != spec.shape[0]) & (lengths >= 0)
        if bad.any():
            raise EncodingError(
                f"{_where(spec, where)}: row {int(np.argmax(bad))} has {int(lengths[bad][0])} values, "
                f"array_lengths says {spec.shape[0]}; pass array_lengths={{{spec.name!r}: None}} "
                "to read it as variable-length arrays")
    fill = policy == "fill"
    if arr.null_count and not fill:
        raise _null_error(spec, where, arr.null_count, "null array(s)")
    flat = _values(spec, arr, policy, where).to_numpy(zero_copy_only=False)
    flat = flat.astype(spec.dtype, copy=False)
    if not arr.null_count:
        return flat.reshape((n, *spec.shape))
    out = np.full((n, width), np.nan if flat.dtype.kind == "f" else 0, dtype=flat.dtype)
    out[arr.is_valid().to_numpy(zero_copy_only=False)] = flat.reshape(-1, width)
    return out.reshape((n, *spec.shape))


def _list(spec: ColumnSpec, arr: Any, policy: str, where: str) -> Ragged:
    if arr.null_count:  # a null array has no length to fill it to
        raise _null_error(spec, where, arr.null_count, "null array(s) (a variable-length column cannot fill them)")
    values = _values(spec, arr, policy, where).to_numpy(zero_copy_only=False).astype(spec.dtype, copy=False)
    offsets = arr.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    return Ragged(np.ascontiguousarray(values), offsets - offsets[0])


def _json(spec: ColumnSpec, arr: Any, policy: str, where: str) -> Json:
    if arr.null_count and policy != "fill":  # null lists are JSON null under 'fill'; null strings inside stay
        raise _null_error(spec, where, arr.null_count, "null array(s)")
    return Json(arr)


def _object(spec: ColumnSpec, arr: Any, policy: str, where: str) -> np.ndarray:
    """Python objects, ``None`` where null (booleans holding nulls: see ``nullable_spec``)."""
    return arr.to_numpy(zero_copy_only=False).astype(object, copy=False)


_CONVERT = {"plain": _plain, "bool": _bool, "date": _temporal, "timestamp": _temporal,
            "decimal": _decimal, "str": _text, "bytes": _text, "fixed": _fixed, "list": _list,
            "json": _json, "object": _object}


def constant(spec: ColumnSpec, value: Any, n: int, null_policy: str, where: str, arrow_type: Any = None) -> Any:
    """A partition column: ``value`` (of ``arrow_type``) repeated for the ``n`` rows of a row group."""
    import pyarrow as pa

    if value is None and null_policy != "fill":
        raise _null_error(spec, where, n, "null partition value(s) (__HIVE_DEFAULT_PARTITION__)")
    if value is not None and spec.kind in ("date", "timestamp") and arrow_type is not None:
        # A Delta table's date/timestamp partition: int64 nanoseconds, as a file column reads.
        value = int(prepare(spec, pa.array([value], arrow_type), null_policy, where)[0])
    if spec.kind in ("str", "bytes"):
        kind = pa.large_string() if spec.kind == "str" else pa.large_binary()
        filler = "" if spec.kind == "str" else b""
        return Text(pa.array([value if value is not None else filler], kind).take(np.zeros(n, np.int64)))
    if spec.kind == "decimal":  # Decimal objects, as a decimal column reads
        return np.full(n, value, dtype=object)
    # Numbers; booleans as uint8; dates and timestamps as int64 nanoseconds (above).
    return np.full(n, 0 if value is None else value, dtype=spec.dtype)


def take(col: Any, rows: np.ndarray | slice, strings: str = "objects") -> Any:
    """Rows of one prepared column (``rows``: indices in any order, or a slice: views where it can)."""
    if isinstance(col, np.ndarray):
        if isinstance(rows, slice) or col.ndim < 2 or col.dtype.hasobject:
            return col[rows]
        # Rows of an n-d array as opaque items: numpy's fancy index of whole rows is several
        # times faster than of the n-d array (the MDS reader's trick, mds.columns._as_items).
        item = np.dtype((np.void, col.dtype.itemsize * int(np.prod(col.shape[1:]))))
        return col.reshape(len(col), -1).view(item).reshape(len(col))[rows].view(col.dtype).reshape(
            (len(rows), *col.shape[1:]))
    if isinstance(col, Ragged):
        return col.slice(rows.start, rows.stop) if isinstance(rows, slice) else col.take(rows)
    if isinstance(col, Text):
        if strings == "ragged":
            return _ragged(col.arrow, rows)
        return col.objects()[rows]
    if isinstance(col, Json):
        part = col.arrow.slice(rows.start, rows.stop - rows.start) if isinstance(rows, slice) else col.arrow.take(rows)
        out = np.empty(len(part), dtype=object)
        out[:] = part.to_pylist()
        return out
    raise InternalError(f"unknown prepared column {type(col).__name__}")


def _ragged(arr: Any, rows: np.ndarray | slice) -> Ragged:
    """The bytes of ``str``/``bytes`` values as :class:`Ragged` uint8 (``strings="ragged"``)."""
    part = arr.slice(rows.start, rows.stop - rows.start) if isinstance(rows, slice) else arr.take(rows)
    return binary_as_ragged(part)


def empty(spec: ColumnSpec, strings: str = "objects") -> Any:
    """A column of no rows, typed as reads of ``spec`` are."""
    if spec.kind in ("plain", "bool", "date", "timestamp", "fixed"):
        return np.empty((0, *spec.shape), dtype=spec.dtype)
    if spec.kind == "list":
        return Ragged(np.empty(0, dtype=spec.dtype), np.zeros(1, np.int64))
    if spec.kind in ("str", "bytes") and strings == "ragged":
        return Ragged(np.empty(0, np.uint8), np.zeros(1, np.int64))
    return np.empty(0, dtype=object)
