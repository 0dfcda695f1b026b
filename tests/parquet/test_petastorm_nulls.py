"""``null_policy="petastorm"``: nulls as Petastorm's batch reader gives them (through pandas),
decided once per source from the footers' statistics; and ``columns=`` as a function of the
schema (a reader's own rule over which columns it reads)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from petastream.parquet import open_parquet
from petastream.spark import NullValuesError

NAT = np.iinfo(np.int64).min


def _read(path, **kwargs) -> dict:
    src = open_parquet(path, **kwargs)
    try:
        return src.read(np.arange(len(src)))
    finally:
        src.close()


@pytest.fixture(scope="module")
def two_groups(tmp_path_factory) -> str:
    """Row group 0 without nulls, row group 1 with a null in every nullable column."""
    path = str(tmp_path_factory.mktemp("nulls") / "t.parquet")
    table = pa.table({
        "i": pa.array([1, 2, None, 4], pa.int32()),
        "clean": pa.array([1, 2, 3, 4], pa.int32()),
        "f": pa.array([1.5, 2.5, None, 4.5], pa.float32()),
        "b": pa.array([True, False, None, True]),
        "s": pa.array(["a", "b", None, "d"]),
        "raw": pa.array([b"a", b"b", None, b"d"]),
        "dec": pa.array([Decimal("1.5"), Decimal("2.5"), None, Decimal("4.5")], pa.decimal128(5, 2)),
        "day": pa.array([dt.date(1970, 1, 2), dt.date(1970, 1, 3), None, dt.date(1970, 1, 5)]),
        "ts": pa.array([1, 2, None, 4], pa.timestamp("us")),
        "fl": pa.array([[1.0, 2.0], [3.0, 4.0], [None, 6.0], [7.0, 8.0]], pa.list_(pa.float64())),
    })
    pq.write_table(table, path, row_group_size=2)
    return path


def test_petastorm_policy_types_and_values(two_groups):
    cols = _read(two_groups, null_policy="petastorm")
    # An integer column holding nulls anywhere is float64 in every row group (one dtype per
    # source); one without nulls keeps its type.
    assert cols["i"].dtype == np.float64
    np.testing.assert_array_equal(cols["i"], [1.0, 2.0, np.nan, 4.0])
    assert cols["clean"].dtype == np.int32
    assert cols["f"].dtype == np.float32 and np.isnan(cols["f"][2])
    assert cols["b"].dtype == object and list(cols["b"]) == [True, False, None, True]
    assert [type(v) for v in cols["b"]][:2] == [bool, bool]
    assert list(cols["s"]) == ["a", "b", "None", "d"]
    assert list(cols["raw"]) == [b"a", b"b", None, b"d"]
    assert list(cols["dec"]) == [Decimal("1.50"), Decimal("2.50"), None, Decimal("4.50")]
    assert list(cols["day"]) == [86_400 * 10**9, 2 * 86_400 * 10**9, NAT, 4 * 86_400 * 10**9]
    assert cols["day"].view("datetime64[ns]")[2] != cols["day"].view("datetime64[ns]")[2]  # NaT
    assert list(cols["ts"]) == [1000, 2000, NAT, 4000]
    np.testing.assert_array_equal(cols["fl"].values, [1.0, 2.0, 3.0, 4.0, np.nan, 6.0, 7.0, 8.0])


def test_the_spec_says_what_a_read_gives(two_groups):
    src = open_parquet(two_groups, null_policy="petastorm")
    try:
        assert src.columns["i"] == "float64" and src.columns["clean"] == "int32"
        assert src.columns["b"] == "pkl"
        empty = src.read(np.arange(0))
        assert empty["i"].dtype == np.float64 and empty["b"].dtype == object
    finally:
        src.close()


def test_other_policies_unchanged(two_groups):
    with pytest.raises(NullValuesError, match="column 'i'"):
        open_parquet(two_groups)
    cols = _read(two_groups, null_policy="fill")
    assert cols["i"].dtype == np.int32 and list(cols["i"]) == [1, 2, 0, 4]
    assert cols["b"].dtype == np.uint8


def test_null_arrays_and_null_integer_elements_stay_errors(tmp_path):
    path = str(tmp_path / "l.parquet")
    pq.write_table(pa.table({"l": pa.array([[1, 2], [None, 4]], pa.list_(pa.int32())),
                             "n": pa.array([[1.0], None], pa.list_(pa.float64()))}), path)
    with pytest.raises(NullValuesError, match="column 'l'.*null element"):
        _read(path, null_policy="petastorm", columns=["l"])
    with pytest.raises(NullValuesError, match="column 'n'.*null array"):
        _read(path, null_policy="petastorm", columns=["n"])


def test_columns_as_a_function_of_the_schema(two_groups):
    seen = []

    def pick(file_fields, partition_fields):
        seen.append(([n for n, _ in file_fields], partition_fields))
        return [n for n, t in file_fields if n in ("s", "clean")]

    cols = _read(two_groups, columns=pick, null_policy="fill")
    assert list(cols) == ["clean", "s"]  # in the files' order
    assert seen == [(["i", "clean", "f", "b", "s", "raw", "dec", "day", "ts", "fl"], [])]


def test_columns_function_leaves_out_unsupported_types(tmp_path):
    path = str(tmp_path / "s.parquet")
    pq.write_table(pa.table({"id": [1, 2], "st": pa.array([{"a": 1}, {"a": 2}])}), path)
    cols = _read(path, columns=lambda fields, parts: [n for n, t in fields if not pa.types.is_struct(t)])
    assert list(cols) == ["id"]
