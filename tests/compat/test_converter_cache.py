"""The converter and the node's shard cache: delete() takes the cached copies with it, and a
materialized dataset records xxh3_64 hashes by default (checked as shards enter the cache)."""

from __future__ import annotations

import json
import os

import pytest

from petastream.compat import make_spark_converter
from petastream.storage.cache import ShardCache

pytestmark = [pytest.mark.spark, pytest.mark.torch]


def test_delete_removes_the_cached_copies(spark, converter_env):
    conv = make_spark_converter(spark.range(5000).selectExpr("id", "cast(id as string) as s"),
                                compression_codec="lz4")  # compressed: read through the cache
    path = conv.cache_dir_url[len("file://"):]
    index = json.loads(open(os.path.join(path, "index.json")).read())
    assert {s["compression"] for s in index["shards"]} == {"zstd:1"}
    assert all(set(s["zip_data"]["hashes"]) == {"xxh3_64"} for s in index["shards"])
    with conv.make_torch_dataloader(batch_size=100, num_epochs=1) as loader:
        assert sum(len(b["id"]) for b in loader) == 5000
    cache = ShardCache.at()
    assert cache.usage().entries == len(index["shards"])  # the decompressed copies
    conv.delete()
    assert not os.path.exists(path) and cache.usage().entries == 0
