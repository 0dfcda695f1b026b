"""Types: a Parquet read gives what an MDS read of the same values gives; nulls; edge types."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from petastream.columns.ragged import Ragged
from petastream.errors import EncodingError
from petastream.mds.dataset import MDSDataset
from petastream.mds.writer import write_mds
from petastream.parquet import open_parquet
from petastream.spark import NullValuesError, UnsupportedColumnError
from tests.parquet.conftest import N
from tests.parquet.helpers import assert_same

NS_PER_DAY = 86_400 * 10**9


def _mds_columns(data) -> tuple[dict, dict]:
    """The table's values as the MDS path writes them (dates and timestamps as int64 ns,
    lists of strings as JSON), and their encodings."""
    cols = {name: data.column(name) for name in data.column_names}
    cols["day"] = data.column("day").cast(pa.int32()).to_numpy().astype(np.int64) * NS_PER_DAY
    cols["ts"] = data.column("ts").cast(pa.int64()).to_numpy() * 1000
    cols["dec"] = np.asarray(data.column("dec").to_pylist(), dtype=object)
    cols["tags"] = np.asarray([json.dumps(v).encode() for v in data.column("tags").to_pylist()], dtype=object)
    encodings = {"id": "int64", "i8": "int8", "u16": "uint16", "f32": "float32", "f64": "float64",
                 "flag": "uint8", "s": "str", "raw": "bytes", "dec": "str_decimal", "day": "int64",
                 "ts": "int64", "vec": "ndarray:float32:4", "ragged": "ndarray:int32", "tags": "json"}
    return cols, encodings


@pytest.fixture(scope="module")
def mds(tmp_path_factory, data):
    url = str(tmp_path_factory.mktemp("mds") / "ds")
    cols, encodings = _mds_columns(data)
    write_mds(cols, url, columns=encodings, size_limit=3000, compression=None)
    return MDSDataset(url)


@pytest.mark.parametrize("strings", ["objects", "ragged"])
def test_a_parquet_read_is_an_mds_read_of_the_same_values(pq_dir, mds, strings):
    src = open_parquet(pq_dir)
    assert src.columns == mds.columns
    src.strings = mds.strings = strings
    rng = np.random.default_rng(7)
    for ids in (rng.integers(0, N, 257), np.arange(N), np.array([3])):
        assert_same(src.read(ids), mds.read(ids))


def test_timestamp_and_date_units(tmp_path):
    when = [dt.datetime(1970, 1, 1, 0, 0, 1), dt.datetime(2262, 4, 11), dt.datetime(1677, 9, 22)]
    tab = pa.table({
        "s": pa.array(when, pa.timestamp("s")), "ms": pa.array(when, pa.timestamp("ms", tz="Europe/Paris")),
        "ns": pa.array(when, pa.timestamp("ns")), "d64": pa.array([dt.date(1970, 1, 2)] * 3, pa.date64()),
    })
    path = str(tmp_path / "t.parquet")
    pq.write_table(tab, path, coerce_timestamps=None, version="2.6")
    got = open_parquet(path).read(np.arange(3))
    want = [int((w - dt.datetime(1970, 1, 1)).total_seconds()) * 10**9 for w in when]
    for name in ("s", "ms", "ns"):
        assert got[name].dtype == np.int64 and got[name].tolist() == want, name
    assert got["d64"].tolist() == [NS_PER_DAY] * 3
    far = pa.table({"d": pa.array([dt.date(3000, 1, 1)], pa.date32())})
    pq.write_table(far, str(tmp_path / "far.parquet"))
    with pytest.raises(EncodingError, match="column 'd' .* out of range for int64 nanoseconds"):
        open_parquet(str(tmp_path / "far.parquet")).read(np.arange(1))


def test_other_arrow_layouts(tmp_path):
    tab = pa.table({
        "cat": pa.array(["a", "b", "a"]).dictionary_encode(),
        "big": pa.array(["x", "yy", ""], pa.large_string()),
        "fixed": pa.array([b"ab", b"cd", b"ef"], pa.binary(2)),
        "bools": pa.FixedSizeListArray.from_arrays(pa.array([True, False] * 3), 2),
        "grid": pa.FixedSizeListArray.from_arrays(
            pa.FixedSizeListArray.from_arrays(pa.array(np.arange(18, dtype=np.int16)), 3), 2),
        "longs": pa.array([[1], [2, 3], [4, 5, 6]], pa.large_list(pa.int64())),
    })
    path = str(tmp_path / "t.parquet")
    pq.write_table(tab, path)
    src = open_parquet(path)
    assert src.columns == {"cat": "str", "big": "str", "fixed": "bytes", "bools": "ndarray:uint8:2",
                           "grid": "ndarray:int16:2,3", "longs": "ndarray:int64"}
    assert src.logical_dtypes == {"bools": "bool"}
    got = src.read(np.array([2, 0]))
    assert got["cat"].tolist() == ["a", "a"] and got["big"].tolist() == ["", "x"]
    assert got["fixed"].tolist() == [b"ef", b"ab"]
    assert got["bools"].dtype == np.uint8 and got["bools"].tolist() == [[1, 0], [1, 0]]
    assert got["grid"].shape == (2, 2, 3) and got["grid"][1].ravel().tolist() == list(range(6))
    assert got["longs"].to_list()[0].tolist() == [4, 5, 6]


@pytest.mark.skipif(int(pa.__version__.split(".")[0]) < 15, reason="pyarrow < 15 cannot write float16 to Parquet")
def test_float16(tmp_path):
    path = str(tmp_path / "t.parquet")
    pq.write_table(pa.table({"h": pa.array(np.array([1, 2, 3], np.float16))}), path)
    src = open_parquet(path)
    assert src.columns == {"h": "float16"}
    got = src.read(np.array([2]))["h"]
    assert got.dtype == np.float16 and got.tolist() == [3.0]


def test_array_lengths_reads_lists_as_fixed_size(tmp_path):
    path = str(tmp_path / "t.parquet")
    pq.write_table(pa.table({"v": pa.array([[1.0, 2.0, 3.0]] * 4 + [[1.0]], pa.list_(pa.float32()))}), path,
                   row_group_size=4)
    src = open_parquet(path, array_lengths={"v": 3})
    assert src.columns == {"v": "ndarray:float32:3"}
    got = src.read(np.arange(4))["v"]
    assert got.shape == (4, 3) and got.dtype == np.float32
    with pytest.raises(EncodingError, match=r"column 'v' .* row 0 has 1 values, array_lengths says 3"):
        src.read(np.array([4]))
    assert isinstance(open_parquet(path).read(np.arange(5))["v"], Ragged)


def test_unsupported_types_are_named(tmp_path):
    path = str(tmp_path / "t.parquet")
    pq.write_table(pa.table({"id": [1, 2], "st": pa.array([{"a": 1}, {"a": 2}]),
                             "m": pa.array([[("k", 1)], []], pa.map_(pa.string(), pa.int64()))}), path)
    with pytest.raises(UnsupportedColumnError, match=r"column 'st': Arrow type struct<a: int64> is not supported"):
        open_parquet(path)
    assert open_parquet(path, columns=["id"]).read(np.arange(2))["id"].tolist() == [1, 2]


NULLS = pa.table({
    "i": pa.array([1, None, 3], pa.int32()), "f": pa.array([1.5, None, 3.0]),
    "b": pa.array([True, None, False]), "s": pa.array(["a", None, "c"]), "r": pa.array([b"a", None, b"c"]),
    "d": pa.array([dt.date(2020, 1, 1), None, dt.date(1970, 1, 1)]),
    "t": pa.array([None, dt.datetime(1970, 1, 1, 0, 0, 1), None], pa.timestamp("ms")),
    "fx": pa.FixedSizeListArray.from_arrays(pa.array([1.0, None, 2.0, 3.0, 4.0, 5.0], pa.float32()), 2),
    "vl": pa.array([[1, None], [2], []], pa.list_(pa.int64())),
    "tags": pa.array([["x", None], None, []], pa.list_(pa.string())),
})


def test_nulls_fail_naming_the_column(tmp_path):
    path = str(tmp_path / "n.parquet")
    pq.write_table(NULLS, path)
    with pytest.raises(NullValuesError, match=r"column 'i' \(int32\) in .*n\.parquet, row group 0, holds 1 null"):
        open_parquet(path)  # found from the footer's statistics, before any read
    src = open_parquet(path, columns=["fx"])
    with pytest.raises(NullValuesError, match=r"column 'fx' .* 1 null element\(s\) inside arrays"):
        src.read(np.arange(3))


def test_nulls_filled_as_the_spark_path_fills_them(tmp_path):
    path = str(tmp_path / "n.parquet")
    pq.write_table(NULLS, path)
    got = open_parquet(path, null_policy="fill").read(np.arange(3))
    assert got["i"].tolist() == [1, 0, 3] and np.isnan(got["f"][1]) and got["b"].tolist() == [1, 0, 0]
    assert got["s"].tolist() == ["a", "", "c"] and got["r"].tolist() == [b"a", b"", b"c"]
    assert got["d"].tolist() == [18262 * NS_PER_DAY, 0, 0] and got["t"].tolist() == [0, 10**9, 0]
    assert np.isnan(got["fx"][0, 1]) and got["fx"][1:].tolist() == [[2.0, 3.0], [4.0, 5.0]]
    assert got["vl"].to_list()[0].tolist() == [1, 0] and len(got["vl"][2]) == 0
    assert got["tags"].tolist() == [["x", None], None, []]
    nulls = pa.table({"v": pa.array([[1.0], None], pa.list_(pa.float64()))})
    pq.write_table(nulls, str(tmp_path / "v.parquet"))
    with pytest.raises(NullValuesError, match="variable-length column cannot fill them"):
        open_parquet(str(tmp_path / "v.parquet"), null_policy="fill").read(np.arange(2))
    filled = open_parquet(str(tmp_path / "v.parquet"), null_policy="fill", array_lengths={"v": 1})
    assert filled.read(np.arange(2))["v"][0].tolist() == [1.0] and np.isnan(filled.read(np.arange(2))["v"][1, 0])
