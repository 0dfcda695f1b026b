"""The default one-pass write (``array_lengths='optimistic'``): array lengths decided by the
tasks, nulls filled and empty arrays found there, no aggregate job unless the tasks cannot
decide; tasks that disagree get the column written again, and only the right dataset is
published. Classic and Connect."""

from __future__ import annotations

import logging
import math
import os

import numpy as np
import pytest

from petastream.spark import NullValuesError, UnsupportedColumnError, materialize
from petastream.spark import schema as schema_module
from tests.spark.helpers import as_list, read_rows

pytestmark = pytest.mark.spark


@pytest.fixture
def aggregates(monkeypatch):
    """Count the aggregate jobs that decide array lengths."""
    calls = []
    real = schema_module._length_stats

    def counting(df, todo, count_nulls):
        calls.append([p.name for p in todo])
        return real(df, todo, count_nulls)

    monkeypatch.setattr(schema_module, "_length_stats", counting)
    return calls


@pytest.fixture
def small_batches(spark):
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    spark.conf.set(key, "2")
    yield
    spark.conf.unset(key)


def _published(cache_dir: str) -> list[str]:
    return sorted(n for n in os.listdir(cache_dir) if n.startswith("petastream-"))


def test_default_is_one_pass_without_an_aggregate_job(spark, cache_dir, aggregates):
    df = spark.createDataFrame([(i, [float(i)] * 4, [i] * (1 + i % 3)) for i in range(40)],
                               "id long, fixed array<double>, var array<int>").repartition(3)
    m = materialize(df, cache_dir)
    assert m.columns["fixed"] == "ndarray:float32:4" and m.columns["var"] == "ndarray:int32"
    assert aggregates == []
    rows = read_rows(m.url)
    assert [as_list(r["fixed"]) for r in rows] == [[float(i)] * 4 for i in range(40)]
    assert [as_list(r["var"]) for r in rows] == [[i] * (1 + i % 3) for i in range(40)]
    # 'infer' still runs its aggregate first, and agrees
    assert materialize(df, cache_dir, array_lengths="infer", reuse=False).columns == m.columns
    assert aggregates == [["fixed", "var"]]


def test_null_fill_of_fixed_arrays_in_one_pass(spark, cache_dir, aggregates):
    rows = [(i, None if i % 5 == 0 else [float(i), None if i % 7 == 0 else 1.0],
             None if i % 4 == 0 else [i, i, i], [i % 2 == 0, None] if i % 3 else [True, False])
            for i in range(30)]
    df = spark.createDataFrame(rows, "id long, a array<double>, b array<int>, c array<boolean>")
    m = materialize(df.repartition(3), cache_dir, null_policy="fill")
    assert m.columns == {"id": "int64", "a": "ndarray:float32:2", "b": "ndarray:int32:3",
                         "c": "ndarray:uint8:2"}
    assert aggregates == []
    for r in read_rows(m.url):
        i = int(r["id"])
        a, b, c = as_list(r["a"]), as_list(r["b"]), as_list(r["c"])
        if i % 5 == 0:
            assert all(math.isnan(x) for x in a)
        else:
            assert a[0] == float(i) and (math.isnan(a[1]) if i % 7 == 0 else a[1] == 1.0)
        assert b == ([0, 0, 0] if i % 4 == 0 else [i, i, i])
        assert c == ([int(i % 2 == 0), 0] if i % 3 else [1, 0])


def test_null_fill_when_a_task_starts_with_null_arrays_only(spark, cache_dir, aggregates, caplog,
                                                             small_batches):
    # one partition: its first batch (2 rows) holds null arrays only: no length to fill them
    # to, so the column is decided by an aggregate job and written again
    df = spark.createDataFrame([(0, None), (1, None), (2, [1, 2]), (3, None), (4, [5, 6])],
                               "id long, a array<long>").coalesce(1)
    with caplog.at_level(logging.INFO, logger="petastream.spark"):
        m = materialize(df, cache_dir, null_policy="fill")
    assert "column 'a': a task met only null arrays" in caplog.text
    assert aggregates == [["a"]]
    assert m.columns["a"] == "ndarray:int64:2"
    assert [as_list(r["a"]) for r in read_rows(m.url)] == [[0, 0], [0, 0], [1, 2], [0, 0], [5, 6]]
    assert _published(cache_dir) == [os.path.basename(m.url)]


def test_null_fill_of_an_all_null_array_column_is_an_error(spark, cache_dir):
    df = spark.createDataFrame([(0, None), (1, None)], "id long, a array<int>")
    with pytest.raises(NullValuesError, match=r"variable-length array column\(s\) \('a': 2 row"):
        materialize(df, cache_dir, null_policy="fill")
    assert _published(cache_dir) == []


@pytest.mark.parametrize("array_lengths", ["optimistic", "dynamic", {"a": None}])
def test_empty_arrays_are_found_by_the_tasks(spark, cache_dir, aggregates, array_lengths):
    df = spark.createDataFrame([(i, [1] * (i % 3)) for i in range(9)], "id long, a array<int>")
    with pytest.raises(UnsupportedColumnError, match="column 'a': some arrays are empty"):
        materialize(df.repartition(2), cache_dir, array_lengths=array_lengths)
    assert aggregates == [] and _published(cache_dir) == []


def test_empty_array_after_a_fixed_first_batch(spark, cache_dir, small_batches):
    df = spark.createDataFrame([(0, [1, 2]), (1, [3, 4]), (2, []), (3, [5, 6])],
                               "id long, `we``ird` array<int>").coalesce(1)
    with pytest.raises(UnsupportedColumnError, match="column 'we`ird': some arrays are empty"):
        materialize(df, cache_dir)
    assert _published(cache_dir) == []


def test_tasks_that_disagree_get_the_column_rewritten_variable(spark, cache_dir, caplog, aggregates):
    per_task = spark.createDataFrame([(i, [i] * (1 + i // 10), [1.5] * 3) for i in range(20)],
                                     "id long, a array<int>, b array<float>").repartitionByRange(2, "id")
    with caplog.at_level(logging.INFO, logger="petastream.spark"):
        m = materialize(per_task, cache_dir)
    assert "tasks chose different array encodings for ['a']" in caplog.text
    assert m.columns["a"] == "ndarray:int32" and m.columns["b"] == "ndarray:float32:3"
    assert aggregates == []
    rows = read_rows(m.url)
    assert [len(r["a"]) for r in rows] == [1 + i // 10 for i in range(20)]
    assert all(as_list(r["b"]) == [1.5] * 3 for r in rows)
    assert _published(cache_dir) == [os.path.basename(m.url)]  # the first attempt is gone


def test_explicit_length_that_the_data_contradicts_is_an_error(spark, cache_dir):
    from petastream.spark import MaterializationError

    df = spark.createDataFrame([(0, [1, 2]), (1, [1, 2, 3])], "id long, a array<int>")
    with pytest.raises(MaterializationError, match="expected arrays of length 2.*found one of length 3"):
        materialize(df, cache_dir, array_lengths={"a": 2})
    assert _published(cache_dir) == []


def test_connect_one_pass_disagreement_fill_and_empty(spark_connect, cache_dir, aggregates):
    from pyspark.sql.connect import functions as F

    df = (spark_connect.range(0, 40, 1, 2)
          .withColumn("a", F.array_repeat(F.col("id").cast("int"), (F.col("id") / 20 + 1).cast("int")))
          .withColumn("b", F.when(F.col("id") % 3 == 0, F.lit(None))
                      .otherwise(F.array(F.col("id").cast("double"), F.lit(None).cast("double")))))
    m = materialize(df, cache_dir, null_policy="fill")
    assert m.columns["a"] == "ndarray:int32" and m.columns["b"] == "ndarray:float32:2"
    assert aggregates == []
    for r in read_rows(m.url):
        i = int(r["id"])
        assert as_list(r["a"]) == [i] * (i // 20 + 1)
        b = np.asarray(r["b"])
        assert np.isnan(b[1]) and (np.isnan(b[0]) if i % 3 == 0 else b[0] == i)
    empty = spark_connect.range(0, 4, 1, 2).withColumn("a", F.array_repeat(F.lit(1), (F.col("id") % 2).cast("int")))
    with pytest.raises(UnsupportedColumnError, match="column 'a': some arrays are empty"):
        materialize(empty, cache_dir)
