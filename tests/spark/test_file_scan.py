"""Materializing a plain Parquet scan by reading its files in the tasks (spark/_file_scan.py):
the same MDS columns and the same decoded values as the ``mapInArrow`` path (conf ``off``),
classic and Spark Connect; every plan it cannot honour exactly writes through Spark."""

from __future__ import annotations

import json
import logging
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import petastream
from petastream.errors import EncodingError, MaterializationError
from petastream.spark import materialize
from petastream.spark._file_scan import CONF, SCAN_MARKER, ScanJob, plan_scan, read_slice
from petastream.spark.schema import prepare
from tests.spark.helpers import functions_for as _functions
from tests.spark.helpers import session_for as _session

pytestmark = pytest.mark.spark

FAST = "reading the DataFrame's files in the tasks"
FALLBACK = "writing through Spark instead"


def _table(lo: int, hi: int) -> pa.Table:
    ids = np.arange(lo, hi)
    rng = np.random.default_rng(lo)
    x = rng.standard_normal(len(ids))
    x[::17] = np.nan
    return pa.table({
        "id": pa.array(ids, pa.int64()), "label": pa.array(ids % 7, pa.int32()),
        "small": pa.array(ids % 100, pa.int8()), "mid": pa.array(ids % 3000, pa.int16()),
        "flag": pa.array(ids % 3 == 0), "x": pa.array(x), "f": pa.array(x.astype(np.float32)),
        "name": pa.array([f"row-{i}-é" for i in ids]),
        "payload": pa.array([bytes([i % 256]) * (i % 9) for i in ids], pa.binary()),
        "feat": pa.array(list(rng.standard_normal((len(ids), 4)).astype(np.float32)), pa.list_(pa.float32())),
        "var": pa.array([list(np.arange(1 + i % 5) * 0.1 + i) for i in ids], pa.list_(pa.float64())),
        "bits": pa.array([[i % 2 == 0, True] for i in ids], pa.list_(pa.bool_())),
    })


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("filescan")
    plain = root / "plain"
    os.makedirs(plain)
    for k, (lo, hi) in enumerate([(0, 700), (700, 1000), (1000, 1001)]):
        pq.write_table(_table(lo, hi), plain / f"part-{k}.parquet", row_group_size=200)
    parted = root / "parted" / "k=1"
    os.makedirs(parted)
    pq.write_table(_table(0, 10), parted / "a.parquet")
    odd = root / "odd"
    os.makedirs(odd)
    t = _table(0, 50).select(["id", "label"])
    # the same column as int32 in a later file: Spark widens it to the first file's int64,
    # the tasks must not guess
    pq.write_table(t.set_column(1, "label", t["label"].cast(pa.int64())), odd / "part-0.parquet")
    pq.write_table(t, odd / "part-1.parquet")
    return {"plain": str(plain), "parted": str(root / "parted"), "odd": str(odd)}


def _rows(url: str) -> dict[int, dict]:
    ds = petastream.open(url)
    return {int(r["id"]): r for r in (ds[i] for i in range(len(ds)))}


def _same(a: object, b: object) -> bool:
    if isinstance(a, (np.ndarray, np.generic)) or isinstance(b, (np.ndarray, np.generic)):
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, float) and isinstance(b, float):
        return np.float64(a).tobytes() == np.float64(b).tobytes()
    return type(a) is type(b) and a == b


MODES = ["classic", "classic-tasks", "connect"]  # local classic: the driver's threads by default


def _both_ways(spark, df, parent: str, caplog, mode: str, **kwargs) -> tuple:
    with caplog.at_level(logging.INFO, logger="petastream.spark"):
        caplog.clear()
        if mode.endswith("tasks"):
            spark.conf.set(CONF, "tasks")
        try:
            fast = materialize(df, parent + "/fast", reuse=False, keep_at_exit=True, **kwargs)
        finally:
            spark.conf.unset(CONF)
        took = FAST in caplog.text and ("thread(s)" in caplog.text) == (mode == "classic")
        spark.conf.set(CONF, "off")
        try:
            slow = materialize(df, parent + "/spark", reuse=False, keep_at_exit=True, **kwargs)
        finally:
            spark.conf.unset(CONF)
    return fast, slow, took


def _check_same(fast, slow) -> None:
    assert fast.columns == slow.columns and len(fast) == len(slow)
    meta = [json.load(open(os.path.join(m.url.replace("file://", ""), "index.json")))["shards"][0]
            for m in (fast, slow)]
    for k in ("column_names", "column_encodings", "column_sizes", "compression", "hashes"):
        assert meta[0][k] == meta[1][k], k
    got, want = _rows(fast.url), _rows(slow.url)
    assert got.keys() == want.keys()
    for i, row in want.items():
        for name, value in row.items():
            assert _same(got[i][name], value), (i, name, got[i][name], value)


@pytest.mark.parametrize("mode", MODES)
def test_a_plain_scan_writes_what_the_spark_path_writes(request, files, tmp_path, caplog, mode):
    spark = _session(request, mode.split("-")[0])
    df = spark.read.parquet(files["plain"])
    fast, slow, took = _both_ways(spark, df, str(tmp_path), caplog, mode)
    assert took, caplog.text
    assert len(fast) == 1001 and fast.columns["feat"] == "ndarray:float32:4"
    assert fast.columns["var"] == "ndarray:float32" and fast.columns["x"] == "float32"
    _check_same(fast, slow)


@pytest.mark.parametrize("mode", MODES)
def test_a_projection_and_filter_are_honoured(request, files, tmp_path, caplog, mode):
    spark, F = _session(request, mode.split("-")[0]), _functions(mode.split("-")[0])
    df = (spark.read.parquet(files["plain"]).where((F.col("label") < 3) | F.col("flag"))
          .select("payload", "id", "var", "name"))
    fast, slow, took = _both_ways(spark, df, str(tmp_path), caplog, mode, dtype="float64",
                                  compression="zstd:1")
    assert took, caplog.text
    assert sorted(fast.columns) == ["id", "name", "payload", "var"] and fast.columns["var"] == "ndarray:float64"
    assert len(fast) == df.count()
    _check_same(fast, slow)


@pytest.mark.parametrize("where", ["threads", "tasks"])
def test_a_file_read_otherwise_falls_back_to_spark(spark, files, tmp_path, caplog, where):
    df = spark.read.parquet(files["odd"])
    job, why = plan_scan(df, prepare(df, dtype="float32", nested="error")[1], null_policy="error")
    assert job is not None and job.threads == 2, why
    try:
        expected = sorted(r["label"] for r in df.where(df.id.isin(list(range(50)))).dropDuplicates(["id"]).collect())
    except Exception:  # Spark < 4 does not widen a file's int32 to the bigint it inferred: it
        expected = None  # cannot read these files itself, so the Spark path must fail as Spark does
    if where == "tasks":
        spark.conf.set(CONF, "tasks")
    try:
        with caplog.at_level(logging.INFO, logger="petastream.spark"):
            if expected is None:
                with pytest.raises(MaterializationError):
                    materialize(df, str(tmp_path), reuse=False, keep_at_exit=True)
            else:
                m = materialize(df, str(tmp_path), reuse=False, keep_at_exit=True)
    finally:
        spark.conf.unset(CONF)
    assert FALLBACK in caplog.text and SCAN_MARKER in caplog.text
    if expected is not None:
        assert len(m) == 100 and m.columns["id"] == "int64"
        assert sorted(int(r["label"]) for r in _rows(m.url).values()) == expected


@pytest.mark.parametrize("mode", ["classic", "connect"])
def test_plans_the_tasks_cannot_honour_take_the_spark_path(request, files, mode):
    spark, F = _session(request, mode), _functions(mode)
    base = spark.read.parquet(files["plain"])

    def verdict(df, null_policy="error"):
        return plan_scan(df, prepare(df, dtype="float32", nested="json")[1], null_policy=null_policy)

    assert verdict(base)[0] is not None
    cases = {
        "a cast": base.select(F.col("id").cast("int").alias("id")),
        "a computed column": base.withColumn("y", F.col("id") + 1),
        "a float filter": base.where(F.col("x") > 0),
        "a partitioned directory": spark.read.parquet(files["parted"]),
        "a limit": base.limit(5),
        "a date column": base.select("id", F.current_date().alias("d")),
    }
    for what, df in cases.items():
        job, why = verdict(df)
        assert job is None, what
        assert why, what
    job, why = verdict(base, null_policy="fill")
    assert job is None and "fill" in why
    spark.conf.set(CONF, "off")
    try:
        job, why = verdict(base)
    finally:
        spark.conf.unset(CONF)
    assert job is None and CONF in why


def test_a_file_not_read_as_spark_reads_it_is_refused_in_the_task(files):
    path = os.path.join(files["plain"], "part-0.parquet")
    job = ScanJob((path,), ("id", "label"), ("bigint", "bigint"), ("bigint", "bigint"))
    with pytest.raises(EncodingError, match=SCAN_MARKER + ".*'label'.*int32"):
        list(read_slice(job, path, 0))
    job = ScanJob((path,), ("ID",), ("bigint",), ("bigint",))
    with pytest.raises(EncodingError, match=SCAN_MARKER + ".*'ID'"):
        list(read_slice(job, path, 0))
    # slices of its row groups cover every row once (4 row groups, 3 slices)
    job = ScanJob((path,), ("id",), ("bigint",), ("bigint",), parts=3)
    ids = [i for p in range(3) for b in read_slice(job, path, p) for i in b.column(0).to_pylist()]
    assert ids == list(range(700))


@pytest.mark.cloud
@pytest.mark.parametrize("where", ["threads", "tasks"])
def test_a_scan_written_to_s3_is_published_like_the_spark_paths(spark, files, s3_bucket, s3_endpoint,
                                                                caplog, where):
    """Remote cache dir (moto S3): the slices' shards, the pointer file, index.json last."""
    import s3fs

    so = {"key": "testing", "secret": "testing",
          "client_kwargs": {"endpoint_url": s3_endpoint, "region_name": "us-east-1"}}
    parent = f"{s3_bucket}/filescan-{where}"
    df = spark.read.parquet(files["plain"]).select("id", "name", "feat")
    spark.conf.set(CONF, "tasks" if where == "tasks" else "auto")
    try:
        with caplog.at_level(logging.INFO, logger="petastream.spark"):
            m = materialize(df, parent, storage_options=so, reuse=False, keep_at_exit=True)
    finally:
        spark.conf.unset(CONF)
    assert FAST in caplog.text
    assert m.created and m.url.startswith(f"{parent}/.petastream-tmp-{m.key}-")
    fs = s3fs.S3FileSystem(**so)
    assert json.loads(fs.cat_file(f"{parent}/petastream-{m.key}.json"))["url"] == m.url
    ds = petastream.open(m.url, storage_options=so)
    got = ds.read(range(len(ds)), ["id", "name"])
    assert sorted(int(i) for i in got["id"]) == list(range(1001))
    assert "zstd:1" in {s["compression"] for s in ds.shards}  # 'auto' remote (the 1-row shard saves <10%)
    m.delete()


def test_a_failed_write_in_threads_leaves_nothing_complete(spark, tmp_path):
    """A null in a slice (null_policy='error'): the error names the column, the attempt is
    discarded, nothing under the parent reads as a dataset."""
    from petastream.spark import NullValuesError

    src = tmp_path / "nulls"
    os.makedirs(src)
    pq.write_table(pa.table({"id": pa.array(range(100), pa.int64()),
                             "label": pa.array([None if i == 77 else i for i in range(100)], pa.int32())}),
                   src / "part-0.parquet", row_group_size=10)
    parent = tmp_path / "cache"
    df = spark.read.parquet(str(src))
    assert plan_scan(df, prepare(df, dtype="float32", nested="error")[1], null_policy="error")[0].threads
    with pytest.raises(NullValuesError, match="'label': 1 row"):
        materialize(df, str(parent), reuse=False, keep_at_exit=True)
    assert not [p for p in parent.rglob("index.json")]


def test_many_small_files_are_read_a_few_slices_per_core(spark, tmp_path):
    src = tmp_path / "many"
    os.makedirs(src)
    for k in range(20):
        pq.write_table(_table(5 * k, 5 * k + 5).select(["id", "name", "feat"]), src / f"part-{k:02d}.parquet")
    df = spark.read.parquet(str(src))
    job, why = plan_scan(df, prepare(df, dtype="float32", nested="error")[1], null_policy="error")
    assert job is not None and job.group == 3 and job.parts == 1 and job.pieces == 7, why  # local[2]: 4 per core
    covered = [pair for piece in range(job.pieces) for pair in job.slices(piece)]
    assert covered == [(f, 0) for f in job.files]
    m = materialize(df, str(tmp_path / "cache"), reuse=False, keep_at_exit=True)
    assert m.num_shards == 7 and sorted(_rows(m.url)) == list(range(100))
