"""Opening big datasets: open + plan + first batch of one rank, and its peak RSS, by shard count.

``python -m benchmarks.scale [--shards 10000,100000,1000000] [--world 4096] [--ranks 0,2047]
[--variant after=src --variant before=/path/to/old/src] [--mosaic PYTHON] [--mosaic-max 10000]``

For each shard count a synthetic dataset is written under ``--dir``: ``index.json`` only, as
Mosaic's writer leaves it (10,000 samples a shard: 1M shards is 10 B samples, ~420 MB of JSON,
bytes exactly as petastream's writer makes them). Only the shard files the measured first
batches touch exist (hard links to one real shard), so a million-shard index needs neither a
million files nor their bytes.

Each measurement is a fresh subprocess (one rank of ``--world``), timing
``petastream.open`` (index parsed, or its parsed copy mapped from the node's cache), the
planner (``StreamPlanner``, shuffled, its first chunk) and the first batch's read, and
reporting its peak RSS (``VmHWM``). Per variant (``--variant label=src`` runs with that
``src`` first on PYTHONPATH, e.g. the code before this change) and rank, three runs:
``first`` (an empty cache directory: the open that parses index.json and keeps its sidecar),
``next`` (the same cache again: what every other rank of the node and every later open costs)
and ``json`` (``first`` with the columnar parse switched off: ``json.loads`` instead, what
an index Arrow cannot prove exact costs). Code without the node cache parses on every open.
``--mosaic`` runs Mosaic's ``StreamingDataset(local=...)`` (world size 1, no shuffle: Mosaic
partitions every sample at the first read) in its own environment, up to ``--mosaic-max``
shards, under ``--timeout``. Numbers are measured, never asserted; note the machine's load
beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = 10_000
BATCH = 32

_RUNNER = r"""
import json, sys, time

def peak_rss_mb():
    # VmHWM: this program's peak. (getrusage's ru_maxrss survives exec: a child of a big
    # parent reports the parent's size.)
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) / 1024
t0 = time.perf_counter()
import numpy as np
import petastream
from petastream.stream.planner import StreamPlanner
import importlib
for m in ("pyarrow", "pandas", "petastream.mds.dataset", "petastream.source"):  # not the cost measured
    try:
        importlib.import_module(m)
    except ImportError:
        pass
path, world, rank, batch, no_columns, cache = sys.argv[1:7]
if no_columns == "1":
    import petastream.mds.index_open as index_open
    index_open.table_from_json = lambda data: None
t_import, c_import = time.perf_counter(), time.process_time()
ds = petastream.open(path, cache_dir=cache)
t_open, c_open = time.perf_counter(), time.process_time()
planner = StreamPlanner(ds.shard_sizes, int(batch), shuffle=True, seed=0, world_size=int(world), rank=int(rank))
chunk = next(planner.begin_pass().chunks(max_samples=int(batch)))
ids = chunk.batch(0)
t_plan = time.perf_counter()
got = ds.read(ids)
t_batch = time.perf_counter()
assert len(got["id"]) == len(ids)
print(json.dumps({"open": t_open - t_import, "plan": t_plan - t_open, "first_batch": t_batch - t_plan,
                  "total": t_batch - t_import, "open_cpu": c_open - c_import, "rss_mb": peak_rss_mb(), "origin": getattr(ds, "index_origin", "-")}))
"""

_MOSAIC = r"""
import json, sys, time

def peak_rss_mb():
    # VmHWM: this program's peak. (getrusage's ru_maxrss survives exec: a child of a big
    # parent reports the parent's size.)
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) / 1024
t0 = time.perf_counter()
from streaming import StreamingDataset
t_import = time.perf_counter()
ds = StreamingDataset(local=sys.argv[1], shuffle=False, batch_size=int(sys.argv[2]))
t_open = time.perf_counter()
it = iter(ds)
first = [next(it) for _ in range(int(sys.argv[2]))]
t_batch = time.perf_counter()
print(json.dumps({"open": t_open - t_import, "plan": None, "first_batch": t_batch - t_open,
                  "total": t_batch - t_import, "rss_mb": peak_rss_mb()}))
"""


def _template(workdir: Path) -> tuple[dict, Path]:
    """One real shard of SAMPLES rows (id int64, label str, x float32[16]) and its index entry."""
    from petastream.mds.writer import write_mds

    out = workdir / "template"
    if not (out / "index.json").exists():
        n = SAMPLES
        write_mds({"id": np.arange(n, dtype=np.int64),
                   "label": np.array([f"l{i % 97}" for i in range(n)], dtype=object),
                   "x": np.zeros((n, 16), np.float32)}, str(out), size_limit=None,
                   hashes=["sha1", "xxh64"], compression=None, exist_ok=True)
    shard = json.loads((out / "index.json").read_bytes())["shards"][0]
    return shard, out / shard["raw_data"]["basename"]


def _name(i: int) -> str:
    return f"shard.{i:07}.mds"


def write_dataset(workdir: Path, n: int) -> Path:
    """index.json of ``n`` copies of the template shard (by name), and nothing beside it."""
    shard, _ = _template(workdir)
    path = workdir / f"n{n}"
    if (path / "index.json").exists():
        return path
    path.mkdir(parents=True, exist_ok=True)
    marker = "@@NAME@@"
    text = json.dumps(dict(shard, raw_data=dict(shard["raw_data"], basename=marker)), sort_keys=True)
    head, tail = text.split(marker)
    # The bytes of dump_index(shards) (sort_keys: "shards" before "version"), built as text.
    body = ", ".join(f"{head}{_name(i)}{tail}" for i in range(n))
    index = f'{{"shards": [{body}], "version": 2}}'.encode("ascii")
    del body
    (path / "index.json.tmp").write_bytes(index)
    os.replace(path / "index.json.tmp", path / "index.json")
    return path


def link_first_batches(workdir: Path, path: Path, n: int, world: int, ranks: list[int]) -> None:
    """Make the shard files exist that each rank's first batch (and Mosaic's first) reads."""
    from petastream.stream.planner import StreamPlanner

    _, template_file = _template(workdir)
    sizes = np.full(n, SAMPLES, np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    touched = {0}
    for rank in ranks:
        planner = StreamPlanner(sizes, BATCH, shuffle=True, seed=0, world_size=world, rank=rank)
        ids = next(planner.begin_pass().chunks(max_samples=BATCH)).batch(0)
        touched |= {int(s) for s in np.searchsorted(offsets, ids, side="right") - 1}
    for s in touched:
        target = path / _name(s)
        if not target.exists():
            os.link(template_file, target)


def run(cmd: list[str], env: dict[str, str], timeout: float) -> dict:
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f}s"}
    if p.returncode:
        return {"error": f"rc {p.returncode}: {p.stderr.strip().splitlines()[-1:] if p.stderr else ''}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shards", default="10000,100000")
    ap.add_argument("--world", type=int, default=4096)
    ap.add_argument("--ranks", default="0,2047")
    ap.add_argument("--variant", action="append", default=[], help="label=src (default after=<repo>/src)")
    ap.add_argument("--no-json", action="store_true", help="skip the <label>-json runs (json.loads)")
    ap.add_argument("--mosaic", default=None, help="python of Mosaic Streaming's environment")
    ap.add_argument("--mosaic-max", type=int, default=10_000)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--dir", default=str(ROOT / ".bench" / "scale"))
    args = ap.parse_args()
    workdir = Path(args.dir)
    workdir.mkdir(parents=True, exist_ok=True)
    variants = [v.split("=", 1) for v in args.variant] or [["after", str(ROOT / "src")]]
    ranks = [int(r) for r in args.ranks.split(",")]
    rows = []
    for n in [int(x) for x in args.shards.split(",")]:
        t = time.perf_counter()
        path = write_dataset(workdir, n)
        link_first_batches(workdir, path, n, args.world, ranks)
        print(f"# {n} shards: index.json {(path / 'index.json').stat().st_size / 1e6:.1f} MB, "
              f"written in {time.perf_counter() - t:.1f}s", flush=True)
        for label, src in variants:
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, str(ROOT)]), "OMP_NUM_THREADS": "1"}
            for rank in ranks:
                cache = workdir / "cache" / f"{label}-{n}-{rank}"
                for run_name, no_columns in (("first", "0"), ("next", "0"), ("json", "1")):
                    if run_name == "json" and (args.no_json or not (Path(src) / "petastream/mds/index_open.py").exists()):
                        continue  # skipped, or code without the columnar parse: always json
                    if run_name != "next":
                        shutil.rmtree(cache, ignore_errors=True)
                    res = run([sys.executable, "-c", _RUNNER, str(path), str(args.world), str(rank),
                               str(BATCH), no_columns, str(cache)], env, args.timeout)
                    rows.append({"shards": n, "reader": f"{label}-{run_name}", "rank": rank, **res})
                    print(json.dumps(rows[-1]), flush=True)
                shutil.rmtree(cache, ignore_errors=True)
        if args.mosaic and n <= args.mosaic_max:
            res = run([args.mosaic, "-c", _MOSAIC, str(path), str(BATCH)], {**os.environ}, args.timeout)
            rows.append({"shards": n, "reader": "mosaic", "rank": 0, **res})
            print(json.dumps(rows[-1]), flush=True)
    print("\n| shards | reader | rank | open s | open CPU s | plan s | first batch s | total s | peak RSS MB | index from |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['shards']} | {r['reader']} | {r['rank']} | {r['error']} | | | | | | |")
            continue
        plan = "-" if r["plan"] is None else f"{r['plan']:.3f}"
        cpu = f"{r['open_cpu']:.2f}" if "open_cpu" in r else "-"
        print(f"| {r['shards']} | {r['reader']} | {r['rank']} | {r['open']:.2f} | {cpu} | {plan} | "
              f"{r['first_batch']:.3f} | {r['total']:.2f} | {r['rss_mb']:.0f} | {r.get('origin', '-')} |")


if __name__ == "__main__":
    main()
