"""petastream.compat.unischema: Petastorm's Unischema API (no Spark session needed)."""

from __future__ import annotations

import pickle
from decimal import Decimal

import numpy as np
import pyspark.sql.types as T
import pytest

from petastream.compat.codecs import CompressedImageCodec, NdarrayCodec, ScalarCodec
from petastream.compat.unischema import (
    Unischema,
    UnischemaField,
    dict_to_spark_row,
    insert_explicit_nulls,
    match_unischema_fields,
)

SCHEMA = Unischema("Sample", [
    UnischemaField("id", np.int64, (), ScalarCodec(T.LongType()), False),
    UnischemaField("image", np.uint8, (4, 5, 3), CompressedImageCodec("png"), False),
    UnischemaField("points", np.float32, (None, 3), NdarrayCodec(), True),
    UnischemaField("label", np.str_, (), ScalarCodec(T.StringType()), True),
    UnischemaField("score", np.float64, (), None, False),
    UnischemaField("price", Decimal, (), ScalarCodec(T.DecimalType(8, 2)), True),
])


def test_fields_are_ordered_and_attributes():
    assert list(SCHEMA.fields) == ["id", "image", "points", "label", "score", "price"]
    assert SCHEMA.id is SCHEMA.fields["id"]
    assert SCHEMA.points.shape == (None, 3)


def test_field_named_like_a_method_warns_and_keeps_the_method():
    with pytest.warns(UserWarning, match="Can not create dynamic property fields"):
        schema = Unischema("S", [UnischemaField("fields", np.int32, ())])
    assert list(schema.fields) == ["fields"]


def test_field_equality_ignores_codec():
    a = UnischemaField("x", np.int32, (), ScalarCodec(T.IntegerType()), False)
    b = UnischemaField("x", np.int32, (), None, False)
    assert a == b and hash(a) == hash(b)
    assert a != UnischemaField("x", np.int32, (), None, True)


def test_view_by_field_and_regex_in_schema_order():
    view = SCHEMA.create_schema_view(["po.*", SCHEMA.id, "label"])
    assert list(view.fields) == ["id", "points", "label"]
    assert view._name == "Sample_view"
    # The schema's own field is used, not the one passed in.
    other = UnischemaField("id", np.int64, (), None, False)
    assert SCHEMA.create_schema_view([other]).fields["id"].codec is SCHEMA.id.codec


def test_view_errors():
    with pytest.raises(ValueError, match=r"field \{'nope'\} does not belong to the schema"):
        SCHEMA.create_schema_view([UnischemaField("nope", np.int8, ())])
    with pytest.raises(ValueError, match='Elements of "fields" must be either a string'):
        SCHEMA.create_schema_view([3])


def test_regex_matches_whole_names_and_warns_where_prefix_matching_differed():
    with pytest.warns(UserWarning, match="affects the following fields: id, image"):
        assert match_unischema_fields(SCHEMA, ["i"]) == []
    assert [f.name for f in match_unischema_fields(SCHEMA, ["i.*", "score"])] == ["id", "image", "score"]
    assert match_unischema_fields(SCHEMA, []) == []


def test_namedtuple_type_is_shared_per_schema_and_fields():
    row = SCHEMA.make_namedtuple(id=1, image=None, points=None, label="a", score=0.5, price=None)
    assert type(row).__name__ == "Sample_view"
    assert type(row) is SCHEMA._get_namedtuple()
    same = Unischema("Sample", list(SCHEMA.fields.values()))
    assert same._get_namedtuple() is SCHEMA._get_namedtuple()
    assert SCHEMA.make_namedtuple_tf(1, None, None, "a", 0.5, None) == row


def test_str_is_petastorm_s():
    schema = Unischema("S", [UnischemaField("b", np.bool_, (2,), NdarrayCodec(), False),
                             UnischemaField("d", Decimal, (), ScalarCodec(T.DecimalType(8, 2)), True)])
    assert str(schema) == ("Unischema(S, [\n"
                           "  UnischemaField('b', bool_, (2,), NdarrayCodec(), False),\n"
                           "  UnischemaField('d', Decimal, (), ScalarCodec(DecimalType()), True),\n])")


def test_insert_explicit_nulls():
    row = {"id": 1, "image": None, "score": 1.0}
    insert_explicit_nulls(SCHEMA, row)
    assert row == {"id": 1, "image": None, "score": 1.0, "points": None, "label": None, "price": None}
    with pytest.raises(ValueError, match="Field id is not found in the row_dict, but is not nullable"):
        insert_explicit_nulls(SCHEMA, {"image": None, "score": 1.0})


def test_dict_to_spark_row_encodes_in_schema_order():
    image = np.arange(60, dtype=np.uint8).reshape(4, 5, 3)
    given = {"score": np.float64(0.25), "id": np.int64(7), "image": image, "label": "x"}
    row = dict_to_spark_row(SCHEMA, given)
    assert row.__fields__ == list(SCHEMA.fields)
    assert row.id == 7 and type(row.id) is int
    assert row.score == 0.25 and type(row.score) is float
    assert row.points is None and row.price is None and row.label == "x"
    assert SCHEMA.image.codec.decode(SCHEMA.image, row.image).tolist() == image.tolist()
    assert "points" not in given  # the input dict is left alone


def test_dict_to_spark_row_errors():
    ok = {"id": 1, "image": np.zeros((4, 5, 3), np.uint8), "score": 1.0}
    with pytest.raises(ValueError, match='Field image is not "nullable"'):
        dict_to_spark_row(SCHEMA, {**ok, "image": None})
    with pytest.raises(ValueError, match="do not match schema fields"):
        dict_to_spark_row(SCHEMA, {**ok, "extra": 1})
    with pytest.raises(TypeError, match="must be a Unischema"):
        dict_to_spark_row({"id": 1}, ok)


def test_as_spark_schema():
    assert SCHEMA.as_spark_schema() == T.StructType([
        T.StructField("id", T.LongType(), False), T.StructField("image", T.BinaryType(), False),
        T.StructField("points", T.BinaryType(), True), T.StructField("label", T.StringType(), True),
        T.StructField("score", T.DoubleType(), False), T.StructField("price", T.DecimalType(8, 2), True)])
    with pytest.raises(ValueError, match="non-scalar UnischemaField 'v' has codec set to None"):
        Unischema("S", [UnischemaField("v", np.int32, (2,))]).as_spark_schema()
    with pytest.raises(ValueError, match="Was not able to map type"):
        Unischema("S", [UnischemaField("v", np.complex64, ())]).as_spark_schema()


def test_plain_pickle_round_trip():
    # Spark pickles the schema into its tasks (dict_to_spark_row in a map function).
    schema = pickle.loads(pickle.dumps(SCHEMA))
    assert schema.fields == SCHEMA.fields and str(schema) == str(SCHEMA)
    assert schema.points is schema.fields["points"]


def test_from_arrow_schema():
    import pyarrow as pa

    arrow = pa.schema([pa.field("a", pa.int16(), nullable=False), pa.field("s", pa.string()),
                       pa.field("l", pa.list_(pa.float32())), pa.field("ll", pa.list_(pa.list_(pa.int8()))),
                       pa.field("m", pa.map_(pa.string(), pa.int8())), pa.field("d", pa.decimal128(5, 1)),
                       pa.field("t", pa.timestamp("ms"))])
    with pytest.warns(UserWarning) as warned:
        schema = Unischema.from_arrow_schema(arrow)
    assert [(f.name, f.numpy_dtype, f.shape, f.nullable) for f in schema.fields.values()] == [
        ("a", np.int16, (), False), ("s", np.str_, (), True), ("l", np.float32, (None,), True),
        ("d", Decimal, (), True), ("t", np.datetime64, (), True)]
    assert [str(w.message) for w in warned] == [
        "[ARROW-1644] Ignoring unsupported structure ListType(list<item: list<item: int8>>) for field 'll'",
        "Column 'm' has an unsupported field MapType(map<string, int8>). Ignoring..."]
    with pytest.raises(ValueError, match="unsupported column type map"):
        Unischema.from_arrow_schema(pa.schema([pa.field("m", pa.map_(pa.string(), pa.int8()))]),
                                    omit_unsupported_fields=False)


def test_from_arrow_schema_reads_the_shapes_petastorm_duck_types():
    """Petastorm read ``pieces[0].get_metadata().schema.to_arrow_schema()`` and ``partitions``
    (pyarrow's legacy ParquetDataset); objects of that shape, mocks in users' tests included,
    still work, as do a ParquetSchema-like ``schema`` and a pyarrow Schema."""
    from types import SimpleNamespace
    from unittest import mock

    import pyarrow as pa

    arrow = pa.schema([pa.field("x", pa.int8()), pa.field("h", pa.float16())])
    piece = mock.Mock()
    piece.get_metadata().schema.to_arrow_schema.return_value = arrow
    dataset = mock.Mock()
    type(dataset).pieces = mock.PropertyMock(return_value=[piece])
    type(dataset).partitions = [SimpleNamespace(name="part", dictionary=pa.array(["a", "b"])),
                                SimpleNamespace(name="n", dictionary=pa.array([0, 1]))]
    with pytest.warns(UserWarning, match="Column 'h' has an unsupported field"):  # float16: as Petastorm
        schema = Unischema.from_arrow_schema(dataset)
    assert [(f.name, f.numpy_dtype, f.nullable) for f in schema.fields.values()] == [
        ("part", np.str_, False), ("n", np.int64, False), ("x", np.int8, True)]
    with pytest.raises(ValueError, match="Cannot auto-create unischema due to unsupported column type halffloat"):
        Unischema.from_arrow_schema(arrow, omit_unsupported_fields=False)
    legacy_schema = SimpleNamespace(schema=SimpleNamespace(to_arrow_schema=lambda: arrow.remove(1)))
    assert list(Unischema.from_arrow_schema(legacy_schema).fields) == ["x"]


def test_legacy_alphabetical_field_order_switch():
    """Petastorm's ``unischema._UNISCHEMA_FIELD_ORDER = 'alphabetical'`` (its deprecated legacy
    order, set by scripts and tests with mock.patch) sorts a schema's fields and namedtuples by
    name; the default keeps the input order. Orders recorded from Petastorm 0.13.1."""
    from unittest import mock

    from petastream.compat import unischema

    def schema():
        return unischema.Unischema("S", [unischema.UnischemaField(n, t, (), None, False)
                                         for n, t in (("zeta", np.int32), ("alpha", np.float32), ("mid", np.int64))])

    with mock.patch("petastream.compat.unischema._UNISCHEMA_FIELD_ORDER", "alphabetical"):
        legacy = schema()
        assert list(legacy.fields) == ["alpha", "mid", "zeta"]
        assert repr(legacy.make_namedtuple(zeta=1, alpha=2.0, mid=3)) == "S_view(alpha=2.0, mid=3, zeta=1)"
        view = legacy.create_schema_view([legacy.fields["zeta"], legacy.fields["mid"]])
        assert view.make_namedtuple(zeta=1, mid=3)._fields == ("mid", "zeta")
    default = schema()
    assert list(default.fields) == ["zeta", "alpha", "mid"]
    assert repr(default.make_namedtuple(zeta=1, alpha=2.0, mid=3)) == "S_view(zeta=1, alpha=2.0, mid=3)"
