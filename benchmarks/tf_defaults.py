"""TensorFlow's worker defaults side by side: one shuffled epoch of batches of 1024, interleaved.

For 'tabular' and 'binary' (:func:`benchmarks.workloads.prepare`), each round runs, one after
the other in one process: the floor (numpy permutation + gather + ``tf.convert_to_tensor``,
:func:`petastream.bench.tf_floor`), then ``petastream.tf.dataset(url, 1024, shuffle=True,
num_epochs=1)`` with its default for one worker, 1 and 2 threads, 1 and 2 worker processes (each
one dataset built before the rounds and iterated once per round, as Keras does per epoch), and
compat ``converter.make_tf_dataset(batch_size=1024, num_epochs=1)`` with a context per epoch
(the converter built over the MDS dataset, without Spark, as a materialized one is; and over
the Parquet files read in place, as ``make_spark_converter(spark.read.parquet(...))`` reads them). After a
warm-up epoch of every row, ``--rounds`` rounds; each row reports the median of its rounds'
ratios to the same round's floor, with their min-max, so that a slow stretch of the machine
weighs on the floor and the rows alike. Wall and CPU seconds per million rows beside it (CPU:
this process plus its live worker processes, from /proc, rough where a worker exits mid-epoch;
and this process's alone: on a loaded machine, where wall times mostly measure the neighbours,
the consumer's CPU is the critical path that worker processes leave it).

Run from the repository root: ``python -m benchmarks.tf_defaults --rows 1000000``; before/after a
change, ``PYTHONPATH=<other checkout>/src`` points it at another petastream.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import time
from collections.abc import Callable
from typing import Any

from benchmarks.workloads import WORKLOADS, make_data, prepare
from petastream import bench

BATCH = 1024
Epoch = Callable[[], int]


def _tick() -> float:
    return float(os.sysconf("SC_CLK_TCK"))


def _descendants_cpu(root: int) -> float:
    """CPU seconds of ``root``'s live descendant processes (user + system), from /proc."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / _tick()
    total, frontier = 0.0, {root}
    while frontier:
        kids = {pid for pid, ppid in parents.items() if ppid in frontier}
        total += sum(cpu[k] for k in kids)
        frontier = kids
    return total


def cpu_seconds() -> float:
    """This process, its reaped children and its live descendants."""
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + reaped.ru_utime + reaped.ru_stime + _descendants_cpu(os.getpid())


def floor_epoch(data: dict[str, Any]) -> Epoch:
    return lambda: bench.tf_floor(data, BATCH)[0]


def native_epoch(url: str, workers: int | None, worker_type: str) -> Epoch:
    """One ``petastream.tf.dataset`` built on first use, iterated once per call."""
    built: list[Any] = []

    def epoch() -> int:
        if not built:
            import petastream.tf as ptf

            kwargs: dict[str, Any] = {} if workers is None else {"num_workers": workers}
            built.append(ptf.dataset(url, BATCH, shuffle=True, seed=1, num_epochs=1,
                                     worker_type=worker_type, **kwargs))
        return sum(int(b["id"].shape[0]) for b in built[0])

    return epoch


def compat_epoch(url: str, rows: int) -> Epoch:
    """``make_tf_dataset`` with a context per epoch, over a converter of the MDS dataset."""
    from petastream.compat.spark_dataset_converter import SparkDatasetConverter

    converter = SparkDatasetConverter(url, [url], rows)

    def epoch() -> int:
        with converter.make_tf_dataset(batch_size=BATCH, num_epochs=1) as ds:
            return sum(int(b.id.shape[0]) for b in ds)

    return epoch


def compat_parquet_epoch(parquet: str, rows: int, columns: list[str]) -> Epoch:
    """The same over the workload's Parquet files read in place: the converter
    ``make_spark_converter(spark.read.parquet(...))`` makes (its ``DirectRead``, built here
    without Spark, as :mod:`benchmarks.compat_epoch` does). Run after the MDS row, it reads what
    a script alternating two datasets reads: the worker processes keep both open (two by
    default, ``PETASTREAM_WORKER_KEPT_DATASETS``), so the Parquet source's decoded row groups,
    which live in each worker's memory (local files: no shared decoded cache), stay decoded;
    with 1 kept the workers reopen it and decode every row group again
    (:mod:`benchmarks.train_val_loop` compares the two)."""
    from pathlib import Path

    from petastream.compat._direct import DirectRead
    from petastream.compat.spark_dataset_converter import SparkDatasetConverter

    files = sorted(str(p) for p in Path(parquet).glob("*.parquet"))
    converter = SparkDatasetConverter(None, files, rows, direct=DirectRead(
        "parquet", tuple(files), tuple(sorted(columns)), None, {}, rows))

    def epoch() -> int:
        with converter.make_tf_dataset(batch_size=BATCH, num_epochs=1) as ds:
            return sum(int(b.id.shape[0]) for b in ds)

    return epoch


def rows_of(url: str, rows: int, data: dict[str, Any], which: list[str], parquet: str | None = None) -> dict[str, Epoch]:
    variants: dict[str, Epoch] = {
        "floor": floor_epoch(data),
        "tf.dataset num_workers=1 (default worker_type)": native_epoch(url, 1, "auto"),
        "tf.dataset 1 thread": native_epoch(url, 1, "thread"),
        "tf.dataset 2 threads": native_epoch(url, 2, "thread"),
        "tf.dataset 1 process": native_epoch(url, 1, "process"),
        "tf.dataset 2 processes (default)": native_epoch(url, 2, "process"),
        "compat make_tf_dataset (context per epoch)": compat_epoch(url, rows),
    }
    if parquet is not None:
        variants["compat make_tf_dataset, Parquet in place"] = compat_parquet_epoch(parquet, rows, list(data))
    return {k: v for k, v in variants.items() if k == "floor" or not which or any(w in k for w in which)}


def timed(epoch: Epoch, rows: int, label: str) -> tuple[float, float, float]:
    """Wall, CPU (with workers) and this process's CPU seconds of one epoch."""
    c, m, t = cpu_seconds(), time.process_time(), time.perf_counter()
    got = epoch()
    wall, cpu, main = time.perf_counter() - t, cpu_seconds() - c, time.process_time() - m
    if got != rows:
        raise RuntimeError(f"{label}: an epoch of {got} rows, expected {rows}")
    return wall, cpu, main


def run_workload(workload: str, rows: int, rounds: int, which: list[str]) -> dict[str, Any]:
    data = make_data(workload, rows)
    paths = prepare(workload, rows, data)
    variants = rows_of(paths["mds"], rows, data, which, paths["parquet"])
    for label, epoch in variants.items():  # warm-up: builds, worker start, TensorFlow tracing
        timed(epoch, rows, label)
    walls: dict[str, list[float]] = {k: [] for k in variants}
    cpus: dict[str, list[float]] = {k: [] for k in variants}
    mains: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(rounds):
        for label, epoch in variants.items():
            wall, cpu, main = timed(epoch, rows, label)
            walls[label].append(wall)
            cpus[label].append(cpu)
            mains[label].append(main)
    out = {}
    for label in variants:
        ratios = [f / w for f, w in zip(walls["floor"], walls[label])]
        out[label] = {"ratio_median": statistics.median(ratios), "ratio_min": min(ratios),
                      "ratio_max": max(ratios),
                      "wall_s_per_M": statistics.median(walls[label]) * 1e6 / rows,
                      "cpu_s_per_M": statistics.median(cpus[label]) * 1e6 / rows,
                      "main_cpu_s_per_M": statistics.median(mains[label]) * 1e6 / rows}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--workloads", nargs="*", default=list(WORKLOADS), choices=WORKLOADS)
    p.add_argument("--only", nargs="*", default=[], help="rows whose label contains one of these (and the floor)")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args()
    from petastream._quiet import import_tensorflow

    import_tensorflow()
    import petastream

    print(f"petastream from {os.path.dirname(petastream.__file__)}; {args.rows} rows, {args.rounds} rounds;"
          f" load average {os.getloadavg()[0]:.2f}", flush=True)
    results = {}
    for workload in args.workloads:
        results[workload] = res = run_workload(workload, args.rows, args.rounds, args.only)
        print(f"\n{workload}: x floor, median [min-max] | wall s/M rows | CPU s/M rows (all | this process)")
        for label, r in res.items():
            print(f"  {label:<46} {r['ratio_median']:.2f} [{r['ratio_min']:.2f}-{r['ratio_max']:.2f}]"
                  f" | {r['wall_s_per_M']:.2f} | {r['cpu_s_per_M']:.2f} | {r['main_cpu_s_per_M']:.2f}", flush=True)
    print(f"load average after {os.getloadavg()[0]:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
