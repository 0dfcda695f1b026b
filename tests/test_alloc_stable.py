"""The allocation-stable read prototype (``benchmarks/alloc_stable.py``, issue 36): a pooled
buffer is never handed out again while anything outside the pool refers to it, and the pooled
reads return what ``MDSDataset`` returns."""

from __future__ import annotations

import numpy as np
from benchmarks import alloc_stable

from petastream.mds.dataset import MDSDataset
from petastream.mds.writer import write_mds


def test_a_buffer_is_reused_only_once_nothing_refers_to_it():
    pool = alloc_stable.BufferPool(min_bytes=1024)
    a = pool.empty((1000,), np.float64)
    view = a[10:20]
    del a
    b = pool.empty((1000,), np.float64)  # a's buffer is still referred to (by view): a new one
    assert pool.allocated == 2 and not np.shares_memory(view, b)
    del view
    c = pool.empty((500,), np.int64)  # the first buffer is free again: reused, the smallest that fits
    assert pool.reused == 1 and pool.allocated == 2 and not np.shares_memory(b, c)
    assert pool.empty((10,), np.int8).base is None  # small: plain np.empty, not pooled


def test_pooled_reads_equal_the_dataset_reads(tmp_path):
    n = 3000
    rng = np.random.default_rng(0)
    data = {"id": np.arange(n, dtype=np.int64), "features": rng.random((n, 4), dtype=np.float32),
            "label": rng.integers(0, 10, n).astype(np.int32)}
    write_mds(data, str(tmp_path / "mds"), compression=None, size_limit=40_000)
    ds = MDSDataset(str(tmp_path / "mds"))
    assert ds.num_shards > 2 and ds.row_layout() is not None
    ids = rng.permutation(int(ds.shard_offsets[1]) - int(ds.shard_offsets[0]))[:500]
    got = alloc_stable.read_shard(ds, 0, ids, ["features", "label"], _original=None)
    want = ds.read_shard(0, ids, ["features", "label"])
    assert got.keys() == want.keys() and all(np.array_equal(got[k], want[k]) for k in want)
    picks = rng.permutation(n)[:1200]
    from petastream.stream.grouping import group_by_shard

    groups = group_by_shard(picks, ds.shard_offsets)
    assert len(groups) > 1
    got = alloc_stable.read_parts(ds, groups, len(picks), None, _original=None)
    want = ds.read(picks)
    assert got.keys() == want.keys() and all(np.array_equal(got[k], want[k]) for k in want)
    assert np.array_equal(got["id"], picks)
