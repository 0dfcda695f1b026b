"""A task that meets a data error (a marker: a null it may not fill, an empty array, an array
length that changed or is unknown; or a value its encoding cannot hold) reports it in its
result row instead of failing, and the job's other tasks stop at the flag it leaves.

Why (issue 29, item 6): a failed task makes Spark cancel the job's running tasks, and a
cancelled task that has already handed its Python worker back for reuse can have that worker
destroyed by Spark's kill timer while the next job's task uses it (SPARK-54217): on a loaded
machine the job after a retry marker failed with ``ClosedChannelException``. A write job of
ours that meets a data error must therefore fail, and cancel, no Spark task.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from petastream.spark import NullValuesError, materialize
from petastream.spark._task import NULL_MARKER, STOP_FLAG, STOPPED, TaskWriter
from petastream.spark.schema import ColumnPlan
from tests.spark.helpers import read_rows

PLANS = [ColumnPlan("id", "int64", "plain"), ColumnPlan("s", "str", "plain")]


def _writer(out: str) -> TaskWriter:
    return TaskWriter(out, PLANS, compression=None, hashes=[], size_limit=None, fill=False,
                      storage_options=None)


def _batch(ids: list[int], strings: list[str | None]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"id": pa.array(ids, pa.int64()),
                                       "s": pa.array(strings, pa.string())})


def _files(root: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


def _result(task_output: Any) -> dict[str, Any]:
    [batch] = list(task_output)
    return {name: col[0] for name, col in batch.to_pydict().items()}


def test_a_marker_is_a_result_that_leaves_the_stop_flag_and_no_shards(tmp_path):
    out = str(tmp_path / "attempt")
    row = _result(_writer(out)(iter([_batch([1, 2], ["a", "b"]), _batch([3], [None])])))
    assert row["failure"].startswith(f"petastream.errors.EncodingError: {NULL_MARKER}: column 's'")
    assert (row["sub"], row["samples"], row["shards"]) == ("", 0, 0)
    assert _files(out) == [STOP_FLAG]  # the first batch's shard was dropped


def test_a_task_stops_at_the_flag_without_reading_on(tmp_path):
    out = tmp_path / "attempt"
    out.mkdir()
    (out / STOP_FLAG).write_bytes(b"")
    pulled = []

    def batches():
        for i in range(5):
            pulled.append(i)
            yield _batch([i], ["x"])

    row = _result(_writer(str(out))(batches()))
    assert row["failure"] == STOPPED and row["sub"] == "" and row["samples"] == 0
    assert pulled == [0] and _files(str(out)) == [STOP_FLAG]


def test_a_value_the_encoding_cannot_hold_is_reported_too(tmp_path):
    plans = [ColumnPlan("ts", "int64", "timestamp", spark_type="timestamp")]
    task = TaskWriter(str(tmp_path / "attempt"), plans, compression=None, hashes=[],
                      size_limit=None, fill=False, storage_options=None)
    batch = pa.RecordBatch.from_pydict({"ts": pa.array([dt.datetime(2300, 1, 1)], pa.timestamp("us"))})
    row = _result(task(iter([batch])))
    assert "EncodingError: column 'ts': timestamp value out of range for int64" in row["failure"]


def test_a_storage_error_still_fails_the_task(tmp_path):
    """Spark retries a failed task (spark.task.maxFailures): right for storage errors."""
    blocker = tmp_path / "attempt"
    blocker.write_bytes(b"a file where the attempt directory should be")
    with pytest.raises(OSError):
        list(_writer(str(blocker))(iter([_batch([1], ["a"])])))


def _jobs(spark: Any) -> dict[int, tuple[str, int, int]]:
    """Every job of the session so far: (status, failed tasks, killed tasks), read from Spark's
    status store once its listener bus has delivered every event."""
    jsc = spark.sparkContext._jsc.sc()
    jsc.listenerBus().waitUntilEmpty(600_000)
    jobs = jsc.statusStore().jobsList(None)
    out = {}
    for i in range(jobs.length()):
        job = jobs.apply(i)
        out[int(job.jobId())] = (str(job.status()), int(job.numFailedTasks()), int(job.numKilledTasks()))
    return out


@pytest.mark.spark
def test_write_jobs_that_meet_markers_fail_and_cancel_no_spark_task(spark, cache_dir, caplog):
    before = _jobs(spark)
    # test_types.py::test_null_fill_policy's DataFrame: the task of partition 0 meets a first
    # batch of null arrays only (a retry marker), the other one writes
    schema = ("id long, b boolean, i int, d double, s string, bin binary, dec decimal(5,2), "
              "day date, ts timestamp, a array<double>, tags array<string>")
    df = spark.createDataFrame(
        [(0, None, None, None, None, None, None, None, None, None, None),
         (1, True, 5, 1.5, "x", b"y", Decimal("1.25"), dt.date(1970, 1, 2), None, [1.0, None], ["t"])],
        schema,
    )
    with caplog.at_level(logging.INFO, logger="petastream.spark"):
        m = materialize(df, cache_dir, null_policy="fill")
    assert "column 'a': a task met only null arrays" in caplog.text
    assert m.columns["a"] == "ndarray:float32:2" and len(read_rows(m.url)) == 2
    nulls = spark.createDataFrame([(i, None if i == 3 else f"s{i}") for i in range(8)],
                                  "id long, s string").repartition(4)
    with pytest.raises(NullValuesError, match=r"'s': 1 row\(s\)"):
        materialize(nulls, cache_dir)
    jobs = {k: v for k, v in _jobs(spark).items() if k not in before}
    assert len(jobs) >= 4  # two writes and the aggregate between, the null write and its count
    assert set(jobs.values()) == {("SUCCEEDED", 0, 0)}
