"""Parquet written by real (local) Spark reads as the MDS path materializes the same DataFrame."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pytest

from petastream.columns.ops import take_columns
from petastream.mds.dataset import MDSDataset
from petastream.parquet import open_parquet
from tests.parquet.helpers import assert_same

pytestmark = pytest.mark.spark

SCHEMA = ("id long, b boolean, i8 byte, i16 short, i32 int, f float, d double, s string, bin binary, "
          "dec decimal(12,3), day date, ts timestamp, ntz timestamp_ntz, vec array<float>, "
          "arr array<double>, flags array<boolean>, tags array<string>")


def _rows(n: int) -> list[tuple]:
    return [(
        i, i % 3 == 0, (i % 200) - 100, (i * 100) % 60000 - 30000, i * 100_000 - 7, i / 4, i * 1.1, f"text-{i}-é",
        bytes([i % 256, 0, 255]) * (i % 3), Decimal(i) / 7 if i % 2 else Decimal("-1.5"),
        dt.date(1969, 12, 30) + dt.timedelta(days=i * 40),
        dt.datetime(2021, 3, 4, 5, 6, 7, 123456) + dt.timedelta(hours=i * 13),
        dt.datetime(1960, 1, 1, 0, 0, 1) + dt.timedelta(days=i * 3, microseconds=i),
        [float(i), 0.5, -1.0, 2.0], [i * 0.5] * (i % 4 + 1), [i % 2 == 0] * (i % 3 + 1), [f"t{i}"] * (i % 3),
    ) for i in range(n)]


def _sorted(cols: dict) -> dict:
    return take_columns(cols, np.argsort(cols["id"], kind="stable"))


@pytest.mark.timeout(600)
def test_spark_parquet_reads_as_its_mds_materialization(spark, tmp_path):
    from petastream.spark import materialize

    n = 600
    df = spark.createDataFrame(_rows(n), SCHEMA).repartition(3)
    out = str(tmp_path / "parquet")
    (df.write.option("parquet.block.size", 2048)  # several row groups per file
     .option("parquet.block.size.row.check.min", 5).option("parquet.block.size.row.check.max", 10).parquet(out))
    m = materialize(df, str(tmp_path / "mds"), dtype=None, reuse=False, keep_at_exit=True)
    mds = MDSDataset(m.url)
    src = open_parquet(out, array_lengths={"vec": 4})
    assert src.columns == mds.columns  # the same types, vec fixed-size as the MDS path chose
    assert src.columns["arr"] == "ndarray:float64" and src.columns["tags"] == "json"
    assert src.logical_dtypes == mds.logical_dtypes == {"b": "bool", "flags": "bool"}
    assert len(src) == len(mds) == n and src.num_shards > len(src.files) == 3
    for strings in ("objects", "ragged"):
        src.strings = mds.strings = strings
        assert_same(_sorted(src.read(np.arange(n))), _sorted(mds.read(np.arange(n))))
