"""Stress run of a shared parent cache directory (issue #16): rounds of 2-4 driver processes,
each with its own local Spark session and default settings, converting the same DataFrame
into one parent directory, reading it a random number of times and exiting.

    python -m benchmarks.shared_cache_stress [--rounds 15] [--s3] [--src DIR] [--seed 0]

Per round it reports the processes, the writes (processes that wrote the dataset rather than
reusing it), the failures (a process that did not exit 0 or did not see every row in every
pass), and what the round left in the parent directory (with default settings, nothing).
``--src`` runs another checkout's petastream (e.g. the one before leases, for the baseline).
Not part of the test suite: a round starts 2-4 JVMs (~10 s each on a small machine).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROWS = 300


def _parquet(path: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(path)
    for part in range(2):
        ids = list(range(part * ROWS // 2, (part + 1) * ROWS // 2))
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64()),
                                 "x": pa.array([i * 0.5 for i in ids], pa.float64())}),
                       os.path.join(path, f"part-{part}.parquet"))


def _left(parent: str) -> list[str]:
    """Complete datasets and pointers left under ``parent`` (plain fsspec: any checkout)."""
    import fsspec

    fs, path = fsspec.core.url_to_fs(parent)
    fs.invalidate_cache()
    if not fs.exists(path):
        return []
    names = [p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(path, detail=False)]
    return sorted(n for n in names if n.endswith(".json") or (
        "petastream-" in n and fs.exists(f"{path}/{n}/index.json")))


def run_round(i: int, rng: random.Random, parent: str, src: str, work: str) -> dict:
    pq = os.path.join(work, "pq")
    if not os.path.exists(pq):
        _parquet(pq)
    rdir = os.path.join(work, f"round-{i}")
    os.makedirs(rdir)
    n = rng.randint(2, 4)
    mode = rng.choice(["native", "compat"])
    env = dict(os.environ, PYTHONPATH=src + os.pathsep + ROOT)
    procs = []
    for k in range(n):
        out = open(os.path.join(rdir, f"p{k}.out"), "w")
        err = open(os.path.join(rdir, f"p{k}.err"), "w")
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "tests.spark.shared_driver", mode, pq, parent, rdir,
             "--name", f"p{k}", "--rows", str(ROWS), "--passes", str(rng.randint(1, 8)),
             "--go", f"go-{k}"], cwd=ROOT, env=env, stdout=out, stderr=err))
    deadline = time.monotonic() + 300
    while not all(os.path.exists(os.path.join(rdir, f"p{k}.ready")) for k in range(n)):
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            break
        time.sleep(0.1)
    for k in range(n):  # staggered starts: some convert together, some find it written
        open(os.path.join(rdir, f"go-{k}"), "w").close()
        time.sleep(rng.uniform(0, 1.5))
    results = []
    for k, p in enumerate(procs):
        try:
            p.wait(600)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        with open(os.path.join(rdir, f"p{k}.out")) as f:
            lines = f.read().strip().splitlines()
        doc = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
        failed = p.returncode != 0 or not doc.get("ok")
        why = ""
        if failed:
            with open(os.path.join(rdir, f"p{k}.err")) as f:
                errs = [ln for ln in f.read().splitlines() if "Error" in ln or "Timeout" in ln]
            why = errs[-1][:200] if errs else f"exit {p.returncode}"
        results.append({"created": bool(doc.get("created")), "failed": failed, "why": why})
    return {"round": i, "processes": n, "mode": mode,
            "writes": sum(r["created"] for r in results),
            "failures": sum(r["failed"] for r in results),
            "why": sorted({r["why"] for r in results if r["why"]}), "left": _left(parent)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--s3", action="store_true", help="a moto S3 server on loopback as the parent")
    p.add_argument("--src", default=os.path.join(ROOT, "src"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--keep", action="store_true", help="keep the work directory (the logs)")
    a = p.parse_args()
    rng = random.Random(a.seed)
    sys.path.insert(0, a.src)
    with contextlib.ExitStack() as stack:
        if a.keep:
            work = tempfile.mkdtemp(prefix="petastream-stress-")
            print(f"work directory: {work}", flush=True)
        else:
            work = stack.enter_context(tempfile.TemporaryDirectory(prefix="petastream-stress-"))
        if a.s3:
            from tests.servers import moto_s3_server, s3_env

            endpoint = stack.enter_context(moto_s3_server())
            os.environ.update(s3_env(endpoint))
        rounds = []
        for i in range(a.rounds):
            if a.s3:
                import s3fs

                bucket = f"stress-{i}-{os.getpid()}"
                s3fs.S3FileSystem(client_kwargs={"endpoint_url": endpoint}).mkdir(bucket)
                parent = f"s3://{bucket}/cache"
            else:
                parent = os.path.join(work, f"cache-{i}")
            r = run_round(i, rng, ("file://" + parent) if not a.s3 else parent, a.src, work)
            rounds.append(r)
            print(json.dumps(r), flush=True)
        failed = sum(1 for r in rounds if r["failures"])
        multi = sum(1 for r in rounds if r["writes"] > 1)
        print(f"{len(rounds)} rounds, {sum(r['processes'] for r in rounds)} processes: "
              f"{failed} rounds with a failed process ({sum(r['failures'] for r in rounds)} "
              f"processes), {multi} rounds with more than one write, "
              f"{sum(1 for r in rounds if r['left'])} rounds leaving data behind")


if __name__ == "__main__":
    main()
