"""petastream.mds.arrow_numpy: Arrow buffers read as numpy, equal to pyarrow's own conversion,
slices (non-zero offsets) and nulls included, and none of them imports pandas."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from petastream.mds import arrow_numpy

# The numpy dtype beside each type: DataType.to_pandas_dtype imports pandas on old pyarrow, and
# the minimum-versions run has no pandas.
PRIMITIVES = [(pa.int8(), np.int8), (pa.int16(), np.int16), (pa.int32(), np.int32), (pa.int64(), np.int64),
              (pa.uint8(), np.uint8), (pa.uint16(), np.uint16), (pa.uint32(), np.uint32), (pa.uint64(), np.uint64),
              (pa.float16(), np.float16), (pa.float32(), np.float32), (pa.float64(), np.float64)]


@pytest.mark.parametrize("t, dtype", PRIMITIVES, ids=lambda x: str(x) if isinstance(x, pa.DataType) else "")
@pytest.mark.parametrize("start", [0, 3])
def test_values_of_a_primitive_array_and_its_slices(t, dtype, start):
    arr = pa.array(np.arange(20).astype(dtype), t).slice(start, 11)
    got = arrow_numpy.values(arr)
    assert got.dtype == arr.to_numpy().dtype
    np.testing.assert_array_equal(got, arr.to_numpy())


@pytest.mark.parametrize("start", [0, 1, 5, 8, 13])
def test_booleans_unpacked_from_bits_at_any_offset(start):
    bits = [bool(x) for x in np.random.default_rng(0).integers(0, 2, 40)]
    arr = pa.array(bits).slice(start, 19)
    np.testing.assert_array_equal(arrow_numpy.values(arr), bits[start:start + 19])
    assert arrow_numpy.values(arr).dtype == np.bool_


def test_validity_and_null_slots():
    arr = pa.array([1, None, 3, None, 5, 6, None], pa.int64()).slice(1, 5)
    np.testing.assert_array_equal(arrow_numpy.validity(arr), [False, True, False, True, True])
    np.testing.assert_array_equal(arrow_numpy.values(arr)[[1, 3, 4]], [3, 5, 6])
    assert arrow_numpy.validity(pa.array([1, 2])) is None


@pytest.mark.parametrize("large", [False, True])
def test_list_lengths_of_slices_and_null_rows(large):
    t = pa.large_list(pa.float32()) if large else pa.list_(pa.float32())
    arr = pa.array([[1.0], [], [1.0, 2.0, 3.0], None, [4.0, 5.0]], t)
    np.testing.assert_array_equal(arrow_numpy.list_lengths(arr), [1, 0, 3, 0, 2])
    np.testing.assert_array_equal(arrow_numpy.list_lengths(arr.slice(2, 3)), [3, 0, 2])
    assert arrow_numpy.list_lengths(arr.slice(5, 0)).tolist() == []


@pytest.mark.parametrize("large", [False, True])
def test_list_values_equal_flatten(large):
    t = pa.large_list(pa.int32()) if large else pa.list_(pa.int32())
    arr = pa.array([[1, 2], [3], [], [4, 5, 6], [7]], t)
    for start, length in [(0, 5), (1, 3), (3, 2), (2, 1), (5, 0)]:
        part = arr.slice(start, length)
        assert arrow_numpy.list_values(part).equals(part.flatten())
    with_nulls = pa.array([[1], None, [2, 3]], t)
    assert arrow_numpy.list_values(with_nulls).to_pylist() == [1, 2, 3]


def test_empty_arrays():
    assert arrow_numpy.values(pa.array([], pa.float32())).tolist() == []
    assert arrow_numpy.values(pa.array([], pa.bool_())).tolist() == []


def test_other_types_fall_back_to_pyarrow():
    arr = pa.array(["a", "b"])
    assert arrow_numpy.values(arr).tolist() == ["a", "b"]


def test_the_made_values_equal_pyarrows():
    assert arrow_numpy.empty_large_binary() == pa.scalar(b"", pa.large_binary())
    schema = pa.schema([("a", pa.int32()), ("b", pa.string()), ("c", pa.float64()), ("d", pa.int64())])
    got = arrow_numpy.record_batch({"a": (pa.int32(), [7]), "b": (pa.string(), ["héllo"]),
                                    "c": (pa.float64(), [0.5]), "d": (pa.int64(), [1 << 40])})
    assert got.equals(pa.RecordBatch.from_pydict({"a": [7], "b": ["héllo"], "c": [0.5], "d": [1 << 40]},
                                                 schema=schema))
    empty = arrow_numpy.record_batch({"b": (pa.string(), [""])})
    assert empty.column(0).to_pylist() == [""]


def test_none_of_them_imports_pandas():
    code = (
        "import sys, numpy as np, pyarrow as pa\n"
        "from petastream.mds import arrow_numpy as a\n"
        "f = pa.Array.from_buffers(pa.float32(), 4, [None, pa.py_buffer(np.ones(4, np.float32))])\n"
        "o = pa.Array.from_buffers(pa.int32(), 3, [None, pa.py_buffer(np.array([0, 1, 4], np.int32))])\n"
        "lst = pa.ListArray.from_arrays(o, f)\n"
        "a.values(f); a.list_lengths(lst); a.validity(lst); a.list_values(lst); a.empty_large_binary()\n"
        "a.record_batch({'x': (pa.int64(), [1]), 's': (pa.string(), ['y'])})\n"
        "assert 'pandas' not in sys.modules, 'pandas was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_list_values_of_fixed_size_lists():
    arr = pa.array([[1, 2], [3, 4], [5, 6]], pa.list_(pa.int64(), 2)).slice(1, 2)
    assert arrow_numpy.list_values(arr).to_pylist() == [3, 4, 5, 6]


def test_record_batch_names_the_type_it_cannot_make():
    from petastream.errors import InvalidArgumentTypeError

    with pytest.raises(InvalidArgumentTypeError, match="column type bool is not supported; use int32"):
        arrow_numpy.record_batch({"b": (pa.bool_(), [True])})
