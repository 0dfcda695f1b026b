"""Bulk decode of a tabular, all-fixed-size MDS dataset (~1M rows).

Compares, over the same shards:
* floor: ``np.frombuffer`` over the same bytes already in memory, columns copied out;
* petastream bulk: ``read_shard`` per shard (memory-mapped raw files), columns copied out;
* petastream bulk, shuffled: every shard read at a random permutation of its ids;
* petastream from zstd: the same dataset compressed; first pass decompresses into the cache;
* per-sample decode: ``ds[i]`` (Mosaic-style), timed on a subset and reported as rows/s.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

import petastream
from benchmarks.harness import Result, best_of
from petastream.mds.writer import write_mds

NAME = "mds_decode"


def _make(n: int, out: str, compression: str | None) -> None:
    rng = np.random.default_rng(0)
    write_mds({
        "id": np.arange(n, dtype=np.int64),
        "features": rng.random((n, 16), dtype=np.float32),
        "label": rng.integers(0, 10, n).astype(np.int32),
    }, out, compression=compression, size_limit=1 << 26)


def _copy_out(cols: dict) -> int:
    return sum(np.ascontiguousarray(c).nbytes for c in cols.values())


def run(args: argparse.Namespace) -> list[Result]:
    n = args.rows
    tmp = tempfile.mkdtemp(prefix="petastream-bench-")
    raw_url, zstd_url = os.path.join(tmp, "raw"), os.path.join(tmp, "zstd")
    _make(n, raw_url, None)
    _make(n, zstd_url, "zstd")
    ds = petastream.open(raw_url, cache_dir=os.path.join(tmp, "cache"))
    data_bytes = n * (8 + 64 + 4)
    results = []

    # floor: the same shard bytes, in memory, viewed with np.frombuffer
    blobs = []
    for s in range(ds.num_shards):
        with open(ds.local_raw_path(s), "rb") as f:
            blobs.append(f.read())
    dtype = ds.layout.fixed_dtype()

    def floor():
        for b, meta in zip(blobs, ds.shards):
            m = meta["samples"]
            start = int(np.frombuffer(b, "<u4", count=1, offset=4)[0])
            table = np.frombuffer(b, dtype=dtype, count=m, offset=start)
            _copy_out({c: table[c] for c in dtype.names})

    results.append(Result(NAME, "floor: np.frombuffer in memory", n, best_of(floor), data_bytes))

    def bulk():
        for s in range(ds.num_shards):
            _copy_out(ds.read_shard(s))

    results.append(Result(NAME, "petastream bulk read_shard", n, best_of(bulk), data_bytes))

    rng = np.random.default_rng(1)
    perms = [rng.permutation(m) for m in ds.shard_sizes]

    def floor_shuffled():
        for b, meta, perm in zip(blobs, ds.shards, perms):
            start = int(np.frombuffer(b, "<u4", count=1, offset=4)[0])
            table = np.frombuffer(b, dtype=dtype, count=meta["samples"], offset=start)[perm]
            _copy_out({c: table[c] for c in dtype.names})

    results.append(Result(NAME, "floor, shuffled: frombuffer+take", n, best_of(floor_shuffled), data_bytes))

    def shuffled():
        for s in range(ds.num_shards):
            _copy_out(ds.read_shard(s, perms[s]))

    results.append(Result(NAME, "petastream bulk, shuffled ids", n, best_of(shuffled), data_bytes))

    def from_zstd():
        zds = petastream.open(zstd_url, cache_dir=tempfile.mkdtemp(dir=tmp))
        for s in range(zds.num_shards):
            _copy_out(zds.read_shard(s))

    t = time.perf_counter()
    from_zstd()
    results.append(Result(NAME, "petastream zstd, first pass", n, time.perf_counter() - t, data_bytes,
                          note="includes decompression into the cache"))

    k = min(n, 50_000)

    def per_sample():
        for i in range(k):
            ds[i]

    results.append(Result(NAME, "per-sample decode ds[i]", k, best_of(per_sample, 1), k * 76,
                          note=f"timed on {k} rows"))
    return results
