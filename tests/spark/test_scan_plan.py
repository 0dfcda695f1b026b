"""The converter's direct-path recogniser (petastream.spark.scan_plan) on real local Spark
DataFrames over Parquet, classic and Spark Connect: a plain scan (selected columns, column
filters) is recognised and reads, through the Parquet source, the rows Spark collects;
anything else is not, with its reason."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from petastream.parquet import ParquetSource
from petastream.spark.scan_plan import recognise
from tests.spark.helpers import functions_for as _functions
from tests.spark.helpers import session_for as _session

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("scan")
    plain = root / "plain"
    os.makedirs(plain)
    for k in range(2):
        ids = list(range(50 * k, 50 * k + 50))
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "x": [i / 2 for i in ids],
                                 "s": [None if i % 10 == 0 else f"s{i % 4}" for i in ids],
                                 "flag": [i % 3 == 0 for i in ids]}), plain / f"part-{k}.parquet")
    parted = root / "parted" / "k=1"
    os.makedirs(parted)
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64())}), parted / "a.parquet")
    return {"plain": str(plain), "parted": str(root / "parted")}


def _served(scan) -> list[tuple]:
    src = ParquetSource(list(scan.files), columns=list(scan.columns), filters=scan.filter, null_policy="fill")
    got = src.read(np.arange(len(src)))
    src.close()
    return sorted(zip(*(got[c].tolist() for c in scan.columns)))


@pytest.mark.parametrize("mode", ["classic", "connect"])
def test_a_plain_scan_is_recognised_and_reads_sparks_rows(request, files, mode):
    spark, F = _session(request, mode), _functions(mode)
    whole = recognise(spark.read.parquet(files["plain"]))
    assert whole.scan is not None, whole.reason
    assert whole.scan.columns == ("id", "x", "s", "flag") and whole.scan.filter is None
    assert sorted(whole.scan.files) == sorted(spark.read.parquet(files["plain"]).inputFiles())
    df = (spark.read.parquet(files["plain"]).where((F.col("id") >= 7) & ~(F.col("s") == "s1"))
          .select("id", "s", "flag").where(F.col("s").isin("s2", "s3") | F.col("flag")))
    verdict = recognise(df)
    assert verdict.scan is not None, verdict.reason
    assert verdict.scan.columns == ("id", "s", "flag")
    want = sorted((r["id"], r["s"], r["flag"]) for r in df.collect())
    assert 0 < len(want) < 100 and _served(verdict.scan) == want
    nulls = spark.read.parquet(files["plain"]).where(F.col("s").isNull()).select("id")
    assert _served(recognise(nulls).scan) == sorted((r["id"],) for r in nulls.collect())


@pytest.mark.parametrize("mode", ["classic", "connect"])
def test_anything_else_is_not_recognised_with_its_reason(request, files, mode):
    spark, F = _session(request, mode), _functions(mode)
    df = spark.read.parquet(files["plain"])
    cases = {
        "NaN": df.where(F.col("x") > 3.0),
        "Aggregate": df.groupBy("flag").count(),
        "computes": df.select((F.col("id") + 1).alias("id")),
        "Limit": df.limit(5),
        "combines|join": df.join(df.select("id"), "id"),
        "partitioned": spark.read.parquet(files["parted"]),
        "options": spark.read.option("mergeSchema", "true").parquet(files["plain"]),
        "not Parquet|json": spark.read.json(files["plain"]),
    }
    if mode == "connect":
        cases["SQL string"] = df.where("id > 3")
    for reason, frame in cases.items():
        verdict = recognise(frame)
        assert verdict.scan is None, (reason, verdict)
        assert any(r.lower() in verdict.reason.lower() for r in reason.split("|")), (reason, verdict.reason)


def test_a_connect_delta_read_is_recognised_from_the_client_plan_alone(spark_connect, tmp_path):
    pytest.importorskip("deltalake")
    from deltalake import write_deltalake

    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": pa.array([1, 2, 3], pa.int64()), "x": [0.5, 1.5, 2.5]}))
    write_deltalake(path, pa.table({"id": pa.array([4], pa.int64()), "x": [3.5]}), mode="append")
    F = _functions("connect")

    def read():  # a fresh reader each time: a DataFrameReader keeps the options set on it
        return spark_connect.read.format("delta")

    latest = recognise(read().load(path).select("id"))
    assert latest.scan is not None and latest.scan.format == "delta" and latest.scan.version == 1, latest
    assert latest.scan.columns == ("id",) and "at version 1" in latest.reason
    assert recognise(read().option("versionAsOf", 0).load(path)).scan.version == 0
    refused = {"time zone": read().option("timestampAsOf", "2024-01-01 00:00:00").load(path),
               "options": read().option("mergeSchema", "true").load(path),
               "NaN": read().load(path).where(F.col("x") > 1.0)}
    for reason, frame in refused.items():
        verdict = recognise(frame)
        assert verdict.scan is None and reason in verdict.reason, (reason, verdict.reason)
