"""Stand-ins for the ``pyspark.sql.types`` objects a Petastorm Unischema holds.

A Petastorm dataset's schema is a pickle in which every ``ScalarCodec`` holds a pyspark type
instance (``LongType()``, ``DecimalType(10, 3)``...). Reading a dataset must not need pyspark (it
is heavy, and absent beside many training jobs), so the restricted unpickler builds these
stand-ins instead: each keeps the pyspark class name and the instance state exactly as pickled
(pyspark 4 adds ``collation`` to ``StringType``), compares equal to a pyspark type of the same
name and state, and turns into the real pyspark type with :meth:`SparkTypeStandIn.to_pyspark`
when a Spark schema is wanted (``as_spark_schema``, ``spark_dtype``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["SparkTypeStandIn", "STAND_INS", "spark_type_name", "to_pyspark_type"]


class SparkTypeStandIn:
    """A ``pyspark.sql.types`` instance read from a pickle, without pyspark."""

    type_name = "DataType"

    def __setstate__(self, state: dict[str, Any] | None) -> None:
        self.__dict__.update(state or {})

    def __eq__(self, other: object) -> bool:
        return _key(other) == _key(self)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.type_name)

    def __repr__(self) -> str:
        if self.type_name == "DecimalType":
            return f"DecimalType({self.__dict__.get('precision')},{self.__dict__.get('scale')})"
        if self.type_name in ("CharType", "VarcharType"):
            return f"{self.type_name}({self.__dict__.get('length')})"
        if self.type_name == "ArrayType":
            return f"ArrayType({self.__dict__.get('elementType')!r}, {self.__dict__.get('containsNull')})"
        return f"{self.type_name}()"

    def to_pyspark(self) -> Any:
        """The pyspark type this stands for (imports pyspark)."""
        import pyspark.sql.types as sql_types

        cls = getattr(sql_types, self.type_name)
        # What unpickling does: a bare instance given the pickled state (nested types converted).
        obj = cls.__new__(cls)
        obj.__dict__.update({k: to_pyspark_type(v) for k, v in self.__dict__.items()})
        return obj


# The pyspark types a ScalarCodec may hold: the atomic types Spark writes to Parquet, and
# ArrayType of them. Anything else in a pickle is refused by the unpickler.
_NAMES = ("NullType", "BooleanType", "ByteType", "ShortType", "IntegerType", "LongType",
          "FloatType", "DoubleType", "DecimalType", "StringType", "CharType", "VarcharType",
          "BinaryType", "DateType", "TimestampType", "TimestampNTZType", "ArrayType")

STAND_INS: dict[str, type[SparkTypeStandIn]] = {
    name: type(name, (SparkTypeStandIn,), {"type_name": name, "__module__": __name__})
    for name in _NAMES
}


# Each class is also an attribute of this module, so that pickle finds it by name: a schema
# travels to petastream's worker processes (make_reader's process pool) as any object does.
globals().update(STAND_INS)


def spark_type_name(spark_type: Any) -> str:
    """``'LongType'`` for ``LongType()``, from pyspark or a stand-in alike."""
    if isinstance(spark_type, SparkTypeStandIn):
        return spark_type.type_name
    return type(spark_type).__name__


def _key(value: Any) -> Any:
    """A comparable form of a (possibly nested) spark type, pyspark's or a stand-in."""
    name = spark_type_name(value)
    if isinstance(value, SparkTypeStandIn) or (
            name in STAND_INS and type(value).__module__.startswith("pyspark.")):
        return name, tuple(sorted((k, _key(v)) for k, v in vars(value).items()))
    return value


def to_pyspark_type(value: Any) -> Any:
    """A real pyspark type for a stand-in; any other value unchanged."""
    return value.to_pyspark() if isinstance(value, SparkTypeStandIn) else value
