"""The Parquet cases of :mod:`benchmarks.remote`: the same rows as a Parquet directory on the
bucket, read over the same throttled link by ``petastream.torch.loader`` through
:class:`petastream.parquet.ParquetSource`.

Layout: ``--pq-files`` files (default 4), zstd, row groups of the rows of one MDS shard
(``rows / --shards``), so the dataset has as many row groups as the MDS copy has shards and a
row group is about the size of a shard (a decode, a read-ahead slot and a cache entry of the
same size in both formats); 4 files of 4 row groups for the default 20,000 rows / 16 shards.
Cases (``--cases``):

* ``parquet``: the defaults (``fetch="auto"``, ``cache_decoded=None``: on for remote files), so
  the first epoch also writes each row group's decoded copy into the shard cache, and the
  second maps those copies;
* ``parquet_nodecoded``: ``cache_decoded=False``: the first epoch only caches the Parquet
  bytes; the second decodes them again;
* ``parquet_file`` (not run by default): the defaults but ``fetch="file"``, what ``"auto"``
  chose for these files before it took row groups of 8 MiB or more.

Reported per case: epochs 1 and 2 (rows/s, and against the bound computed from the Parquet
bytes stored, and the link ceiling measured over the Parquet files), the Parquet GETs per epoch
(counted on the proxy; footers read at open counted apart), the fetch mode the source chose and
the cache's bytes after each epoch.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time

import numpy as np

from benchmarks.remote import (
    BUCKET,
    Proxy,
    _result,
    _run_child,
    gets_of,
    link_ceiling,
    proxy_stats,
    run_epochs,
)

PREFIX = "pq"
MARKER = ".parquet"
NAMES = {"parquet": "petastream Parquet, cache_decoded (default)",
         "parquet_nodecoded": "petastream Parquet, cache_decoded=False",
         "parquet_file": "petastream Parquet, fetch='file'"}
#: Per case: its child's cache_decoded and fetch.
CASES = {"parquet": ("auto", "auto"), "parquet_nodecoded": ("off", "auto"), "parquet_file": ("auto", "file")}


def write_parquet(rows: dict[str, np.ndarray], files: int, row_group_rows: int) -> dict:
    """``rows`` (``payload`` a 2-D uint8 array) as ``files`` zstd Parquet files under
    ``s3://BUCKET/PREFIX`` (the endpoint of the environment: moto itself, not the proxy)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    n = len(rows["id"])
    per_file = math.ceil(n / files)
    names, row_groups = [], 0
    for i, start in enumerate(range(0, n, per_file)):
        stop = min(n, start + per_file)
        row_groups += math.ceil((stop - start) / row_group_rows)
        payload = np.ascontiguousarray(rows["payload"][start:stop])
        offsets = np.arange(stop - start + 1, dtype=np.int32) * payload.shape[1]  # a file under 2 GiB
        table = pa.table({
            "id": rows["id"][start:stop],
            "label": rows["label"][start:stop],
            "features": pa.FixedSizeListArray.from_arrays(rows["features"][start:stop].ravel(), 16),
            "payload": pa.Array.from_buffers(pa.binary(), stop - start,
                                             [None, pa.py_buffer(offsets), pa.py_buffer(payload)]),
        })
        name = f"{BUCKET}/{PREFIX}/part-{i:05d}.parquet"
        with fs.open(name, "wb") as f:
            pq.write_table(table, f, compression="zstd", row_group_size=row_group_rows)
        names.append(name)
    return {"files": len(names), "names": names, "stored_bytes": sum(fs.size(name) for name in names),
            "row_groups": row_groups, "row_group_rows": row_group_rows}


# -- the child process ---------------------------------------------------------------------------


def child(args: argparse.Namespace) -> None:
    """One reader of the Parquet URL: the source opened before the clock starts (listing,
    footers), as the MDS child opens its index; then the epochs of :func:`run_epochs`."""
    from petastream.parquet import ParquetSource
    from petastream.storage.cache import ShardCache

    proxy = os.environ["AWS_ENDPOINT_URL"]
    cache = ShardCache.at(args.cache)
    decoded = {"auto": None, "off": False}[args.cache_decoded]
    t = time.perf_counter()
    src = ParquetSource(args.url, cache_dir=args.cache, cache_limit=args.limit or None, cache_decoded=decoded,
                        fetch=args.fetch)
    open_s = time.perf_counter() - t
    marks = [sum(gets_of(proxy_stats(proxy), MARKER).values())]
    cached: list[int] = []

    def after_epoch() -> None:
        marks.append(sum(gets_of(proxy_stats(proxy), MARKER).values()))
        cached.append(cache.usage().total_bytes)

    out = run_epochs(src, args, after_epoch)
    print(json.dumps({**out, "open_s": open_s, "fetch": src.fetch, "row_groups": src.num_shards,
                      "open_gets": marks[0], "epoch_gets": np.diff(marks).tolist(),
                      "cache_bytes": cached}), flush=True)


# -- the parent --------------------------------------------------------------------------------


def prepare(args: argparse.Namespace, rows: dict[str, np.ndarray], results: dict) -> None:
    """Write the Parquet copy (before ``rows``' payload becomes objects for MDS)."""
    if any(c in NAMES for c in args.cases):
        results["parquet_dataset"] = write_parquet(rows, args.pq_files, math.ceil(args.rows / args.shards))


def ceiling(proxy: Proxy, results: dict) -> None:
    if "parquet_dataset" in results:
        results["parquet_link_ceiling_mbps"] = link_ceiling(proxy, results["parquet_dataset"]["names"])


def parquet_cases(args: argparse.Namespace, env: dict, proxy: Proxy, tmp: str, rep: int, results: dict) -> None:
    sfx = f"#{rep + 1}" if rep else ""
    url = f"s3://{BUCKET}/{PREFIX}"
    for key, (decoded, fetch) in CASES.items():
        if key in args.cases:
            proxy.reset()
            extra = ("--format", "parquet", "--cache-decoded", decoded, "--fetch", fetch)
            res = _result(_run_child(url, f"{tmp}/{key}{sfx}", env, extra=extra))
            res["gets"] = sum(proxy.shard_gets(MARKER).values())
            results[key + sfx] = res


def report_lines(results: dict) -> list[str]:
    ds, pq = results.get("dataset"), results.get("parquet_dataset")
    if not ds or not pq:
        return []
    bw, ceil = ds["mbps"] * 1e6, results.get("parquet_link_ceiling_mbps", 0.0)
    bound = ds["rows"] / (pq["stored_bytes"] / bw)
    ceil_bound = ds["rows"] / (pq["stored_bytes"] / (ceil * 1e6)) if ceil else 0
    lines = [f"Parquet: {pq['files']} zstd files, {pq['row_groups']} row groups of {pq['row_group_rows']:,} rows, "
             f"{pq['stored_bytes'] / 1e6:.0f} MB stored; link ceiling over them: {ceil:.0f} MB/s",
             f"{'reader':<44} {'epoch 1 rows/s':>15} {'vs bound':>9} {'vs ceiling':>11} "
             f"{'epoch 2 rows/s':>15} {'x bound':>8} {'GETs e1/e2 (+open)':>19}"]
    for key in [k for k in results if k.split("#")[0] in NAMES]:
        res = results[key]
        name = NAMES[key.split("#")[0]] + (f" {key[key.index('#'):]}" if "#" in key else "")
        if "error" in res:
            lines.append(f"{name:<44} {res['error'][:150]}")
            continue
        e1, e2 = (ds["rows"] / s for s in res["epochs"][:2])
        gets = "/".join(str(g) for g in res["epoch_gets"]) + f" (+{res['open_gets']})"
        lines.append(f"{name:<44} {e1:>15,.0f} {e1 / bound:>9.2f} {e1 / ceil_bound if ceil_bound else 0:>11.2f} "
                     f"{e2:>15,.0f} {e2 / bound:>8.2f} {gets:>19}  fetch={res['fetch']}, open {res['open_s']:.2f} s, "
                     f"cache {', '.join(f'{b / 1e6:.0f}' for b in res['cache_bytes'])} MB, "
                     f"shuffle score {', '.join(f'{x:.2f}' for x in res['scores'])}")
    return lines
