"""A training loop's epochs in turn (train, validation, train) through compat
``make_tf_dataset`` over Parquet read in place, with the decode workers keeping 1 dataset open
(as before issue 36's worker LRU: a switch reopens) and 2 (the default), interleaved.

Each round runs, for each setting in turn, train (1M 'tabular' rows), validation (20k) and train
again, each a ``make_tf_dataset`` context of its own over a converter built once (what
``make_spark_converter(spark.read.parquet(...))`` reads, built here without Spark as
:mod:`benchmarks.tf_defaults` does). The settings run in pools of their own (the variable is part
of the workers' environment), so each keeps its state between rounds. Reported per setting: the
median wall and CPU seconds (this process and its worker processes, from /proc) of the train
epoch after validation, and its row groups decoded. Run from the repository root:
``python -m benchmarks.train_val_loop --rounds 3``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.tf_defaults import cpu_seconds
from benchmarks.workloads import prepare

BATCH = 1024
KEPT = "PETASTREAM_WORKER_KEPT_DATASETS"


def converter(parquet: str, rows: int) -> Any:
    from petastream.compat._direct import DirectRead
    from petastream.compat.spark_dataset_converter import SparkDatasetConverter

    files = sorted(str(p) for p in Path(parquet).glob("*.parquet"))
    return SparkDatasetConverter(None, files, rows, direct=DirectRead(
        "parquet", tuple(files), ("features", "id", "label"), None, {}, rows))


def epoch(conv: Any) -> tuple[float, float, int]:
    """Wall and CPU seconds of one epoch in a context of its own, and its rows."""
    wall, cpu = time.perf_counter(), cpu_seconds()
    with conv.make_tf_dataset(batch_size=BATCH, num_epochs=1) as ds:
        rows = sum(int(b.id.shape[0]) for b in ds)
    return time.perf_counter() - wall, cpu_seconds() - cpu, rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--val-rows", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    train = converter(prepare("tabular", args.rows)["parquet"], args.rows)
    val = converter(prepare("tabular", args.val_rows)["parquet"], args.val_rows)
    results: dict[str, list[tuple[float, float]]] = {"1": [], "2": []}
    for r in range(args.rounds + 1):  # round 0 warms both settings' pools up
        for keep in results:
            os.environ[KEPT] = keep
            epoch(train)
            epoch(val)
            wall, cpu, rows = epoch(train)
            assert rows == args.rows
            if r:
                results[keep].append((wall, cpu))
                print(f"round {r} keep={keep}: train after val {wall:.2f} s wall, {cpu:.2f} CPU-s", flush=True)
    out = {}
    for keep, runs in results.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        out[f"keep={keep}"] = {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                               "rows_per_s": round(args.rows / wall), "cpu_us_per_row": round(cpu / args.rows * 1e6, 3)}
    ratios = [w1 / w2 for (w1, _), (w2, _) in zip(results["1"], results["2"])]
    out["speedup keep=2 over keep=1, per round"] = [round(x, 2) for x in ratios]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
