"""Parquet on S3 (a moto server on loopback): one download per file per node, row-group ranges,
a bounded cache, worker processes sharing it."""

from __future__ import annotations

import multiprocessing
from collections import Counter

import numpy as np
import pytest

from petastream.parquet import open_parquet
from petastream.storage.cache import ShardCache
from tests.parquet.conftest import N
from tests.parquet.helpers import assert_same

pytestmark = pytest.mark.cloud


def _parquet_gets(server) -> Counter:
    return Counter(path for method, path in server.requests() if method == "GET" and path.endswith(".parquet"))


def _read_all(opener) -> int:
    """In a spawned process: every row, in a shuffled order; the sum of the ids."""
    src = opener()
    ids = np.random.default_rng(src.num_shards).permutation(len(src))
    got = src.read(ids, ["id", "s"])
    assert got["s"].tolist() == [f"text-{i}-é" for i in got["id"]]
    return int(got["id"].sum())


@pytest.mark.timeout(300)
def test_each_file_is_downloaded_once_per_node(s3_data, pq_dir, tmp_path):
    url, server = s3_data
    # The files only (their decoded copies: test_decoded_row_groups_serve_later_readers_without_gets).
    src = open_parquet(url, cache_dir=str(tmp_path / "cache"), cache_limit="1gb", fetch="file", cache_decoded=False)
    local = open_parquet(pq_dir)
    assert src.columns == local.columns and src.shard_sizes.tolist() == local.shard_sizes.tolist()
    assert src.cached_shard_bytes().sum() == sum(f.ref.size for f in src.plan.files)
    server.reset()
    ids = np.random.default_rng(0).permutation(N)
    for _ in range(2):  # two passes: the second from the cache
        assert_same(src.read(ids), local.read(ids))
        src.close()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:  # two worker processes of this node, with this process's cache
        sums = pool.map(_read_all, [src.reopener()] * 2)
    assert sums == [N * (N - 1) // 2] * 2
    gets = _parquet_gets(server)
    assert len(gets) == len(src.files) and set(gets.values()) == {1}, gets


@pytest.mark.timeout(300)
def test_a_projection_fetches_row_group_ranges(s3_data, pq_dir, tmp_path):
    url, server = s3_data
    # Two of fourteen columns; but these tiny row groups' ranges are smaller than the footer
    # each entry keeps a copy of, so "auto" fetches whole files: ask for ranges.
    assert open_parquet(url, columns=["id", "s"], cache_dir=str(tmp_path / "cache")).fetch == "file"
    src = open_parquet(url, columns=["id", "s"], cache_dir=str(tmp_path / "cache"), fetch="row_group",
                       cache_decoded=False)
    local = open_parquet(pq_dir, columns=["id", "s"])
    server.reset()
    ids = np.random.default_rng(1).permutation(N)
    assert_same(src.read(ids), local.read(ids))
    first = sum(_parquet_gets(server).values())
    # per row group: its column chunks (two ranges: other columns lie between) and the footer
    assert first == sum(len(u.ranges) + 1 for u in src.plan.units) == 3 * len(src.plan.units)
    src.close()
    assert_same(src.read(ids[::-1]), local.read(ids[::-1]))
    assert sum(_parquet_gets(server).values()) == first  # the second pass reads the cache only
    entries = ShardCache.at(str(tmp_path / "cache")).usage()
    assert entries.entries == len(src.plan.units)
    assert entries.bytes == sum(u.range_bytes + src.plan.files[u.file].footer_bytes for u in src.plan.units)
    assert src.cached_shard_bytes().sum() == entries.bytes


@pytest.mark.timeout(300)
def test_decoded_row_groups_serve_later_readers_without_gets(s3_data, pq_dir, tmp_path):
    url, server = s3_data
    cache_dir = str(tmp_path / "cache")
    src = open_parquet(url, cache_dir=cache_dir)  # remote: decoded copies kept by default
    local = open_parquet(pq_dir)
    ids = np.random.default_rng(2).permutation(N)
    server.reset()
    assert_same(src.read(ids), local.read(ids))
    assert len(_parquet_gets(server)) == len(src.files)
    cache = ShardCache.at(cache_dir)
    files = [f.key for f in cache.usage().files if not f.key.startswith("pqd-")]
    assert len(files) == len(src.files) and cache.usage().entries == len(src.files) + len(src.plan.units)
    cache.remove(files)  # the Parquet bytes are gone: a later reader needs only the decoded rows
    again = open_parquet(url, cache_dir=cache_dir)  # (which reads the footers)
    server.reset()
    assert_same(again.read(ids), local.read(ids))
    assert _parquet_gets(server) == Counter()


@pytest.mark.timeout(300)
def test_a_cache_limit_below_the_data_bounds_the_cache(s3_data, pq_dir, tmp_path):
    url, server = s3_data
    probe = open_parquet(url, cache_dir=str(tmp_path / "probe"))
    sizes = [f.ref.size for f in probe.plan.files]
    # Room for the file being read and the next one (read-ahead reaches into it), not three.
    limit = int(max(sizes) * 2.5)
    assert limit < sum(sizes)
    src = open_parquet(url, cache_dir=str(tmp_path / "cache"), cache_limit=limit, fetch="file", cache_decoded=False)
    local = open_parquet(pq_dir)
    cache = ShardCache.at(str(tmp_path / "cache"))
    server.reset()
    for s in range(src.num_shards):  # in shard order, read-ahead announced as a loader does
        src.prefetch(range(s, min(src.num_shards, s + 3)))
        assert_same(src.read_shard(s), local.read_shard(s))
        assert cache.usage().total_bytes <= limit
    assert cache.usage().entries < len(sizes)  # the first file was evicted to make room
    gets = _parquet_gets(server)
    assert len(gets) == len(sizes) and set(gets.values()) == {1}, gets  # each file once in a pass


@pytest.mark.timeout(300)
def test_a_shuffled_loader_epoch_within_a_bounded_cache(s3_data, tmp_path):
    from petastream.torch import loader

    url, server = s3_data
    probe = open_parquet(url, cache_dir=str(tmp_path / "probe"))
    limit = int(max(f.ref.size for f in probe.plan.files) * 2.5)
    src = open_parquet(url, cache_dir=str(tmp_path / "cache"), cache_limit=limit, fetch="file", columns=["id", "s"])
    dl = loader(src, 16, shuffle=True, seed=3, num_workers=2)
    assert dl.cache_fit is not None  # the shuffle window fitted to the cache (stream.budget)
    for _ in range(2):
        ids = [i for b in dl for i in b["id"].tolist()]
        assert sorted(ids) == list(range(N))
        assert ShardCache.at(str(tmp_path / "cache")).usage().total_bytes <= limit


def _large_row_groups(root: str, row_groups: int) -> None:
    """2 files of ``row_groups`` row groups of 136 rows of a 64 KiB random payload each (8.5 MiB
    of bytes per row group, uncompressed: just over the row-group fetch threshold)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = 136 * row_groups
    rng = np.random.default_rng(5)
    for k in range(2):
        payload = rng.integers(0, 256, (rows, 64 << 10), dtype=np.uint8)
        offsets = np.arange(rows + 1, dtype=np.int32) * payload.shape[1]
        tab = pa.table({"id": np.arange(k * rows, (k + 1) * rows),
                        "payload": pa.Array.from_buffers(pa.binary(), rows, [None, pa.py_buffer(offsets),
                                                                              pa.py_buffer(payload)])})
        pq.write_table(tab, f"{root}/part-{k}.parquet", compression="none", row_group_size=136)


@pytest.mark.timeout(300)
def test_files_of_large_row_groups_are_fetched_by_row_group(s3_bucket, pq_dir, tmp_path):
    import s3fs

    local = tmp_path / "large"
    local.mkdir()
    _large_row_groups(str(local), 2)
    s3fs.S3FileSystem().put(str(local) + "/", f"{s3_bucket[5:]}/large/", recursive=True)
    cache_dir = str(tmp_path / "cache")
    src = open_parquet(f"{s3_bucket}/large", cache_dir=cache_dir, cache_decoded=False)
    assert all(u.range_bytes >= 8 << 20 for u in src.plan.units)  # plan.SPLIT_ROW_GROUP_BYTES
    # Every byte of the files is read, but a file's row group is decoded as soon as its own
    # bytes are in, not once the whole file is: its entry holds its ranges and the footer only.
    assert src.fetch == "row_group"
    assert_same(src.read_shard(0), open_parquet(str(local)).read_shard(0))
    usage = ShardCache.at(cache_dir).usage()
    unit, size = src.plan.units[0], src.plan.files[0].ref.size
    assert usage.entries == 1 and usage.bytes == unit.range_bytes + src.plan.files[0].footer_bytes < size / 1.9
    # Whole files where a file holds one row group (nothing to overlap), or small row groups.
    single = tmp_path / "single"
    single.mkdir()
    _large_row_groups(str(single), 1)
    assert open_parquet(str(single)).fetch == "file"
    assert open_parquet(pq_dir).fetch == "file"
