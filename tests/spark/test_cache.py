"""De-duplication, the content-keyed cache, publishing, interruption, edge-case shapes."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time

import pytest

import petastream
from petastream.spark import MaterializationError, cache, materialize
from petastream.spark.materializer import describe
from tests.spark.helpers import read_rows

pytestmark = pytest.mark.spark

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _datasets(parent: str) -> list[str]:
    """What the parent directory holds, without the claims' bookkeeping."""
    from petastream.spark.claims import CLAIM_DIR

    return sorted(n for n in os.listdir(parent) if n != CLAIM_DIR)


def test_in_process_dedup_like_petastorm(spark, cache_dir, tmp_path):
    a = materialize(spark.range(10), cache_dir)
    b = materialize(spark.range(10), cache_dir)
    assert a.url == b.url and a.created and b.reused
    c = materialize(spark.range(20), cache_dir)
    assert c.url != a.url
    d = materialize(spark.range(10), cache_dir, compression="zstd:1")  # the local default is none
    e = materialize(spark.range(10), cache_dir, size_limit=1 << 20)
    f = materialize(spark.range(10), cache_dir, dtype="float64")
    assert len({a.url, d.url, e.url, f.url}) == 4
    other = str(tmp_path / "other")
    g = materialize(spark.range(10), other)
    h = materialize(spark.range(10), other + "/")
    assert g.url.startswith(other) and g.url != a.url and h.url == g.url
    assert len([n for n in _datasets(cache_dir) if n.startswith("petastream-")]) == 5
    assert not [n for n in _datasets(cache_dir) if n.startswith(".petastream-tmp-")]


def test_rdd_backed_dataframes_dedup_in_process_only(spark, cache_dir):
    df = spark.createDataFrame([(1, "a"), (2, "b")], "id long, s string")  # LogicalRDD
    a = materialize(df, cache_dir)
    assert materialize(df, cache_dir).url == a.url
    # the same rows in a new DataFrame are a new RDD: no content key can pin them
    other = spark.createDataFrame([(1, "a"), (2, "b")], "id long, s string")
    assert materialize(other, cache_dir).url != a.url
    assert cache.content_key(df, {})[1] is False
    assert cache.content_key(spark.range(3), {})[1] is True


def test_delete_forgets_and_removes(spark, cache_dir):
    a = materialize(spark.range(5), cache_dir)
    a.delete()
    assert not os.path.exists(a.url)
    b = materialize(spark.range(5), cache_dir)
    assert b.created and b.url == a.url and os.path.exists(b.url)


def test_content_key_changes_with_input_files(spark, cache_dir, tmp_path):
    pq = str(tmp_path / "pq")
    spark.range(30).write.parquet(pq)
    a = materialize(spark.read.parquet(pq), cache_dir)
    # unchanged files, fresh DataFrame, forgotten in-process entry: found by its content key
    from petastream.spark import materializer

    materializer._REGISTRY.clear()
    b = materialize(spark.read.parquet(pq), cache_dir)
    assert b.reused and b.url == a.url
    spark.range(40).write.mode("overwrite").parquet(pq)
    materializer._REGISTRY.clear()
    c = materialize(spark.read.parquet(pq), cache_dir)
    assert c.created and c.url != a.url and len(c) == 40


def test_path_arguments(spark, cache_dir, tmp_path):
    pq = str(tmp_path / "pq")
    spark.range(12).selectExpr("id", "id * 2 as x").write.parquet(pq)
    m = materialize(pq, cache_dir, spark=spark)
    assert m.created and len(m) == 12
    assert [int(r["x"]) for r in read_rows(m.url)] == [2 * i for i in range(12)]
    again = materialize(m.url, cache_dir)  # an MDS directory is used as is, no Spark needed
    assert again.reused and again.url == m.url and len(again) == 12


def test_parent_from_spark_conf(spark, cache_dir):
    spark.conf.set(cache.PETASTORM_PARENT_CONF, "file://" + cache_dir)
    try:
        m = materialize(spark.range(3))
    finally:
        spark.conf.unset(cache.PETASTORM_PARENT_CONF)
    assert m.url.startswith("file://" + cache_dir) and len(m.open()) == 3
    with pytest.raises(ValueError, match="parentCacheDirUrl"):
        materialize(spark.range(4))


def test_empty_dataframe_is_a_valid_empty_dataset(spark, cache_dir):
    df = spark.range(0).selectExpr("id", "cast(id as double) as x", "array(1d, 2d) as a")
    m = materialize(df, cache_dir)
    ds = petastream.open(m.url)
    assert len(ds) == 0 and m.num_shards == 1
    assert ds.columns == {"id": "int64", "x": "float32", "a": "ndarray:float32"}


def test_more_partitions_than_rows(spark, cache_dir):
    df = spark.range(0, 3, 1, numPartitions=8)
    m = materialize(df, cache_dir)
    assert len(m) == 3 and m.num_shards == 3
    assert [int(r["id"]) for r in read_rows(m.url)] == [0, 1, 2]
    subs = [d for d in os.listdir(m.url) if os.path.isdir(os.path.join(m.url, d))]
    assert len([d for d in subs if not d.startswith(".")]) == 3  # and .leases


def test_failed_task_publishes_nothing_and_a_rerun_works(spark, cache_dir, tmp_path):
    from pyspark.sql import functions as F

    flag = str(tmp_path / "fail-now")
    open(flag, "w").close()

    def maybe_fail(i):
        if i == 37 and os.path.exists(flag):
            raise RuntimeError("simulated executor failure")
        return i

    fail = F.udf(maybe_fail, "long")
    df = spark.range(0, 60, 1, 4).select(fail("id").alias("id"))
    with pytest.raises(MaterializationError, match="simulated executor failure"):
        materialize(df, cache_dir)
    # no final dataset; the attempt was discarded (a task of the aborted job may still write
    # into it afterwards, but never an index.json)
    assert not [n for n in _datasets(cache_dir) if not n.startswith(".petastream-tmp-")]
    assert not glob.glob(f"{cache_dir}/.*/index.json")
    os.remove(flag)
    m = materialize(df, cache_dir)
    assert m.created and sorted(int(r["id"]) for r in read_rows(m.url)) == list(range(60))


def test_killed_attempt_is_never_read_as_complete(spark, cache_dir):
    df = spark.range(0, 20, 1, 2)
    m = materialize(df, cache_dir, keep_at_exit=True)
    key = m.key
    m.delete()
    # what a kill midway leaves: an attempt directory with shards but no index.json
    planted = cache.attempt_url(cache_dir, key)
    os.makedirs(planted + "/00000-1-deadbeef")
    with open(planted + "/00000-1-deadbeef/shard.00000.mds", "wb") as f:
        f.write(b"\0" * 64)
    assert cache.find_complete(cache_dir, key) is None
    with pytest.raises(FileNotFoundError):
        petastream.open(planted)
    again = materialize(df, cache_dir)
    assert again.created and again.url == m.url and len(again) == 20
    assert os.path.isdir(planted)  # left alone: it is someone's (dead) attempt


def test_publish_race_loser_uses_the_winner(tmp_path):
    import petastream as ps

    parent = str(tmp_path)
    attempts = []
    for _ in range(2):
        url = cache.attempt_url(parent, "k1")
        ps.write_mds({"id": [1, 2, 3]}, url, columns={"id": "int64"})
        attempts.append(url)
    url1, won1 = cache.publish(parent, "k1", attempts[0])
    url2, won2 = cache.publish(parent, "k1", attempts[1])
    assert (won1, won2) == (True, False) and url1 == url2
    assert _datasets(parent) == ["petastream-k1"]
    assert cache.find_complete(parent, "k1") == url1


def test_delete_at_exit_runs_in_a_fresh_interpreter(tmp_path):
    target = tmp_path / "petastream-x"
    target.mkdir()
    (target / "index.json").write_text("{}")
    code = ("from petastream.spark import cache; "
            f"cache.register_atexit({str(target)!r}, None)")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    assert not target.exists()


def test_two_processes_convert_at_once_then_this_process_reuses(spark, spark_connect, connect_port,
                                                                cache_dir, tmp_path):
    pq = str(tmp_path / "pq")
    spark.range(0, 5000, 1, 4).selectExpr("id", "array(cast(id as double), id * 2d) as a").write.parquet(pq)
    go = str(tmp_path / "go")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs = [subprocess.Popen([sys.executable, "-m", "tests.spark.convert_script", pq, cache_dir, go,
                               f"sc://127.0.0.1:{connect_port}"],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    deadline = time.time() + 120
    while len(glob.glob(go + ".ready-*")) < 2 and time.time() < deadline:
        if any(p.poll() is not None for p in procs):
            break
        time.sleep(0.1)
    open(go, "w").close()
    results = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert results[0]["url"] == results[1]["url"]
    assert sorted(r["created"] for r in results) == [False, True]
    assert all(r["complete_ids"] and r["n"] == 5000 for r in results)
    assert [n for n in _datasets(cache_dir)] == [os.path.basename(results[0]["url"])]
    # a third process (this one) converting the unchanged DataFrame writes nothing
    m = materialize(spark.read.parquet(pq), cache_dir)
    assert m.reused and not m.created and m.url == results[0]["url"]
    assert describe(m.url).num_samples == 5000


def test_sweep_removes_unreported_task_attempts(tmp_path):
    from petastream.spark._attempt import sweep

    attempt = tmp_path / "attempt"
    for sub in ("00000-1-aa", "00000-7-bb", "00001-2-cc"):
        (attempt / sub).mkdir(parents=True)
        (attempt / sub / "shard.00000.mds").write_bytes(b"x")
    (attempt / "index.json").write_text("{}")
    sweep(str(attempt), ["00000-1-aa", "00001-2-cc"], None)
    assert sorted(os.listdir(attempt)) == ["00000-1-aa", "00001-2-cc", "index.json"]


def test_incompressible_partitions_are_stored_uncompressed(spark, cache_dir):
    """min_compression_saving (0.1 by default): a task's shard of random bytes is stored as an
    uncompressed shard, one of text compressed; the dataset reads back whole either way, and 0
    compresses every shard."""
    from pyspark.sql import functions as F

    random = F.unhex(F.concat(*[F.sha2(F.concat(F.col("id").cast("string"), F.lit(k)), 512) for k in range(4)]))
    df = spark.range(4000, numPartitions=2).select(
        "id", F.when(F.col("id") < 2000, random)  # 256 random bytes a row: as JPEG bytes look
         .otherwise(F.encode(F.repeat(F.lit("text "), 20), "utf-8")).alias("b"))
    mixed = materialize(df, cache_dir, compression="zstd:1")
    shards = petastream.open(mixed.url).shards
    assert sorted(str(s["compression"]) for s in shards) == ["None", "zstd:1"]
    rows = read_rows(mixed.url)
    assert [r["id"] for r in rows] == list(range(4000)) and rows[0]["b"] != rows[3999]["b"] == b"text " * 20
    every = materialize(df, cache_dir, compression="zstd:1", min_compression_saving=0)
    assert [s["compression"] for s in petastream.open(every.url).shards] == ["zstd:1", "zstd:1"]
    with pytest.raises(petastream.errors.InvalidArgumentError, match="min_compression_saving"):
        materialize(df, cache_dir, min_compression_saving=1.5)
