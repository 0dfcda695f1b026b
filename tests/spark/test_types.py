"""Every supported Spark type end to end: materialize, read back, compare with collect()."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from decimal import Decimal

import numpy as np
import pytest

import petastream
from petastream.spark import NullValuesError, UnsupportedColumnError, materialize
from tests.spark.helpers import as_list, collect_sorted, read_rows

pytestmark = pytest.mark.spark

SCALARS = (
    "id long, b boolean, i8 byte, i16 short, i32 int, f float, d double, s string, "
    "bin binary, dec decimal(12,3), day date, ts timestamp, ntz timestamp_ntz"
)


def _scalar_rows(n: int) -> list[tuple]:
    rows = []
    for i in range(n):
        rows.append((
            i, i % 3 == 0, (i % 200) - 100, i * 100 - 5000, i * 100_000 - 7, i / 4, i * 1.1,
            f"text-{i}-é", bytes([i % 256, 0, 255]), Decimal(i) / 7 if i % 2 else Decimal("-1.5"),
            dt.date(1969, 12, 30) + dt.timedelta(days=i * 40),
            dt.datetime(2021, 3, 4, 5, 6, 7, 123456) + dt.timedelta(hours=i * 13),
            dt.datetime(1960, 1, 1, 0, 0, 1) + dt.timedelta(days=i * 3, microseconds=i),
        ))
    return rows


def test_scalar_types_round_trip(spark, cache_dir):
    from pyspark.sql import functions as F

    df = spark.createDataFrame(_scalar_rows(40), SCALARS).repartition(3)
    m = materialize(df, cache_dir)
    assert m.created and not m.reused and m.num_samples == 40
    assert m.columns == {
        "id": "int64", "b": "uint8", "i8": "int8", "i16": "int16", "i32": "int32",
        "f": "float32", "d": "float32", "s": "str", "bin": "bytes", "dec": "str_decimal",
        "day": "int64", "ts": "int64", "ntz": "int64",
    }
    expected = collect_sorted(df.select(
        "*", (F.unix_date("day").cast("long") * 86_400 * 10**9).alias("day_ns"),
        (F.unix_micros("ts") * 1000).alias("ts_ns"),
        (F.unix_micros(F.col("ntz").cast("timestamp")) * 1000).alias("ntz_ns"),
    ))
    got = read_rows(m.url)
    assert len(got) == len(expected) == 40
    for g, e in zip(got, expected):
        assert int(g["id"]) == e["id"]
        assert int(g["b"]) == int(e["b"])
        assert (int(g["i8"]), int(g["i16"]), int(g["i32"])) == (e["i8"], e["i16"], e["i32"])
        assert g["f"] == np.float32(e["f"])
        assert g["d"] == np.float32(e["d"])  # dtype='float32' casts double to float
        assert g["s"] == e["s"] and g["bin"] == e["bin"]
        assert isinstance(g["dec"], Decimal) and g["dec"] == e["dec"]
        assert int(g["day"]) == e["day_ns"]
        assert int(g["ts"]) == e["ts_ns"]
        assert int(g["ntz"]) == e["ntz_ns"]


def test_dates_before_epoch_and_ntz_are_wall_clock(spark, cache_dir):
    df = spark.createDataFrame(
        [(0, dt.date(1969, 12, 31), dt.datetime(1970, 1, 1, 0, 0, 1))], "id long, day date, ntz timestamp_ntz"
    )
    row = read_rows(materialize(df, cache_dir).url)[0]
    assert int(row["day"]) == -86_400 * 10**9
    assert int(row["ntz"]) == 10**9


@pytest.mark.parametrize("dtype, f_enc, d_enc", [
    ("float32", "float32", "float32"), ("float64", "float64", "float64"), (None, "float32", "float64"),
])
def test_dtype_conversion(spark, cache_dir, dtype, f_enc, d_enc):
    df = spark.createDataFrame([(1, 0.1, 0.2, [0.3, 0.4], [0.5])],
                               "id long, f float, d double, ad array<double>, af array<float>")
    m = materialize(df, cache_dir, dtype=dtype)
    assert m.columns["f"] == f_enc and m.columns["d"] == d_enc
    assert m.columns["ad"] == f"ndarray:{d_enc}:2" and m.columns["af"] == f"ndarray:{f_enc}:1"
    row = read_rows(m.url)[0]
    assert row["d"] == np.dtype(d_enc).type(0.2)
    assert row["ad"].dtype == np.dtype(d_enc)


def test_invalid_dtype(spark, cache_dir):
    with pytest.raises(ValueError, match="dtype 'float16' is not supported"):
        materialize(spark.range(3), cache_dir, dtype="float16")


def test_fixed_and_variable_arrays(spark, cache_dir):
    rows = [(i, [float(i)] * 16, list(range(i % 5 + 1)), [i % 2 == 0, True], [i] * 3) for i in range(50)]
    df = spark.createDataFrame(rows, "id long, feat array<double>, var array<long>, flags array<boolean>, small array<byte>")
    m = materialize(df.repartition(4), cache_dir)
    assert m.columns["feat"] == "ndarray:float32:16"
    assert m.columns["var"] == "ndarray:int64"
    assert m.columns["flags"] == "ndarray:uint8:2"
    assert m.columns["small"] == "ndarray:int8:3"
    for g, e in zip(read_rows(m.url), collect_sorted(df)):
        assert as_list(g["feat"]) == e["feat"]
        assert as_list(g["var"]) == e["var"]
        assert as_list(g["flags"]) == [int(x) for x in e["flags"]]
        assert as_list(g["small"]) == e["small"]


def test_array_lengths_dynamic_and_explicit(spark, cache_dir):
    df = spark.createDataFrame([(i, [i, i]) for i in range(6)], "id long, a array<int>")
    assert materialize(df, cache_dir, array_lengths="dynamic").columns["a"] == "ndarray:int32"
    assert materialize(df, cache_dir, array_lengths={"a": 2}).columns["a"] == "ndarray:int32:2"
    with pytest.raises(ValueError, match="lacks"):
        materialize(df, cache_dir, array_lengths={"nope": 2})


def test_empty_arrays_are_an_error(spark, cache_dir):
    df = spark.createDataFrame([(0, [1]), (1, [])], "id long, a array<int>")
    with pytest.raises(UnsupportedColumnError, match="column 'a': some arrays are empty"):
        materialize(df, cache_dir)


def test_ml_vectors(spark, cache_dir):
    from pyspark.ml.linalg import Vectors
    from pyspark.mllib.linalg import Vectors as OldVectors

    df = spark.createDataFrame(
        [(0, Vectors.dense(1.0, 2.0, 3.0), OldVectors.dense(4.0, 5.0)),
         (1, Vectors.sparse(3, [(1, 7.5)]), OldVectors.sparse(2, [(0, 1.25)]))],
        ["id", "vec", "old"],
    )
    m = materialize(df, cache_dir)
    assert m.columns["vec"] == "ndarray:float32:3" and m.columns["old"] == "ndarray:float32:2"
    rows = read_rows(m.url)
    assert as_list(rows[0]["vec"]) == [1.0, 2.0, 3.0] and as_list(rows[1]["vec"]) == [0.0, 7.5, 0.0]
    assert as_list(rows[1]["old"]) == [1.25, 0.0]
    m64 = materialize(df, cache_dir, dtype="float64")
    assert m64.columns["vec"] == "ndarray:float64:3"


def test_array_of_strings_is_json(spark, cache_dir):
    df = spark.createDataFrame([(0, ["a", "b"]), (1, []), (2, ["x", None])], "id long, tags array<string>")
    m = materialize(df, cache_dir)
    assert m.columns["tags"] == "json"
    assert [r["tags"] for r in read_rows(m.url)] == [["a", "b"], [], ["x", None]]


@pytest.mark.parametrize("typ, value, shown", [
    ("map<string,int>", {"k": 1}, "map<string,int>"),
    ("struct<a:int,b:string>", (1, "x"), "struct<a:int,b:string>"),
    ("array<array<int>>", [[1], [2, 3]], "array<array<int>>"),
])
def test_nested_types_are_rejected_with_the_column_named(spark, cache_dir, typ, value, shown):
    df = spark.createDataFrame([(0, value)], f"id long, tags {typ}")
    with pytest.raises(UnsupportedColumnError,
                       match=rf"column 'tags': {shown} is not supported; cast it to a JSON string with to_json\(\) or drop it"):
        materialize(df, cache_dir)


def test_nested_json_opt_in(spark, cache_dir):
    df = spark.createDataFrame([(0, {"k": 1}, (1, "x"), [[1], [2, 3]])],
                               "id long, m map<string,int>, st struct<a:int,b:string>, aa array<array<int>>")
    m = materialize(df, cache_dir, nested="json")
    assert {m.columns[c] for c in ("m", "st", "aa")} == {"json"}
    row = read_rows(m.url)[0]
    assert row["m"] == {"k": 1} and row["st"] == {"a": 1, "b": "x"} and row["aa"] == [[1], [2, 3]]


def test_unsupported_scalar_type(spark, cache_dir):
    from pyspark.sql import functions as F

    df = spark.range(2).withColumn("nothing", F.lit(None))
    with pytest.raises(UnsupportedColumnError, match="column 'nothing': void is not supported"):
        materialize(df, cache_dir)


def test_null_scalar_error_names_column_and_count(spark, cache_dir):
    df = spark.createDataFrame([(i, None if i % 4 == 0 else f"s{i}", i) for i in range(10)],
                               "id long, s string, x int").repartition(2)
    with pytest.raises(NullValuesError, match=r"'s': 3 row\(s\).*null_policy='fill'"):
        materialize(df, cache_dir)
    # a failed write publishes nothing (tasks of the aborted job may still leave files in
    # the discarded attempt directory, never an index.json)
    import glob
    assert not [n for n in os.listdir(cache_dir) if not n.startswith(".petastream-tmp-")]
    assert not glob.glob(f"{cache_dir}/*/index.json") + glob.glob(f"{cache_dir}/.*/index.json")


def test_null_error_with_arrays_names_the_column_and_count(spark, cache_dir):
    df = spark.createDataFrame([(0, [1.0, None]), (1, None), (2, [2.0, 3.0])], "id long, a array<double>")
    with pytest.raises(NullValuesError, match=r"'a': 2 row\(s\)"):
        materialize(df, cache_dir)


def test_null_fill_policy(spark, cache_dir):
    schema = ("id long, b boolean, i int, d double, s string, bin binary, dec decimal(5,2), "
              "day date, ts timestamp, a array<double>, tags array<string>")
    df = spark.createDataFrame(
        [(0, None, None, None, None, None, None, None, None, None, None),
         (1, True, 5, 1.5, "x", b"y", Decimal("1.25"), dt.date(1970, 1, 2), None, [1.0, None], ["t"])],
        schema,
    )
    m = materialize(df, cache_dir, null_policy="fill")
    assert m.columns["a"] == "ndarray:float32:2"
    r0, r1 = read_rows(m.url)
    assert int(r0["b"]) == 0 and int(r0["i"]) == 0 and math.isnan(r0["d"])
    assert r0["s"] == "" and r0["bin"] == b"" and r0["dec"] == Decimal("0")
    assert int(r0["day"]) == 0 and int(r0["ts"]) == 0
    assert np.isnan(r0["a"]).all() and r0["tags"] is None
    assert int(r1["day"]) == 86_400 * 10**9 and r1["tags"] == ["t"]
    assert as_list(r1["a"])[0] == 1.0 and math.isnan(as_list(r1["a"])[1])


def test_null_fill_cannot_fill_variable_length_arrays(spark, cache_dir):
    df = spark.createDataFrame([(0, [1]), (1, None), (2, [1, 2])], "id long, a array<int>")
    with pytest.raises(NullValuesError, match=r"variable-length array column\(s\) \('a': 1 row"):
        materialize(df, cache_dir, null_policy="fill")


def test_task_encoding_error_is_reported(spark, cache_dir):
    df = spark.createDataFrame([(0, dt.datetime(2300, 1, 1))], "id long, ts timestamp")
    from petastream.spark import MaterializationError

    with pytest.raises(MaterializationError, match="column 'ts'.*out of range for int64 nanoseconds"):
        materialize(df, cache_dir)


def test_dataset_metadata_and_json_index(spark, cache_dir):
    df = spark.range(0, 100, 1, 4).selectExpr("id", "cast(id as int) as label")
    m = materialize(df, cache_dir, size_limit=256)
    ds = petastream.open(m.url)
    assert len(ds) == len(m) == 100 and ds.num_shards == m.num_shards > 4
    index = json.loads(open(f"{m.url}/index.json").read())
    assert all("/" in s["raw_data"]["basename"] for s in index["shards"])
    assert sorted(int(r["id"]) for r in read_rows(m.url)) == list(range(100))


def test_optimistic_array_lengths(spark, cache_dir, caplog):
    import logging

    fixed = spark.createDataFrame([(i, [float(i)] * 4) for i in range(30)], "id long, a array<double>")
    m = materialize(fixed.repartition(3), cache_dir, array_lengths="optimistic")
    assert m.columns["a"] == "ndarray:float32:4"
    # each task sees one length, but the tasks disagree: written again as variable-length
    per_task = spark.createDataFrame([(i, [i] * (1 + i // 10)) for i in range(20)],
                                     "id long, a array<int>").repartitionByRange(2, "id")
    with caplog.at_level(logging.INFO, logger="petastream.spark"):
        m = materialize(per_task, cache_dir, array_lengths="optimistic")
    assert m.columns["a"] == "ndarray:int32"
    assert "tasks chose different array encodings for ['a']" in caplog.text
    assert [len(r["a"]) for r in read_rows(m.url)] == [1 + i // 10 for i in range(20)]


def test_optimistic_length_change_within_a_task(spark, cache_dir):
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    spark.conf.set(key, "5")
    try:
        df = spark.createDataFrame([(i, [i] * (1 if i < 5 else 2)) for i in range(10)],
                                   "id long, a array<long>").coalesce(1)
        m = materialize(df, cache_dir, array_lengths="optimistic")
    finally:
        spark.conf.unset(key)
    assert m.columns["a"] == "ndarray:int64"
    assert [len(r["a"]) for r in read_rows(m.url)] == [1] * 5 + [2] * 5
    assert [n for n in os.listdir(cache_dir) if n.startswith("petastream-")] == [os.path.basename(m.url)]


def test_column_names_with_dots_spaces_and_backticks(spark, cache_dir):
    df = spark.range(3).selectExpr("id", "id * 2 as `a.b c`", "array(id, id) as `we``ird`")
    m = materialize(df, cache_dir)
    assert m.columns == {"id": "int64", "a.b c": "int64", "we`ird": "ndarray:int64:2"}
    assert [int(r["a.b c"]) for r in read_rows(m.url)] == [0, 2, 4]


def test_duplicate_column_names_are_an_error(spark, cache_dir):
    a = spark.range(3)
    with pytest.raises(ValueError, match=r"duplicate column names \['id'\]"):
        materialize(a.join(spark.range(3), a.id == a.id), cache_dir)


def test_spark_types_are_recorded_beside_a_mosaic_exact_index(spark, cache_dir):
    from petastream.mds.sidecar import SIDECAR, parse_sidecar
    from petastream.storage.location import resolve

    df = spark.createDataFrame([(1, True, [True, False]), (2, False, [False, False])],
                               "id long, b boolean, flags array<boolean>")
    m = materialize(df.repartition(2), cache_dir)
    loc = resolve(m.url)
    assert parse_sidecar(loc.read_bytes(SIDECAR)) == {
        "id": {"source_type": "bigint"},
        "b": {"source_type": "boolean", "dtype": "bool"},
        "flags": {"source_type": "array<boolean>", "dtype": "bool"},
    }
    index = json.loads(loc.read_bytes("index.json"))
    assert set(index) == {"version", "shards"} and len(index["shards"][0]) == 11
