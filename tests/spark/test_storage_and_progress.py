"""Object-store publishing (pointer file, loopback S3), the codec chosen by destination, and
progress logging."""

from __future__ import annotations

import json
import logging

import pytest

import petastream
from petastream.spark import materialize

pytestmark = pytest.mark.spark


def test_auto_compression_is_none_on_local_disk_and_zstd_where_bytes_travel(monkeypatch):
    from petastream.spark.materializer import default_compression

    monkeypatch.setenv("PETASTREAM_REMOTE_MOUNTS", "/mnt/nfs-data")
    for local in ("/tmp/cache", "file:///tmp/cache", "relative/cache", "/mnt/nfs-data-x/c"):
        assert default_compression(local) is None, local
    for remote in ("s3://bucket/cache", "abfs://c@acct/cache", "gs://b/c", "/dbfs/tmp/cache",
                   "file:///dbfs/tmp/cache", "/Volumes/main/default/vol/cache", "/mnt/nfs-data/c"):
        assert default_compression(remote) == "zstd:1", remote


def test_the_default_writes_raw_shards_locally_and_a_bad_codec_fails_before_the_job(
        spark, cache_dir):
    from petastream.errors import InvalidArgumentError

    df = spark.range(0, 50, 1, 2).selectExpr("id", "id % 3 as label")
    m = materialize(df, cache_dir)
    assert {s["compression"] for s in petastream.open(m.url).shards} == {None}
    jobs = spark.sparkContext.statusTracker().getJobIdsForGroup()
    with pytest.raises(InvalidArgumentError, match=r"compression='lz4': unknown compression.*'auto'"):
        materialize(df, cache_dir, compression="lz4", reuse=False)
    assert spark.sparkContext.statusTracker().getJobIdsForGroup() == jobs


@pytest.mark.cloud
def test_s3_dataset_is_published_by_a_pointer_file(spark, s3_bucket, s3_endpoint):
    import s3fs

    from petastream.spark import materializer

    materializer._REGISTRY.clear()
    so = {"key": "testing", "secret": "testing",
          "client_kwargs": {"endpoint_url": s3_endpoint, "region_name": "us-east-1"}}
    parent = f"{s3_bucket}/cache"
    df = spark.range(0, 50, 1, 3).selectExpr("id", "array(cast(id as float), 1f) as a")
    m = materialize(df, parent, storage_options=so)
    assert m.created and m.url.startswith(f"{parent}/.petastream-tmp-{m.key}-")
    fs = s3fs.S3FileSystem(**so)
    marker = f"{parent}/petastream-{m.key}.json"
    assert json.loads(fs.cat_file(marker))["url"] == m.url
    ds = petastream.open(m.url, storage_options=so)
    assert sorted(int(i) for i in ds.read(range(len(ds)), ["id"])["id"]) == list(range(50))
    assert {s["compression"] for s in ds.shards} == {"zstd:1"}  # 'auto' where bytes travel
    materializer._REGISTRY.clear()
    again = materialize(df, parent, storage_options=so)
    assert again.reused and again.url == m.url
    m.delete()
    assert not fs.exists(marker) and not fs.exists(m.url)


def test_progress_lines_while_the_job_runs(spark, cache_dir, caplog):
    from pyspark.sql import functions as F

    slow = F.udf(lambda i: __import__("time").sleep(0.002) or i, "long")
    df = spark.range(0, 400, 1, 2).select(slow("id").alias("id"))
    with caplog.at_level(logging.INFO, logger="petastream.spark"):
        materialize(df, cache_dir, progress_interval=0.1)
    assert "materializing: " in caplog.text and "tasks done" in caplog.text
    assert "materialized 400 rows" in caplog.text and "rows/s" in caplog.text
