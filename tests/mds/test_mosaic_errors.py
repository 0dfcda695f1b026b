"""Issue #29.8: bad input to the encodings and the writer raises what Mosaic Streaming raises.

Each case names the builtin Mosaic 0.13 raises for the same input and the sentence its message
carries (found by running Mosaic's encoders and ``MDSWriter`` on each input). Ours must be
catchable as that builtin, carry that sentence, and still be a ``PetastreamError``.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import re

import numpy as np
import pytest

import petastream
from petastream.errors import (
    EncodedSizeError,
    EncodingError,
    EncodingOverflowError,
    EncodingTypeError,
    MissingColumnError,
    PetastreamError,
    UnexpectedArgumentError,
    UnknownEncodingError,
)
from petastream.mds.encodings import encode_value, get_encoding
from petastream.mds.writer import MDSWriter

Image = pytest.importorskip("PIL.Image")


def _img():
    return Image.new("RGB", (8, 8))


def _jpeg() -> bytes:
    buf = io.BytesIO()
    _img().save(buf, format="JPEG")
    return buf.getvalue()


def _should(expected: str, found: str) -> str:
    return f"data should be of type <class '{expected}'>, but instead, found as <class '{found}'>"


# (encoding, value, the builtin Mosaic raises, the sentence in its message)
ENCODE_CASES = [
    ("bytes", lambda: "9", AttributeError, _should("bytes", "str")),
    ("bytes", lambda: 25, AttributeError, _should("bytes", "int")),
    ("str", lambda: b"9", AttributeError, _should("str", "bytes")),
    ("str", lambda: 25, AttributeError, _should("str", "int")),
    ("int", lambda: b"9", AttributeError, _should("int", "bytes")),
    ("int", lambda: 25.9, AttributeError, _should("int", "float")),
    ("int", lambda: "27", AttributeError, _should("int", "str")),
    ("str_int", lambda: 2.5, AttributeError, _should("int", "float")),
    ("str_float", lambda: 3, AttributeError, _should("float", "int")),
    ("str_decimal", lambda: 1.5, AttributeError, _should("decimal.Decimal", "float")),
    ("pil", lambda: b"9", AttributeError, _should("PIL.Image.Image", "bytes")),
    ("pil", lambda: 25.9, AttributeError, _should("PIL.Image.Image", "float")),
    ("jpeg", lambda: b"99", AttributeError, _should("PIL.Image.Image", "bytes")),
    ("jpeg", lambda: 12.5, AttributeError, _should("PIL.Image.Image", "float")),
    ("png", lambda: b"123", AttributeError, _should("PIL.Image.Image", "bytes")),
    ("png", lambda: 77.7, AttributeError, _should("PIL.Image.Image", "float")),
    ("list[jpeg]", lambda: b"invalid", AttributeError, _should("list", "bytes")),
    ("list[jpeg]", lambda: 123, AttributeError, _should("list", "int")),
    ("list[jpeg]", lambda: None, AttributeError, _should("list", "NoneType")),
    ("list[jpeg]", _img, AttributeError, _should("list", "PIL.Image.Image")),
    ("list[pil]", lambda: [b"x"], AttributeError, _should("PIL.Image.Image", "bytes")),
    ("jpeg_array", lambda: b"invalid", TypeError, _should("list", "bytes")),
    ("jpeg_array", lambda: 123, TypeError, _should("list", "int")),
    ("jpeg_array", lambda: None, TypeError, _should("list", "NoneType")),
    ("jpeg_array", _img, TypeError, _should("list", "PIL.Image.Image")),
    ("jpeg_array", lambda: [_img()], TypeError, "found as <class 'PIL.Image.Image'>"),
    ("json", lambda: {1, 2}, TypeError, "Object of type set is not JSON serializable"),
    ("ndarray", lambda: "abc", AttributeError, _should("numpy.ndarray", "str")),
    ("ndarray", lambda: None, AttributeError, _should("numpy.ndarray", "NoneType")),
    ("uint8", lambda: None, TypeError, "not 'NoneType'"),
    ("int", lambda: 2**70, OverflowError, "Python int too large to convert to C long"),
    ("int64", lambda: 2**70, OverflowError, "Python int too large to convert to C long"),
    ("uint8", lambda: 300, OverflowError, "out of bounds for uint8"),  # numpy 1 wraps it around
    ("ndarray", lambda: np.array([]), ValueError, "Attempting to encode a numpy array with 0 elements."),
    ("ndarray:int32", lambda: np.zeros((0, 3), np.int32), ValueError,
     "Attempting to encode a numpy array with 0 elements."),
    ("ndarray", lambda: np.array(0.5), ValueError, "Attempting to encode a scalar with NDArray encoding."),
    ("ndarray", lambda: np.empty(()), ValueError, "Attempting to encode a scalar with NDArray encoding."),
    ("ndarray", lambda: np.array(1), ValueError, "Attempting to encode a scalar with NDArray encoding."),
    ("ndarray", lambda: np.array(["a"]), ValueError, "Unsupported dtype: str32."),
    ("ndarray", lambda: np.array([True]), ValueError, "Unsupported dtype: bool."),
    ("ndarray:int32", lambda: np.zeros(3, np.float32), ValueError, "Wrong dtype: expected int32, got float32."),
    ("ndarray:int32:2,3", lambda: np.zeros((3, 2), np.int32), ValueError,
     "Wrong shape: expected (2, 3), got (3, 2)."),
]


@pytest.mark.parametrize("name, make, builtin, sentence", ENCODE_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(ENCODE_CASES)])
def test_encoding_errors_are_mosaics_builtins_with_its_sentence(name, make, builtin, sentence):
    with pytest.raises(builtin, match=re.escape(sentence)) as info:
        get_encoding(name).encode(make())
    assert isinstance(info.value, EncodingError)  # a PetastreamError and a ValueError as well
    if not isinstance(make(), bytes):  # a bytes value is written unchanged by mds_encode's rule
        with pytest.raises(builtin, match=re.escape(sentence)):
            encode_value(get_encoding(name), make())


@pytest.mark.parametrize("name, make, builtin, sentence", [
    ("str", lambda: 5, AttributeError, _should("str", "int")),
    ("ndarray:int32", lambda: np.zeros(2), ValueError, "Wrong dtype: expected int32, got float64."),
    ("int", lambda: 2**70, OverflowError, "too large"),
    ("int", lambda: b"abc", KeyError, "Unexpected data size; was this data typed with the correct encoding (int)?"),
])
def test_writer_keeps_the_error_class_and_names_the_column(tmp_path, name, make, builtin, sentence):
    with pytest.raises(builtin, match=re.escape(sentence)) as info:
        with MDSWriter(columns={"x": name}, out=str(tmp_path / "ds")) as w:
            w.write({"x": make()})
    assert isinstance(info.value, PetastreamError) and "column 'x'" in str(info.value)
    assert not os.path.exists(tmp_path / "ds" / "index.json")


@pytest.mark.parametrize("columns, sentence", [
    ({"x": "foo"}, "MDSWriter passed column `x` with encoding `foo` is unsupported."),
    ({"x": "ndarray:foo"}, "MDSWriter passed column `x` with encoding `ndarray:foo` is unsupported."),
    ({"x": "ndarray:int32:0"}, "is unsupported."),
    ({"x": "int:3"}, "is unsupported."),
])
def test_unsupported_encoding_is_a_type_error(tmp_path, columns, sentence):
    with pytest.raises(TypeError, match=re.escape(sentence)) as info:
        MDSWriter(columns=columns, out=str(tmp_path))
    assert isinstance(info.value, UnknownEncodingError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize("size_limit, sentence", [
    (2**32, "`size_limit` must be less than 2**32, instead, found as 4294967296."),
    (-1, "`size_limit` must be greater than zero, instead, found as -1."),
])
def test_size_limit_errors_carry_mosaics_sentence(tmp_path, size_limit, sentence):
    with pytest.raises(ValueError, match=re.escape(sentence)):
        MDSWriter(columns={"x": "int"}, out=str(tmp_path), size_limit=size_limit)


def test_unknown_writer_argument_is_a_value_error_and_a_type_error(tmp_path):
    with pytest.raises(ValueError, match=re.escape("Invalid Writer argument(s): ['min_workers']")) as info:
        MDSWriter(columns={"x": "int"}, out=str(tmp_path), min_workers=1)
    assert isinstance(info.value, TypeError) and isinstance(info.value, UnexpectedArgumentError)
    MDSWriter(columns={"x": "int"}, out=str(tmp_path / "ok"), keep_local=True, progress_bar=False,
              max_workers=2, retry=1).finish()  # Mosaic's own keyword arguments are taken


def test_non_empty_out_is_file_exists_with_mosaics_sentence(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(FileExistsError, match="Directory is not empty: .*exist_ok=True"):
        MDSWriter(columns={"x": "int"}, out=str(tmp_path))


def test_missing_column_is_a_key_error_and_extra_keys_are_ignored_as_mosaic(tmp_path):
    out = str(tmp_path / "ds")
    with MDSWriter(columns={"x": "int", "y": "str"}, out=out) as w:
        with pytest.raises(KeyError) as info:
            w.write({"x": 1})
        assert isinstance(info.value, MissingColumnError)
        assert str(info.value).startswith("sample columns do not match the writer's: missing ['y']")
        w.write({"x": 2, "y": "b", "extra": object()})
        with pytest.raises(KeyError):
            w.write_columns({"x": np.arange(2)})
    ds = petastream.open(out)
    assert ds.columns == {"x": "int", "y": "str"} and ds[0] == {"x": 2, "y": "b"}


def test_write_takes_a_dict(tmp_path):
    with MDSWriter(columns={"x": "int"}, out=str(tmp_path)) as w:
        with pytest.raises(TypeError, match="takes a dict of column -> value, got list"):
            w.write([1])


@pytest.mark.parametrize("kwargs, hashes", [({"hashes": None}, []), ({}, ["xxh3_64"])])
def test_get_config_is_mosaics(tmp_path, kwargs, hashes):
    w = MDSWriter(columns={"s": "str", "a": "ndarray:int16:2,3", "i": "int"}, out=str(tmp_path),
                  compression=None, size_limit=32, **kwargs)
    config = w.get_config()
    assert config == {"version": 2, "format": "mds", "compression": None, "hashes": hashes,
                      "size_limit": 32, "column_names": ["a", "i", "s"],
                      "column_encodings": ["ndarray:int16:2,3", "int", "str"], "column_sizes": [12, 8, None]}
    config["column_names"].append("z")  # a copy: the writer's own config is unchanged
    assert w.get_config()["column_names"] == ["a", "i", "s"]
    w.write({"s": "x", "a": np.zeros((2, 3), np.int16), "i": 1})
    w.finish()
    with open(tmp_path / "index.json") as f:
        shards = json.load(f)["shards"]
    assert shards and all({k: s[k] for k in config} == w.get_config() for s in shards)


def test_jpeg_array_takes_any_bytes_like(tmp_path):
    """Issue #29.8: a list of bytearray (what Mosaic's own tests write) was refused."""
    raw = _jpeg()
    enc = get_encoding("jpeg_array")
    as_bytes = enc.encode([raw, raw, raw])
    assert enc.encode([bytearray(raw), memoryview(raw), raw]) == as_bytes
    assert enc.encode((bytearray(raw),) * 3) == as_bytes
    with MDSWriter(columns={"imgs": "jpeg_array"}, out=str(tmp_path)) as w:
        w.write({"imgs": [bytearray(raw), bytearray(raw)]})
    (imgs,) = petastream.open(str(tmp_path))[0].values()
    assert [im.size for im in imgs] == [(8, 8), (8, 8)]


@pytest.mark.parametrize("cls, builtins", [
    (EncodingTypeError, (ValueError, TypeError, AttributeError)),
    (EncodingOverflowError, (ValueError, OverflowError)),
    (EncodedSizeError, (ValueError, KeyError)),
    (MissingColumnError, (ValueError, KeyError)),
    (UnknownEncodingError, (ValueError, TypeError)),
    (UnexpectedArgumentError, (ValueError, TypeError)),
])
def test_new_error_classes_pickle_and_print_their_message(cls, builtins):
    error = pickle.loads(pickle.dumps(cls("column 'x': what went wrong")))
    assert type(error) is cls and isinstance(error, (PetastreamError, *builtins))
    assert all(isinstance(error, b) for b in builtins)
    assert str(error) == "column 'x': what went wrong"  # not quoted, even as a KeyError
