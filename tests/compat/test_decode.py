"""petastream.compat._decode: columns of a Unischema batch, decoded in bulk."""

from __future__ import annotations

import io
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

from petastream.compat import _decode
from petastream.compat.codecs import CompressedNdarrayCodec, NdarrayCodec, ScalarCodec
from petastream.compat.unischema import Unischema, UnischemaField
from petastream.compat.utils import DecodeFieldError, decode_row
from petastream.errors import InvalidArgumentError


def _npy(value: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, value)
    return out.getvalue()


def _field(shape=(2, 3), dtype=np.float32, codec=None, nullable=False):
    return UnischemaField("f", dtype, shape, codec or NdarrayCodec(), nullable)


@pytest.fixture
def no_per_row_decode(monkeypatch):
    def refuse(self, field, value):
        raise AssertionError("decoded row by row")

    monkeypatch.setattr(NdarrayCodec, "decode", refuse)


def test_equal_headers_decode_in_bulk(no_per_row_decode):
    values = [np.arange(6, dtype=np.float32).reshape(2, 3) * i for i in range(50)]
    column = _decode.decode_column(_field(), pa.array([_npy(v) for v in values], pa.binary()))
    assert column.shape == (50, 2, 3) and column.dtype == np.float32 and column.flags.c_contiguous
    assert np.array_equal(column, np.stack(values))
    assert column.flags.writeable


@pytest.mark.parametrize("array_type", [pa.binary(), pa.large_binary()])
def test_bulk_of_a_slice_and_of_chunks(no_per_row_decode, array_type):
    values = [np.full((3,), i, dtype=">i2") for i in range(10)]  # big-endian, as np.load keeps it
    array = pa.array([_npy(v) for v in values], array_type)
    sliced = _decode.decode_column(_field((3,), np.int16), array.slice(3, 4))
    assert sliced.dtype == np.dtype(">i2") and np.array_equal(sliced, np.stack(values[3:7]))
    chunked = pa.chunked_array([array.slice(0, 4), array.slice(4)])
    assert np.array_equal(_decode.decode_column(_field((3,), np.int16), chunked), np.stack(values))


@pytest.mark.parametrize("values", [
    [np.zeros((2, 3), np.float32), np.ones((3, 2), np.float32)],            # same length, other shape
    [np.zeros(4, np.int32), np.zeros(4, np.float32)],                       # same length, other dtype
    [np.asfortranarray(np.arange(6).reshape(2, 3))] * 2,                    # Fortran order
    [np.zeros(2, np.uint8), np.zeros(5, np.uint8)],                         # other length
])
def test_rows_that_differ_decode_one_by_one(values):
    column = _decode.decode_column(_field((None, None)), pa.array([_npy(v) for v in values]))
    decoded = list(column)
    for got, want in zip(decoded, values):
        assert got.dtype == want.dtype and np.array_equal(got, want)
    if column.dtype == object:
        assert len(column) == len(values)


def test_nulls_and_empty():
    field = _field((2,), np.int64, nullable=True)
    column = _decode.decode_column(field, pa.array([_npy(np.array([1, 2])), None], pa.binary()))
    assert column.dtype == object and column[1] is None and column[0].tolist() == [1, 2]
    empty = _decode.decode_column(field, pa.array([], pa.binary()))
    assert empty.shape == (0, 2) and empty.dtype == np.int64
    assert _decode.decode_column(_field((None,)), pa.chunked_array([], pa.binary())).dtype == object


def test_compressed_ndarrays_stack_when_uniform():
    field = UnischemaField("c", np.int32, (None,), CompressedNdarrayCodec(), False)
    values = [np.arange(3, dtype=np.int32) + i for i in range(3)]
    encoded = [bytes(field.codec.encode(field, v)) for v in values]
    assert np.array_equal(_decode.decode_column(field, pa.array(encoded)), np.stack(values))


def test_scalars_as_petastorm_casts_them():
    def col(dtype, array, spark_type=None):
        codec = ScalarCodec(spark_type) if spark_type is not None else None
        return _decode.decode_column(UnischemaField("s", dtype, (), codec, True), array)

    import pyspark.sql.types as T

    ints = col(np.int8, pa.array([1, 2], pa.int16()), T.ShortType())
    assert ints.dtype == np.int8
    with_null = col(np.int32, pa.array([1, None, 3], pa.int32()))
    assert [type(v) for v in with_null] == [np.int32, type(None), np.int32]
    floats = col(np.float32, pa.array([0.5, None], pa.float64()))
    assert floats.dtype == np.float32 and np.isnan(floats[1])  # pandas turned Petastorm's null into NaN
    strings = col(np.str_, pa.array(["a", None, "ccc"]))
    assert [type(v) for v in strings] == [np.str_, type(None), np.str_]
    assert col(np.str_, pa.array(["a", "bb"])).dtype == np.dtype("<U2")
    decimals = col(Decimal, pa.array([Decimal("1.50"), None], pa.decimal128(5, 2)))
    assert decimals.tolist() == [Decimal("1.50"), None]
    stamps = col(np.datetime64, pa.array([1_500_000_000_123_456_789, None], pa.timestamp("ns")))
    assert stamps[0] == np.datetime64("2017-07-14T02:40:00.123456", "us") and stamps[1] is None
    days = col(np.datetime64, pa.array([0, 1], pa.date32()))
    assert days.dtype == np.dtype("datetime64[D]")
    as_is = col(str, pa.array(["x", None]))  # not a numpy type: handed over as stored
    assert as_is.tolist() == ["x", None] and type(as_is[0]) is str
    dictionary = col(np.str_, pa.array(["p", "q", "p"]).dictionary_encode())  # a partition column
    assert dictionary.tolist() == ["p", "q", "p"]


def test_list_columns_of_an_inferred_schema():
    field = UnischemaField("l", np.int32, (None,), None, True)
    dense = _decode.decode_column(field, pa.array([[1, 2], [3, 4]], pa.list_(pa.int64())))
    assert dense.dtype == np.int32 and dense.shape == (2, 2)
    ragged = _decode.decode_column(field, pa.array([[1], None, [2, 3]]))
    assert ragged[0].tolist() == [1] and ragged[1] is None and ragged[2].dtype == np.int32


def test_decode_table_and_rows():
    schema = Unischema("T", [UnischemaField("id", np.int64, (), None, False),
                             UnischemaField("v", np.float32, (2,), NdarrayCodec(), False)])
    table = pa.table({"id": [1, 2], "v": [_npy(np.zeros(2, np.float32)), _npy(np.ones(2, np.float32))],
                      "other": [0, 0]})
    columns = _decode.decode_table(schema, table)
    assert list(columns) == ["id", "v"]
    rows = _decode.make_rows(schema, columns)
    assert type(rows[0]) is schema._get_namedtuple() and type(rows[1].id) is np.int64
    assert rows[1].v.tolist() == [1.0, 1.0]
    with pytest.raises(InvalidArgumentError, match=r"fields \['v'\] of schema 'T' are not in the Parquet batch"):
        _decode.decode_table(schema, table.drop_columns(["v"]))


def test_decode_failure_names_the_field():
    field = UnischemaField("broken", np.float32, (2,), NdarrayCodec(), False)
    with pytest.raises(DecodeFieldError, match='Decoding field "broken" failed'):
        _decode.decode_column(field, pa.array([b"not an npy file"]))
    schema = Unischema("T", [field])
    with pytest.raises(DecodeFieldError, match='Decoding field "broken" failed'):
        decode_row({"broken": b"nope", "ignored": 1}, schema)
    assert decode_row({"broken": None}, schema) == {"broken": None}
