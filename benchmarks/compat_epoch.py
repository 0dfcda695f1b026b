"""compat's PyTorch paths against the floor and the native loader, interleaved (issue 36).

``python -m benchmarks.compat_epoch [--rows N] [--rounds 5] [--trees src /other/src]``

Rows, each one epoch of 1024-row batches over the workload's files (:mod:`benchmarks.workloads`):

* floor: numpy permutation + gather + ``torch.from_numpy`` over the columns in memory;
* native ``petastream.torch.loader`` over the MDS copy, 2 threads, one loader iterated per epoch;
* compat ``make_batch_reader`` + ``BatchedDataLoader`` over the Parquet copy, a reader per epoch
  (Petastorm's pattern), ``workers_count=2``; and the same with ``cache_type="local-disk"``;
* compat ``make_batch_reader`` + ``DataLoader`` (default collate), a reader per epoch;
* the converter's ``make_torch_dataloader(batch_size=1024, num_epochs=1)``, a context per
  epoch: over the Parquet read in place (what ``make_spark_converter(spark.read.parquet(...))``
  serves: built here from its :class:`~petastream.compat._direct.DirectRead`, without Spark) and
  over the MDS copy (what ``make_spark_converter(<mds dir>)`` serves: a materialized dataset).

Each round runs the floor, then every row once, in each tree's process in turn (``--trees``:
source directories, each run in a worker process with that ``PYTHONPATH``: before/after in one
run). After a warm-up round, each row's ratio to its own round's floor is reported as the
median and min–max over the rounds, with wall and CPU seconds (``time.process_time``: every
thread of the process) per epoch. Numbers on a shared machine are rough: compare ratios within
one run.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BATCH = 1024
ROWS = ("floor", "native loader, 2 threads", "make_batch_reader + BatchedDataLoader",
        "the same, local-disk", "make_batch_reader + DataLoader", "converter, Parquet direct",
        "converter, MDS")
ROOT = Path(__file__).resolve().parent.parent


def _count(batches: Any) -> int:
    return sum(len(b["id"]) for b in batches)


def epochs(workload: str, n: int, cache_dir: str) -> dict[str, Callable[[], int]]:
    """One callable per row (floor first), each running one epoch and returning its rows."""
    from benchmarks.workloads import make_data, prepare
    from petastream import bench
    from petastream.compat import make_batch_reader
    from petastream.compat._direct import DirectRead
    from petastream.compat.pytorch import BatchedDataLoader, DataLoader
    from petastream.compat.spark_dataset_converter import SparkDatasetConverter
    from petastream.mds.index import read_index

    data = make_data(workload, n)
    paths = prepare(workload, n, data)
    parquet, mds = paths["parquet"], paths["mds"]
    native = bench.torch_epochs(mds, BATCH, 2)
    disk = {"cache_type": "local-disk", "cache_location": cache_dir, "cache_size_limit": 10 << 30,
            "cache_row_size_estimate": 512}

    def batch_reader(loader: Any, **kwargs: Any) -> Callable[[], int]:
        def epoch() -> int:
            reader = make_batch_reader(parquet, num_epochs=1, workers_count=2, seed=1, **kwargs)
            with loader(reader, batch_size=BATCH) as batches:
                return _count(batches)
        return epoch

    files = sorted(str(p) for p in Path(parquet).glob("*.parquet"))
    direct = SparkDatasetConverter(None, files, n, direct=DirectRead(
        "parquet", tuple(files), tuple(sorted(data)), None, {}, n))
    shards = read_index(mds)
    materialized = SparkDatasetConverter(
        mds, [f"{mds}/{(s['zip_data'] or s['raw_data'])['basename']}" for s in shards], n)

    def converter(conv: Any) -> Callable[[], int]:
        def epoch() -> int:
            with conv.make_torch_dataloader(batch_size=BATCH, num_epochs=1) as batches:
                return _count(batches)
        return epoch

    def floor() -> int:
        return bench.torch_floor(data, BATCH)[0]

    def native_epoch() -> int:
        return native()[0]

    return dict(zip(ROWS, (floor, native_epoch, batch_reader(BatchedDataLoader),
                           batch_reader(BatchedDataLoader, **disk), batch_reader(DataLoader),
                           converter(direct), converter(materialized))))


def serve(workload: str, n: int) -> None:
    """Worker: build the rows, then run each name read from stdin, answering JSON lines."""
    logging.disable(logging.WARNING)  # "Start a new pass" and the converter's notes
    with tempfile.TemporaryDirectory(prefix="compat-epoch-") as cache_dir:
        rows = epochs(workload, n, cache_dir)
        print(json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            name = line.strip()
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                count = rows[name]()
                out = {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu, "rows": count}
            except Exception as e:  # noqa: BLE001 - reported in the table, not raised
                out = {"error": f"{type(e).__name__}: {e}"[:200]}
            print(json.dumps(out), flush=True)


class Worker:
    def __init__(self, tree: str, workload: str, n: int):
        # A training script reads one dataset per epoch loop; here three rows read the Parquet
        # with different options, each through the source its last epoch kept (where kept).
        env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{ROOT}", PETASTREAM_COMPAT_KEPT_SOURCES="3")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.compat_epoch", "--serve", workload, "--rows", str(n)],
            cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert json.loads(self._line()).get("ready")

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"benchmark worker ended (exit {self.proc.wait()})")
        return line

    def run(self, name: str) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(name + "\n")
        self.proc.stdin.flush()
        return json.loads(self._line())

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def compare(workload: str, n: int, trees: list[str], rounds: int) -> None:
    workers = {tree: Worker(tree, workload, n) for tree in trees}
    seen: dict[tuple[str, str], list[dict[str, Any]]] = {}
    try:
        for r in range(rounds + 1):  # round 0 warms up
            for tree, worker in workers.items():
                floor = worker.run("floor")
                for name in ROWS:
                    res = floor if name == "floor" else worker.run(name)
                    if r and "error" not in res and "error" not in floor:
                        res = dict(res, ratio=floor["wall"] / res["wall"])
                    if r:
                        seen.setdefault((tree, name), []).append(res)
    finally:
        for worker in workers.values():
            worker.close()
    print(f"\n{workload}, {n} rows, {rounds} rounds (ratio: the round's floor wall / the row's wall)")
    print(f"{'tree':<28} {'row':<40} {'x floor median (min-max)':>26} {'wall s':>8} {'cpu s':>7} {'cpu us/row':>10}")
    for (tree, name), results in seen.items():
        good = [x for x in results if "ratio" in x]
        if not good:
            print(f"{tree[-28:]:<28} {name:<40} {results[0].get('error', '?')}")
            continue
        ratios = [x["ratio"] for x in good]
        wall = statistics.median(x["wall"] for x in good)
        cpu = statistics.median(x["cpu"] for x in good)
        print(f"{tree[-28:]:<28} {name:<40} {statistics.median(ratios):>10.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
              f"{'':>6} {wall:>8.3f} {cpu:>7.3f} {cpu / n * 1e6:>10.3f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--workloads", nargs="*", default=["tabular", "binary"])
    p.add_argument("--trees", nargs="*", default=[str(ROOT / "src")],
                   help="source directories to compare, each in its own worker process")
    p.add_argument("--serve", metavar="WORKLOAD", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        serve(args.serve, args.rows)
        return
    for workload in args.workloads:
        compare(workload, args.rows, args.trees, args.rounds)


if __name__ == "__main__":
    main()
