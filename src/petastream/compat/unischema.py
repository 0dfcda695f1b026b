"""``petastorm.unischema``: a dataset's schema, rendered as Spark, numpy and namedtuple types.

A :class:`Unischema` is a name and an ordered list of :class:`UnischemaField` (name, numpy dtype,
shape with None for a variable dimension, codec, nullable). Petastorm pickles it into the
dataset's ``_common_metadata``; both classes keep Petastorm's layout (the field namedtuple's five
members, the schema's ``_name``/``_fields`` and one attribute per field) so that a pickle written
by either side loads on the other (see :mod:`petastream.compat.etl._pickling`).

Nothing here imports pyspark until a Spark object is asked for (``as_spark_schema``,
``dict_to_spark_row``).
"""

from __future__ import annotations

import copy
import re
import warnings
from collections import OrderedDict, namedtuple
from collections.abc import Iterable
from typing import Any, NamedTuple

import numpy as np

from petastream.errors import InvalidArgumentTypeError

__all__ = ["UnischemaField", "Unischema", "dict_to_spark_row", "insert_explicit_nulls",
           "match_unischema_fields", "row_type", "schema_name"]


# Petastorm's module switch for the order of a schema's fields and its namedtuples:
# "preserve_input_order" (the default) or "alphabetical" (its deprecated legacy order, by name).
# Scripts and tests that relied on the legacy order set it (``mock.patch``), so it is read at use.
_UNISCHEMA_FIELD_ORDER = "preserve_input_order"


def _alphabetical() -> bool:
    return _UNISCHEMA_FIELD_ORDER.lower() == "alphabetical"


def _fields_as_tuple(field: Any) -> tuple:
    # The codec is left out, as in Petastorm: an unpickled codec is a new object.
    return field.name, field.numpy_dtype, field.shape, field.nullable


class UnischemaField(NamedTuple):
    """One field: ``name``, ``numpy_dtype`` (a numpy scalar type, ``Decimal``...), ``shape``
    (``()`` for a scalar, None for a variable dimension: ``(None, 3)``), ``codec`` (how it is
    stored; None for a plain scalar column) and ``nullable``. Equality and hash ignore the codec."""

    name: str
    numpy_dtype: Any
    shape: tuple[int | None, ...]
    codec: Any = None
    nullable: bool | None = False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, tuple) and len(other) >= 4 and _fields_as_tuple(self) == _fields_as_tuple(other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(_fields_as_tuple(self))


class _NamedtupleCache:
    """One namedtuple class per schema name and field list, so that two readers of the same
    fields yield the same type (``tf.data.Dataset.concatenate`` compares them)."""

    _store: dict[str, type] = {}

    @staticmethod
    def get(parent_schema_name: str, field_names: Iterable[str]) -> type:
        names = sorted(field_names) if _alphabetical() else list(field_names)
        key = " ".join([parent_schema_name, *names])
        if key not in _NamedtupleCache._store:
            _NamedtupleCache._store[key] = namedtuple(f"{parent_schema_name}_view", names)
        return _NamedtupleCache._store[key]


def _numpy_to_spark_mapping() -> dict[Any, Any]:
    """The Spark type of a codec-less scalar field, by numpy type (Petastorm's table)."""
    import pyspark.sql.types as T

    return {np.int8: T.ByteType(), np.uint8: T.ShortType(), np.int16: T.ShortType(),
            np.uint16: T.IntegerType(), np.int32: T.IntegerType(), np.int64: T.LongType(),
            np.float32: T.FloatType(), np.float64: T.DoubleType(), np.bytes_: T.StringType(),
            np.str_: T.StringType(), np.bool_: T.BooleanType()}


def _field_spark_dtype(field: UnischemaField) -> Any:
    if field.codec is not None:
        return field.codec.spark_dtype()
    if field.shape != ():
        raise ValueError(f"An instance of non-scalar UnischemaField '{field.name}' has codec set to None. "
                         "Don't know how to guess a Spark type for it")
    spark_type = _numpy_to_spark_mapping().get(field.numpy_dtype)
    if spark_type is None:
        raise ValueError(f"Was not able to map type {field.numpy_dtype} to a spark type.")
    return spark_type


class Unischema:
    """A named, ordered set of :class:`UnischemaField`; each field is also an attribute."""

    def __init__(self, name: str, fields: Iterable[UnischemaField]) -> None:
        self._name = name
        if _alphabetical():
            fields = sorted(fields, key=lambda f: f.name)
        self._fields: OrderedDict[str, UnischemaField] = OrderedDict((f.name, f) for f in fields)
        self._set_field_attributes()

    def _set_field_attributes(self) -> None:
        for f in self._fields.values():
            if f.name in self.__dict__ or hasattr(type(self), f.name):
                warnings.warn(f"Can not create dynamic property {f.name} because it conflicts with an "
                              "existing property of Unischema", stacklevel=3)
            else:
                setattr(self, f.name, f)

    # Pickling: Petastorm's instance dict (``_name``, ``_fields``, one entry per field), which
    # Petastorm restores by a plain ``__dict__`` update.
    def __getstate__(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._name = state["_name"]
        self._fields = OrderedDict(state["_fields"])
        self._set_field_attributes()

    @property
    def fields(self) -> OrderedDict[str, UnischemaField]:
        return self._fields

    def create_schema_view(self, fields: Iterable[Any]) -> Unischema:
        """A schema of a subset of the fields: ``UnischemaField`` objects (matched by name; this
        schema's own field is used) and/or regular expressions matching whole field names."""
        fields = list(fields)
        patterns = [f for f in fields if isinstance(f, str)]
        field_objects: list[Any] = [f for f in fields if isinstance(f, tuple)]  # UnischemaFields
        if len(patterns) + len(field_objects) != len(fields):
            raise ValueError('Elements of "fields" must be either a string (regular expressions) or '
                             "an instance of UnischemaField class.")
        unknown = {f.name for f in field_objects} - set(self._fields)
        if unknown:
            raise ValueError(f"field {unknown} does not belong to the schema {self}")
        chosen = {f.name for f in field_objects} | {f.name for f in match_unischema_fields(self, patterns)}
        # Schema order (Petastorm's order here follows a set and varies from run to run).
        return Unischema(f"{self._name}_view", [f for n, f in self._fields.items() if n in chosen])

    def _get_namedtuple(self) -> type:
        return _NamedtupleCache.get(self._name, self._fields.keys())

    def make_namedtuple(self, **kargs: Any) -> Any:
        """An instance of this schema's namedtuple type: ``schema.make_namedtuple(id=1, x=...)``."""
        return self._get_namedtuple()(**kargs)

    def make_namedtuple_tf(self, *args: Any, **kargs: Any) -> Any:
        return self._get_namedtuple()(*args, **kargs)

    def as_spark_schema(self) -> Any:
        """The ``pyspark.sql.types.StructType`` of the stored columns."""
        import pyspark.sql.types as sql_types

        return sql_types.StructType([sql_types.StructField(f.name, _field_spark_dtype(f), bool(f.nullable))
                                     for f in self._fields.values()])

    @classmethod
    def from_arrow_schema(cls, parquet_dataset: Any, omit_unsupported_fields: bool = True) -> Unischema:
        """A codec-less Unischema inferred from a Parquet dataset's Arrow schema: list columns
        become fields of shape ``(None,)``; hive partition keys become string/int64 fields.

        ``parquet_dataset``: a ``pyarrow.Schema``, or anything with a ``schema`` attribute that is
        one (``pyarrow.parquet.ParquetDataset``, ``pyarrow.dataset.Dataset``); partition columns
        are those of its ``partitioning`` when it has one.
        """
        from petastream.compat._arrow_fields import unischema_fields_from_arrow

        return cls("inferred_schema", unischema_fields_from_arrow(parquet_dataset, omit_unsupported_fields))

    def __str__(self) -> str:
        lines = "".join(f"  {type(f).__name__}('{f.name}', {_dtype_name(f.numpy_dtype)}, "
                        f"{f.shape}, {f.codec}, {f.nullable}),\n" for f in self._fields.values())
        return f"{type(self).__name__}({self._name}, [\n{lines}])"

    __repr__ = __str__


def schema_name(schema: Unischema) -> str:
    """The schema's name. Petastorm keeps it in ``_name`` and gives no public name; a function
    here, not an attribute, as a field of the schema may be called ``name``."""
    return schema._name


def row_type(schema: Unischema) -> type:
    """The namedtuple type of the schema's rows (Petastorm's ``schema._get_namedtuple()``)."""
    return schema._get_namedtuple()


def dict_to_spark_row(unischema: Unischema, row_dict: dict[str, Any]) -> Any:
    """A ``pyspark.Row`` of ``row_dict`` encoded with the schema's codecs, in schema order.
    Missing nullable fields become None; the input dict is not modified."""
    from pyspark.sql import Row

    if not isinstance(unischema, Unischema):
        raise InvalidArgumentTypeError(f"dict_to_spark_row: unischema must be a Unischema, got {type(unischema).__name__}")
    row = copy.copy(row_dict)
    insert_explicit_nulls(unischema, row)
    if set(row) != set(unischema.fields):
        raise ValueError("Dictionary fields \n{}\n do not match schema fields \n{}".format(
            "\n".join(sorted(row)), "\n".join(unischema.fields)))
    names = list(unischema.fields)
    values: list[Any] = []
    for name in names:
        field, value = unischema.fields[name], row[name]
        if value is None:
            if not field.nullable:
                raise ValueError(f'Field {name} is not "nullable", but got passes a None value')
            values.append(None)
        elif field.codec is not None:
            values.append(field.codec.encode(field, value))
        else:
            values.append(value.tolist() if isinstance(value, np.generic) else value)
    spark_row = Row(*values)
    spark_row.__fields__ = names
    return spark_row


def insert_explicit_nulls(unischema: Unischema, row_dict: dict[str, Any]) -> None:
    """Add None for every nullable field missing from ``row_dict`` (in place); a missing
    non-nullable field raises ValueError."""
    for name, field in unischema.fields.items():
        if name not in row_dict:
            if not field.nullable:
                raise ValueError(f"Field {name} is not found in the row_dict, but is not nullable.")
            row_dict[name] = None


def match_unischema_fields(schema: Unischema, field_regex: Iterable[str] | None) -> list[UnischemaField]:
    """The fields whose whole name matches one of the regular expressions, in schema order.

    Petastorm warns when a pattern matches differently as a prefix (``re.match``, its behaviour
    before 0.7) than as a whole name (``re.fullmatch``); so does this.
    """
    patterns = list(field_regex or [])
    if not patterns:
        return []
    full = [f for n, f in schema.fields.items() if any(re.fullmatch(p, n) for p in patterns)]
    prefix = [f for n, f in schema.fields.items() if any(re.match(p, n) for p in patterns)]
    if full != prefix:
        changed = sorted({f.name for f in full} ^ {f.name for f in prefix})
        warnings.warn("schema_fields behavior has changed. Now, regular expression pattern must match"
                      f" the entire field name. The change in the behavior affects the following fields: "
                      f"{', '.join(changed)}", stacklevel=2)
    return full


def _dtype_name(numpy_dtype: Any) -> str:
    # numpy 2 calls np.bool_ 'bool'; Petastorm (numpy 1.x) prints 'bool_'.
    return "bool_" if numpy_dtype is np.bool_ else getattr(numpy_dtype, "__name__", str(numpy_dtype))
