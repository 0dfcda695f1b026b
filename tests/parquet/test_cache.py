"""Local files through the shard cache (read_in_place=False, as FUSE mounts are): whole files or
row-group ranges, checked on fill."""

from __future__ import annotations

import os

import numpy as np
import pytest

from petastream.errors import CorruptShardError
from petastream.parquet import open_parquet
from petastream.storage.cache import ShardCache
from tests.parquet.conftest import N
from tests.parquet.helpers import assert_same, write_files


@pytest.mark.parametrize("fetch", ["file", "row_group"])
def test_cached_reads_equal_in_place_reads(pq_dir, tmp_path, fetch):
    cache_dir = str(tmp_path / "cache")
    src = open_parquet(pq_dir, read_in_place=False, fetch=fetch, cache_dir=cache_dir, rows_per_shard=17,
                       cache_decoded=False)  # the files or ranges only (decoded copies: test_decoded)
    local = open_parquet(pq_dir, rows_per_shard=17)
    assert src.fetch == fetch
    ids = np.random.default_rng(5).permutation(N)
    assert_same(src.read(ids), local.read(ids))
    usage = ShardCache.at(cache_dir).usage()
    entries = len(src.files) if fetch == "file" else len(src.plan.units)
    assert usage.entries == entries
    assert src.cached_shard_bytes().sum() == usage.bytes  # the shards' shares add up to the cache's bytes
    assert (src.cached_shard_bytes() > 0).all()


@pytest.mark.parametrize("fetch", ["file", "row_group"])
def test_a_file_rewritten_in_place_fails_its_fill(tmp_path, data, fetch):
    paths = write_files(data, str(tmp_path / "d"), files=1)
    src = open_parquet(str(tmp_path / "d"), read_in_place=False, fetch=fetch, cache_dir=str(tmp_path / "c"))
    size = os.path.getsize(paths[0])
    with open(paths[0], "r+b") as f:  # same size, another footer (a statistic's byte changed)
        f.seek(size - src.plan.files[0].footer_bytes + 40)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(CorruptShardError, match="footer differs from the one read when the source was opened"):
        src.read(np.array([0]))
