"""Every encoding: exact bytes where Mosaic pins them, round trips, errors."""

from __future__ import annotations

import re
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

from petastream.columns.ragged import Ragged
from petastream.errors import EncodingError, FormatError, UnsafeEncodingError
from petastream.mds.encodings import (
    encode_value,
    get_encoding,
    get_mds_encoded_size,
    get_mds_encodings,
    is_mds_encoding,
)

MOSAIC_28 = set(
    "bytes str int ndarray uint8 uint16 uint32 uint64 int8 int16 int32 int64 float16 float32 "
    "float64 str_int str_float str_decimal pil jpeg jpeg_array jpegarray png list[pil] list[jpeg] "
    "list[png] pkl json".split()
)


def test_the_encoding_set_is_mosaics():
    assert get_mds_encodings() == MOSAIC_28


@pytest.mark.parametrize(
    "name, value, data",
    [
        ("uint16", 42, b"*\0"),
        ("float16", 42.0, b"@Q"),
        ("float32", 42.0, b"\0\0(B"),
        ("float64", 42.0, b"\0\0\0\0\0\0E@"),
        ("int", -1, b"\xff" * 8),
        ("int32", -1, b"\xff\xff\xff\xff"),
        ("uint8", 3.7, b"\x03"),  # numpy cast, as Mosaic
        ("str", "héllo", "héllo".encode()),
        ("str_int", -12, b"-12"),
        ("str_float", 1e16, b"1e+16"),
        ("str_decimal", Decimal("1.10"), b"1.10"),
        ("json", {"a": [1, float("nan")]}, b'{"a": [1, NaN]}'),
    ],
)
def test_exact_bytes(name, value, data):
    enc = get_encoding(name)
    assert encode_value(enc, value) == data
    back = enc.decode(data)
    if name == "json":
        assert back["a"][0] == 1 and np.isnan(back["a"][1])
    elif name != "uint8":
        assert back == value


def test_decode_types_follow_mosaic():
    assert type(get_encoding("int").decode(b"\1" + b"\0" * 7)) is int
    assert type(get_encoding("uint8").decode(b"\1")) is np.uint8
    assert type(get_encoding("float64").decode(b"\0" * 8)) is np.float64
    assert type(get_encoding("str_decimal").decode(b"1")) is Decimal


def test_bytes_value_is_written_unchanged_for_any_encoding():
    assert encode_value(get_encoding("str"), b"\xff\xfe") == b"\xff\xfe"
    with pytest.raises(EncodingError, match="exactly 4 bytes"):
        encode_value(get_encoding("int32"), b"\0")


def test_ndarray_layout_example_from_the_spec():
    arr = np.arange(2, dtype=np.int16).reshape(1, 2)
    data = get_encoding("ndarray").encode(arr)
    assert data == bytes([17, (2 << 2) | 0, 1, 2]) + b"\0\0\1\0"
    back = get_encoding("ndarray").decode(data)
    assert back.dtype == np.int16 and back.shape == (1, 2)


@pytest.mark.parametrize(
    "name, size", [("ndarray:float32:3", 12), ("ndarray:uint8:32,32,3", 3072), ("ndarray:float32", None),
                   ("int", 8), ("str", None), ("float16", 2)]
)
def test_encoded_sizes(name, size):
    assert get_mds_encoded_size(name) == size


@pytest.mark.parametrize("name", ["ndarray", "ndarray:int64", "ndarray:int64:2,3"])
def test_ndarray_round_trip(name):
    arr = np.arange(6, dtype=np.int64).reshape(2, 3)
    enc = get_encoding(name)
    np.testing.assert_array_equal(enc.decode(enc.encode(arr)), arr)


def test_ndarray_shape_codes_widen_with_the_largest_dimension():
    enc = get_encoding("ndarray:uint8")
    data = enc.encode(np.zeros(300, np.uint8))
    assert data[0] == (1 << 2) | 1 and data[1:3] == (300).to_bytes(2, "little")


@pytest.mark.parametrize(
    "name, value, match",
    [
        ("ndarray", np.zeros(0, np.int32), "numpy array with 0 elements"),
        ("ndarray", np.int32(3), "scalar with NDArray encoding"),
        ("ndarray", np.zeros(2, np.bool_), "Unsupported dtype: bool"),
        ("ndarray:float32", np.zeros(2, np.float64), "Wrong dtype"),
        ("ndarray:float32:3", np.zeros(2, np.float32), "Wrong shape"),
        ("int", "12", "encoding 'int': data should be of type <class 'int'>"),
        ("str", 5, "encoding 'str': data should be of type <class 'str'>"),
        ("str_decimal", 1.5, "Decimal"),
    ],
)
def test_bad_values_are_named(name, value, match):
    with pytest.raises(EncodingError, match=re.escape(match)):
        encode_value(get_encoding(name), value)


def test_bad_names():
    with pytest.raises(FormatError, match="unknown MDS encoding 'float128'"):
        get_encoding("float128")
    with pytest.raises(FormatError, match="only 'ndarray' takes"):
        get_encoding("int:3")
    with pytest.raises(FormatError, match="a shape needs a dtype"):
        get_encoding("ndarray::3")
    assert not is_mds_encoding("nope") and is_mds_encoding("ndarray:float16:1,2")


def test_pkl_is_refused_unless_allowed():
    with pytest.raises(UnsafeEncodingError, match="allow_unsafe_types=True"):
        get_encoding("pkl", allow_unsafe=False)
    enc = get_encoding("pkl", allow_unsafe=True)
    assert enc.decode(enc.encode({"a": (1, 2)})) == {"a": (1, 2)}


def test_bulk_str_and_bytes_columns_match_per_sample():
    for name, values in [("str", ["", "a", "héllo", "x" * 1000]), ("bytes", [b"", b"\0\1", b"z" * 70])]:
        enc = get_encoding(name)
        offsets, data = enc.encode_column(np.array(values, dtype=object))
        assert data.tobytes() == b"".join(enc.encode(v) for v in values)
        assert list(enc.decode_column(offsets, data)) == values
        # Arrow input (with a sliced offset) gives the same bytes
        arr = pa.array(["pad", *values] if name == "str" else [b"pad", *values])[1:]
        o2, d2 = enc.encode_column(arr)
        assert d2.tobytes() == data.tobytes() and list(o2) == list(offsets)


def test_bulk_invalid_utf8_is_an_error():
    with pytest.raises(EncodingError, match="not valid UTF-8"):
        get_encoding("str").decode_column(np.array([0, 2]), np.frombuffer(b"\xff\xfe", np.uint8))


def test_bulk_ragged_ndarray_matches_per_sample():
    rng = np.random.default_rng(0)
    values = [rng.random(int(k)).astype(np.float32) for k in [1, 5, 300, 70000, 2]]
    for name in ("ndarray", "ndarray:float32"):
        enc = get_encoding(name)
        offsets, data = enc.encode_column(pa.array(values, type=pa.list_(pa.float32())))
        assert data.tobytes() == b"".join(enc.encode(v) for v in values)
        col = enc.decode_column(offsets, data)
        assert isinstance(col, Ragged) and len(col) == len(values)
        for a, b in zip(col.to_list(), values):
            np.testing.assert_array_equal(a, b)


def test_image_encodings_round_trip():
    Image = pytest.importorskip("PIL.Image")
    img = Image.frombytes("RGB", (4, 3), bytes(range(36)))
    for name in ("pil", "png"):
        enc = get_encoding(name)
        assert enc.decode(enc.encode(img)).tobytes() == img.tobytes()
    jpeg = get_encoding("jpeg").decode(get_encoding("jpeg").encode(img))
    assert jpeg.size == (4, 3) and jpeg.mode == "RGB"
    lst = get_encoding("list[png]")
    assert [i.tobytes() for i in lst.decode(lst.encode([img, img]))] == [img.tobytes()] * 2
    arr = get_encoding("jpeg_array")
    raw = get_encoding("jpeg").encode(img)
    assert len(arr.decode(arr.encode([raw, raw]))) == 2
    with pytest.raises(EncodingError, match="at least one image"):
        arr.encode([])  # Mosaic writes it, and then cannot decode it
    with pytest.raises(EncodingError, match="holds no images"):
        arr.decode(b"\x00\x00\x00\x00")
