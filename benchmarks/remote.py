"""Streaming from S3 over a throttled link: petastream vs Mosaic Streaming vs LitData.

``python -m benchmarks.remote [--rows 20000] [--mbps 50] [--latency-ms 20] [--peers mosaic,litdata]``

A moto S3 server on loopback holds the dataset; every reader reaches it through
:mod:`benchmarks.throttle_proxy`, which caps the bandwidth of all connections together
(``--mbps``, one node's link) and adds ``--latency-ms`` before each request. The rows
(:mod:`benchmarks.peers._remote_rows`: image-like, 16 KiB each) are written once as MDS
(zstd, xxh3_64 hashes, ``--shards`` shards), read by petastream and by Mosaic's
``StreamingDataset(remote=...)`` (its env: ``benchmarks/envs/build.sh mosaic``), and once more
with LitData's ``optimize`` for its ``StreamingDataset`` (``build.sh litdata``). Reported:

* epochs 1 (cold cache: every byte over the link) and 2 (cached), rows/s and their ratio to
  the bandwidth bound (stored bytes / bandwidth), and to the link ceiling measured in the same
  run (all shard files fetched in parallel through the proxy, nothing decoded);
* shard GETs per node with 1, 2 and 4 ranks sharing a cache directory (counted on the proxy);
* peak cache bytes over two epochs with ``cache_limit`` a quarter of the dataset;
* the first epoch of a local zstd dataset against the in-memory floor (and uncompressed);
* the same rows as Parquet files, read by petastream (:mod:`benchmarks.remote_parquet`).

Numbers are measured, never asserted; write them down with the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
BUCKET = "bench"


# -- child processes: one petastream reader each ------------------------------------------------


def child(args: argparse.Namespace) -> None:
    from petastream.mds.dataset import MDSDataset
    from petastream.storage.cache import ShardCache

    if args.format == "parquet":
        from benchmarks import remote_parquet

        remote_parquet.child(args)
        return
    peak = [0]
    stop = threading.Event()

    def sample() -> None:  # the cache directory's size, every 10 ms
        cache = ShardCache.at(args.cache)
        while not stop.is_set():
            peak[0] = max(peak[0], cache.usage().total_bytes)
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    # Opened before the clock starts (imports, index.json), as Mosaic's and LitData's datasets.
    ds = MDSDataset(args.url, cache_dir=args.cache, cache_limit=args.limit or None)
    out = run_epochs(ds, args)
    stop.set()
    sampler.join()
    print(json.dumps({**out, "peak": peak[0]}), flush=True)


def run_epochs(ds: Any, args: argparse.Namespace, after_epoch: Callable[[], None] | None = None) -> dict:
    """``args.epochs`` shuffled epochs of ``ds`` (a Source) through ``petastream.torch.loader``:
    seconds, rows and shuffle score of each; ``after_epoch()`` runs off the clock after each."""
    from petastream.torch import loader

    epochs, rows, scores = [], [], []
    window = {"window": 1 << 18} if args.no_fit else {}  # explicit: the defaults, no cache fit
    for epoch in range(args.epochs):
        t = time.perf_counter()
        ld = loader(ds, args.batch, shuffle=True, seed=1, num_workers=args.workers,
                    rank=args.rank, world_size=args.world, **window)
        ld.set_epoch(epoch)
        ids = [b["id"].numpy() for b in ld]
        epochs.append(time.perf_counter() - t)
        rows.append(sum(len(b) for b in ids))
        scores.append(shuffle_score(np.concatenate(ids)))
        if after_epoch is not None:
            after_epoch()
    return {"epochs": epochs, "rows": rows, "scores": scores, "window": ld.planner.window}


def shuffle_score(ids: np.ndarray) -> float:
    """Mean |id[k+1] - id[k]| over N/3: 1 for a uniform shuffle, 0 for sequential order."""
    ids = ids.astype(np.float64)
    return float(np.abs(np.diff(ids)).mean() / (len(ids) / 3))


def _run_child(url: str, cache: str, env: dict, *, epochs: int = 2, rank: int = 0, world: int = 1,
               limit: int | None = None, batch: int = 256, workers: int = 2,
               no_fit: bool = False, extra: tuple[str, ...] = ()) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "benchmarks.remote", "--child", "--url", url, "--cache", cache,
           "--epochs", str(epochs), "--rank", str(rank), "--world", str(world),
           "--batch", str(batch), "--workers", str(workers), *extra]
    if limit:
        cmd += ["--limit", str(limit)]
    if no_fit:
        cmd.append("--no-fit")
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(proc: subprocess.Popen, timeout: float = 1800) -> dict:
    out, err = proc.communicate(timeout=timeout)
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if proc.returncode or not lines:
        return {"error": f"failed (rc {proc.returncode}): {err.strip()[-400:]}"}
    return json.loads(lines[-1])


# -- the link ------------------------------------------------------------------------------------


class Proxy:
    def __init__(self, upstream: str, mbps: float, latency_ms: float):
        from tests.servers import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.throttle_proxy", "--upstream", upstream, "--port",
             str(self.port), "--mbps", str(mbps), "--latency-ms", str(latency_ms)],
            cwd=ROOT, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                self.stats()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("throttle proxy did not start") from None
                time.sleep(0.1)

    def stats(self) -> dict:
        return proxy_stats(self.url)

    def reset(self) -> None:
        req = urllib.request.Request(self.url + "/__proxy__/reset", method="POST")
        urllib.request.urlopen(req, timeout=5).read()

    def shard_gets(self, marker: str = "/shard.") -> dict[str, int]:
        return gets_of(self.stats(), marker)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def proxy_stats(url: str) -> dict:
    """The request counts of the throttle proxy at ``url``."""
    return json.loads(urllib.request.urlopen(url + "/__proxy__/stats", timeout=5).read())


def gets_of(stats: dict, marker: str) -> dict[str, int]:
    """GETs per path containing ``marker`` in proxy ``stats``."""
    return {p: n for m, p, n in stats["requests"] if m == "GET" and marker in p}


def _s3_env(endpoint: str) -> dict:
    from tests.servers import s3_env

    env = {**os.environ, **s3_env(endpoint), "S3_ENDPOINT_URL": endpoint}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    return env


def link_ceiling(proxy: Proxy, names: list[str]) -> float:
    """MB/s of fetching every file through the proxy, 8 at a time, nothing decoded."""
    import s3fs

    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": proxy.url}, skip_instance_cache=True)
    t = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        total = sum(len(b) for b in pool.map(fs.cat_file, names))
    return total / (time.perf_counter() - t) / 1e6


# -- the parts -------------------------------------------------------------------------------------


def petastream_cases(args: argparse.Namespace, url: str, raw: int, env: dict, proxy: Proxy, tmp: str,
                     rep: int, results: dict) -> None:
    """The petastream runs (``--cases``); a repeat's results are keyed ``name#2``, ``name#3``..."""
    sfx = f"#{rep + 1}" if rep else ""
    if "petastream" in args.cases:
        proxy.reset()
        res = _result(_run_child(url, f"{tmp}/c1{sfx}", env))
        res["gets"] = sum(proxy.shard_gets().values())
        results["petastream" + sfx] = res
    for ranks in ((1, 2, 4) if "ranks" in args.cases and not rep else ()):
        proxy.reset()
        env_r = {**env, "LOCAL_WORLD_SIZE": str(ranks)}
        procs = [_run_child(url, f"{tmp}/ranks{ranks}", env_r, epochs=1, rank=r, world=ranks,
                            workers=1) for r in range(ranks)]
        outs = [_result(p) for p in procs]
        gets = proxy.shard_gets()
        results[f"ranks{ranks}"] = {"gets": sum(gets.values()), "max_per_shard": max(gets.values()),
                                    "shards_fetched": len(gets),
                                    "errors": [o["error"] for o in outs if "error" in o]}
    limit = raw // 4
    for key, no_fit in (("limited", False), ("limited_nofit", True)):
        if key in args.cases:
            proxy.reset()
            res = _result(_run_child(url, f"{tmp}/{key}{sfx}", env, limit=limit, no_fit=no_fit))
            res.update(limit=limit, gets=sum(proxy.shard_gets().values()))
            results[key + sfx] = res


def remote_part(args: argparse.Namespace, results: dict) -> None:
    from tests.servers import moto_s3_server

    from benchmarks import remote_parquet
    from benchmarks.peers._remote_rows import make_rows, row_bytes
    from petastream.mds.writer import write_mds

    with moto_s3_server() as moto:
        os.environ.update({k: v for k, v in _s3_env(moto).items() if k != "PYTHONPATH"})
        import s3fs

        s3fs.S3FileSystem(client_kwargs={"endpoint_url": moto}).mkdir(BUCKET)
        url = f"s3://{BUCKET}/ds"
        raw = args.rows * (row_bytes() + 4)
        rows = make_rows(args.rows)
        remote_parquet.prepare(args, rows, results)
        rows["payload"] = np.array([r.tobytes() for r in rows["payload"]], dtype=object)  # 'bytes'
        shards = write_mds(rows, url, compression="zstd", hashes=["xxh3_64"],
                           size_limit=raw // args.shards + 1)
        del rows
        stored = sum(s["zip_data"]["bytes"] for s in shards)
        raw = sum(s["raw_data"]["bytes"] for s in shards)
        results["dataset"] = {"rows": args.rows, "shards": len(shards), "stored_bytes": stored,
                              "raw_bytes": raw, "mbps": args.mbps, "latency_ms": args.latency_ms}
        proxy = Proxy(moto, args.mbps, args.latency_ms)
        try:
            names = [f"{BUCKET}/ds/{s['zip_data']['basename']}" for s in shards]
            results["link_ceiling_mbps"] = link_ceiling(proxy, names)
            remote_parquet.ceiling(proxy, results)
            env = _s3_env(proxy.url)
            with tempfile.TemporaryDirectory(prefix="remote-bench-") as tmp:
                for rep in range(args.repeat):  # interleaved repeats: the machine is contended
                    petastream_cases(args, url, raw, env, proxy, tmp, rep, results)
                    remote_parquet.parquet_cases(args, env, proxy, tmp, rep, results)
                if "mosaic" in args.peers:
                    proxy.reset()
                    results["mosaic"] = mosaic(url, f"{tmp}/mosaic", env, args)
                    results["mosaic"]["gets"] = sum(proxy.shard_gets().values())
                if "litdata" in args.peers:
                    results["litdata"] = litdata(moto, proxy, f"{tmp}/litdata", env, args)
        finally:
            proxy.close()


def _point_at(env: dict) -> None:
    """Every S3 endpoint variable at the proxy (peer runners inherit os.environ): boto3 prefers
    AWS_ENDPOINT_URL_S3, Mosaic reads S3_ENDPOINT_URL, LitData's obstore path the environment."""
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "S3_ENDPOINT_URL"):
        os.environ[name] = env[name]


def mosaic(url: str, local: str, env: dict, args: argparse.Namespace) -> dict:
    from benchmarks import peer_envs

    _point_at(env)
    return peer_envs.run_runner("mosaic_remote.py", ["--remote", url, "--local", local, "--rows",
                                                     str(args.rows), "--workers", str(args.workers)],
                                "mosaic", 1800)


def litdata(moto: str, proxy: Proxy, tmp: str, env: dict, args: argparse.Namespace) -> dict:
    from benchmarks import peer_envs

    if peer_envs.python_for("litdata")[0] is None and (why := peer_envs.build("litdata")):
        return {"error": f"unavailable: {why}"}
    remote = f"s3://{BUCKET}/litdata"
    wrote = peer_envs.run_runner("litdata_remote.py", ["--write", "--remote", remote, "--rows", str(args.rows),
                                                       "--out", f"{tmp}/optimized", "--upload-endpoint", moto],
                                 "litdata", 1800)
    if "error" in wrote:
        return wrote
    proxy.reset()
    _point_at(env)
    res = peer_envs.run_runner("litdata_remote.py", ["--remote", remote, "--rows", str(args.rows), "--cache",
                                                     f"{tmp}/cache", "--endpoint", proxy.url,
                                                     "--workers", str(args.workers)], "litdata", 1800)
    res["stored_bytes"] = wrote["stored_bytes"]
    res["gets"] = sum(proxy.shard_gets("/chunk").values())
    return res


def local_part(args: argparse.Namespace, results: dict) -> None:
    """First epoch of a local zstd dataset (fresh shard cache) vs the floor, and uncompressed."""
    from benchmarks.torch_epoch import BATCH, floor
    from benchmarks.workloads import make_data
    from petastream.mds.writer import write_mds
    from petastream.torch import loader

    for workload, n in (("tabular", args.local_rows), ("binary", args.local_rows * 3 // 10)):
        data = make_data(workload, n)
        best_floor = min(floor(data) for _ in range(3))
        out = {"rows": n, "floor_rows_per_s": n / best_floor}
        with tempfile.TemporaryDirectory(prefix="local-bench-") as tmp:
            for codec in ("zstd", None):
                path = f"{tmp}/{codec or 'none'}"
                t = time.perf_counter()
                write_mds(data, path, compression=codec, hashes=["xxh3_64"], size_limit=32 << 20)
                write_s = time.perf_counter() - t
                times = []
                for trial in range(2):  # two cold first epochs: each with an empty shard cache
                    cache = f"{tmp}/cache-{codec}-{trial}"
                    for epoch in range(2):
                        t = time.perf_counter()
                        rows = sum(len(b["id"]) for b in loader(path, BATCH, shuffle=True, seed=epoch,
                                                                num_workers=2,
                                                                dataset_options={"cache_dir": cache}))
                        assert rows == n
                        times.append((trial, epoch, time.perf_counter() - t))
                first = min(s for _, e, s in times if e == 0)
                second = min(s for _, e, s in times if e == 1)
                out[codec or "none"] = {"write_rows_per_s": n / write_s, "epoch1_rows_per_s": n / first,
                                        "epoch2_rows_per_s": n / second,
                                        "stored_bytes": sum(f.stat().st_size for f in Path(path).iterdir())}
        del data
        results[f"local_{workload}"] = out


# -- report ------------------------------------------------------------------------------------------


def report(results: dict) -> str:
    from benchmarks import remote_parquet

    lines = []
    ds = results.get("dataset")
    if ds:
        bw = ds["mbps"] * 1e6
        ceiling = results.get("link_ceiling_mbps", 0.0)
        lines.append(f"S3 (moto) behind the throttle proxy: {ds['mbps']:.0f} MB/s, {ds['latency_ms']:.0f} ms per "
                     f"request; {ds['rows']:,} rows, {ds['shards']} zstd shards, {ds['stored_bytes'] / 1e6:.0f} MB "
                     f"stored ({ds['raw_bytes'] / 1e6:.0f} MB raw); link ceiling measured: {ceiling:.0f} MB/s")
        lines.append(f"{'reader':<44} {'epoch 1 rows/s':>15} {'vs bound':>9} {'vs ceiling':>11} "
                     f"{'epoch 2 rows/s':>15} {'shard GETs':>11}")
        names = {"petastream": "petastream (torch loader, 2 threads)",
                 "limited": "petastream, cache_limit = 1/4, fitted window",
                 "limited_nofit": "petastream, cache_limit = 1/4, window 262144",
                 "mosaic": "Mosaic StreamingDataset, 2 workers",
                 "litdata": "LitData StreamingDataset, 2 workers"}
        for key in [k for k in results if k.split("#")[0] in names]:
            res, name = results[key], names[key.split("#")[0]] + (f" {key[key.index('#'):]}" if "#" in key else "")
            if "error" in res:
                lines.append(f"{name:<44} {res['error'][:150]}")
                continue
            stored = res.get("stored_bytes", ds["stored_bytes"])
            bound = ds["rows"] / (stored / bw)
            ceil_bound = ds["rows"] / (stored / (ceiling * 1e6)) if ceiling else 0
            e1, e2 = (ds["rows"] / s for s in res["epochs"][:2])
            extra = f"  (stored {stored / 1e6:.0f} MB)" if key == "litdata" else ""
            if "scores" in res:
                extra += f"  shuffle score {', '.join(f'{x:.2f}' for x in res['scores'])}, window {res['window']}"
            if "limit" in res:
                per = res["gets"] / (ds["shards"] * len(res["epochs"]))
                extra += (f"  {per:.2f} GETs/shard/epoch, peak cache {res['peak'] / 1e6:.1f} of "
                          f"{res['limit'] / 1e6:.1f} MB")
            lines.append(f"{name:<44} {e1:>15,.0f} {e1 / bound:>9.2f} {e1 / ceil_bound if ceil_bound else 0:>11.2f} "
                         f"{e2:>15,.0f} {res.get('gets', ''):>11}{extra}")
        for ranks in (1, 2, 4):
            r = results.get(f"ranks{ranks}")
            if r:
                lines.append(f"{ranks} rank(s) on one node, one cache dir: {r['gets']} shard GETs for {ds['shards']} "
                             f"shards (max {r['max_per_shard']} per shard){'; ' + str(r['errors']) if r['errors'] else ''}")
        lines += remote_parquet.report_lines(results)
    for workload in ("tabular", "binary"):
        res = results.get(f"local_{workload}")
        if not res:
            continue
        fl = res["floor_rows_per_s"]
        lines.append(f"local {workload}, {res['rows']:,} rows, floor {fl:,.0f} rows/s:")
        for codec in ("zstd", "none"):
            c = res[codec]
            lines.append(f"  {codec:<5} epoch 1 {c['epoch1_rows_per_s']:>12,.0f} ({c['epoch1_rows_per_s'] / fl:.2f}x floor)"
                         f"  epoch 2 {c['epoch2_rows_per_s']:>12,.0f} ({c['epoch2_rows_per_s'] / fl:.2f}x)"
                         f"  write {c['write_rows_per_s']:>10,.0f} rows/s  {c['stored_bytes'] / 1e6:.0f} MB")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=20_000)
    p.add_argument("--shards", type=int, default=16)
    p.add_argument("--mbps", type=float, default=50.0)
    p.add_argument("--latency-ms", type=float, default=20.0)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--peers", default="mosaic,litdata")
    p.add_argument("--local-rows", type=int, default=1_000_000)
    p.add_argument("--parts", default="remote,local")
    p.add_argument("--cases", default="petastream,ranks,limited,limited_nofit,parquet,parquet_nodecoded",
                   help="petastream runs of the remote part (limited_nofit: cache_limit with an "
                        "explicit default window, i.e. no cache fit; parquet, parquet_nodecoded, "
                        "parquet_file: benchmarks.remote_parquet)")
    p.add_argument("--pq-files", type=int, default=4, help="Parquet files of the parquet cases")
    p.add_argument("--repeat", type=int, default=1, help="run the petastream cases this many times, interleaved")
    p.add_argument("--no-fit", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--format", default="mds", help=argparse.SUPPRESS)
    p.add_argument("--cache-decoded", default="auto", help=argparse.SUPPRESS)
    p.add_argument("--fetch", default="auto", help=argparse.SUPPRESS)
    # --child: one petastream reader (run by the parent)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--url")
    p.add_argument("--cache")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--world", type=int, default=1)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--limit", type=int, default=0)
    args = p.parse_args()
    if args.child:
        child(args)
        return
    args.peers = [x for x in args.peers.split(",") if x]
    args.cases = [x for x in args.cases.split(",") if x]
    results: dict = {"load_before": os.getloadavg()}
    if "remote" in args.parts:
        remote_part(args, results)
    if "local" in args.parts:
        local_part(args, results)
    results["load_after"] = os.getloadavg()
    print(report(results))
    print(f"load average before/after: {results['load_before']} / {results['load_after']}")
    out = ROOT / "bench-results"
    out.mkdir(exist_ok=True)
    path = out / f"remote-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=2, default=str))
    print(f"saved {path}")
    shutil.rmtree(ROOT / ".bench" / "tmp", ignore_errors=True)


if __name__ == "__main__":
    main()
