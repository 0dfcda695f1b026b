"""Object-store publishing (pointer file, loopback S3) and progress logging."""

from __future__ import annotations

import json
import logging

import pytest

import petastream
from petastream.spark import materialize

pytestmark = pytest.mark.spark


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
