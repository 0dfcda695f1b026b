"""``loader.stats()`` of a Parquet source on S3: its GETs and bytes, counted on the server."""

from __future__ import annotations

import numpy as np
import pytest

from petastream.parquet import open_parquet
from petastream.pipeline import BatchLoader
from tests.parquet.conftest import N

pytestmark = pytest.mark.cloud


@pytest.mark.timeout(300)
@pytest.mark.parametrize("fetch", ["file", "row_group"])
def test_stats_count_the_gets_of_files_and_row_group_ranges(s3_data, tmp_path, fetch):
    url, server = s3_data
    src = open_parquet(url, columns=["id", "s"], cache_dir=str(tmp_path / "cache"), fetch=fetch,
                       cache_decoded=False)
    server.reset()  # (after the open: its footer reads are not the loader's)
    loader = BatchLoader(src, 50, shuffle=True, num_workers=2)
    ids = np.concatenate([b["id"] for b in loader])
    assert np.array_equal(np.sort(ids), np.arange(N))
    gets = [path for method, path in server.requests() if method == "GET" and path.endswith(".parquet")]
    stats = loader.stats()
    assert stats["gets"] == len(gets) > 0
    # One cache entry filled per file, or per row group.
    assert stats["cache_misses"] == (len(src.files) if fetch == "file" else src.num_shards)
    if fetch == "file":  # each file whole
        assert stats["bytes_fetched"] == sum(f.ref.size for f in src.plan.files)
    else:  # the projected columns' ranges and the footers: part of each file
        assert 0 < stats["bytes_fetched"] < sum(f.ref.size for f in src.plan.files)
    assert stats["rows"] == N and stats["skipped"] == 0
