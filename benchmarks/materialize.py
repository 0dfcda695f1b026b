"""Materialization: a Spark DataFrame -> petastream MDS vs Spark's own ``df.write.parquet``.

``df.write.parquet`` is what Petastorm's converter does. Same cached DataFrame, same local[2]
session. Workloads: 'tabular' (id long, 16-float array, int label) and 'binary' (the same plus
a 256-byte binary payload and a short string); codecs zstd:1 (the default on remote storage),
zstd (level 3) and none (the default on a local disk, where this runs). A last row is the bound on all of
them: a ``mapInArrow`` job whose tasks only count their batches (Spark scanning the rows and
shipping them to Python as Arrow), which no writer fed through ``mapInArrow`` can beat. After one warm-up run of each variant, the
variants run interleaved for ``--rounds`` rounds (the machine is shared: a slow moment hits
every variant of a round alike); each row reports the best time and, in its note, the median
of its per-round ratios to the parquet run of the same round.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

from benchmarks.harness import Result

NAME = "materialize"
PARQUET = "spark df.write.parquet (snappy)"
FLOOR = "bound: a mapInArrow job that only counts its batches"
WORKLOADS = ("tabular", "binary")
CODECS = ("zstd:1", "zstd", None)  # 'auto' remote (level 1), level 3, 'auto' local (none)


def dataframe(spark: Any, workload: str, n: int) -> Any:
    """The workload as a DataFrame of 2 partitions (not cached)."""
    from pyspark.sql import functions as F

    features = F.array(*[F.rand(seed=i).cast("float") for i in range(16)]).alias("features")
    cols = ["id", features, (F.col("id") % 10).cast("int").alias("label")]
    if workload == "binary":
        # 8 x sha-256 of the id: 256 pseudo-random bytes per row
        hexes = [F.sha2(F.concat(F.col("id").cast("string"), F.lit(f"-{k}")), 256) for k in range(8)]
        cols += [F.unhex(F.concat(*hexes)).alias("payload"),
                 F.concat(F.lit("item-"), (F.col("id") % 1000).cast("string")).alias("name")]
    return spark.range(n, numPartitions=2).select(*cols)


def _busy_cpu_seconds() -> float:
    """Busy CPU seconds of the whole machine so far (Linux; 0 elsewhere): the JVM, its Python
    workers and the driver together, which the writes saturate; other load on the machine
    counts too, but far less than it swings wall times."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return 0.0
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # minus idle, iowait


def _count_batches(batches: Any) -> Any:
    import pyarrow as pa

    yield pa.RecordBatch.from_pydict({"rows": [sum(b.num_rows for b in batches)]})


def session() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "4g")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run(args: argparse.Namespace) -> list[Result]:
    from petastream.spark import materialize

    spark = session()
    n = args.rows
    rounds = max(1, getattr(args, "rounds", 2))
    tmp = tempfile.mkdtemp(prefix="petastream-bench-")
    results = []
    for workload in getattr(args, "workloads", None) or WORKLOADS:
        df = dataframe(spark, workload, n).cache()
        df.count()

        def parquet(tag: str, df: Any = df) -> float:
            out = os.path.join(tmp, f"parquet-{tag}")
            t = time.perf_counter()
            df.write.option("compression", "snappy").parquet("file://" + out)
            seconds = time.perf_counter() - t
            shutil.rmtree(out, ignore_errors=True)
            return seconds

        def mds(tag: str, compression: str | None, df: Any = df) -> float:
            parent = os.path.join(tmp, f"mds-{tag}")
            t = time.perf_counter()
            materialize(df, "file://" + parent, compression=compression, reuse=False,
                        keep_at_exit=True)
            seconds = time.perf_counter() - t
            shutil.rmtree(parent, ignore_errors=True)
            return seconds

        def arrow_only(tag: str, df: Any = df) -> float:
            t = time.perf_counter()
            df.mapInArrow(_count_batches, "rows long").collect()
            return time.perf_counter() - t

        variants = {PARQUET: parquet}
        for codec in CODECS:
            variants[f"petastream materialize ({codec or 'uncompressed: the local default'})"] = (
                lambda tag, codec=codec: mds(tag, codec))
        variants[FLOOR] = arrow_only
        times: dict[str, list[float]] = {v: [] for v in variants}
        cpu: dict[str, list[float]] = {v: [] for v in variants}
        for v, fn in variants.items():
            fn(f"warm-{len(times[v])}")
        for r in range(rounds):
            for v, fn in variants.items():
                busy = _busy_cpu_seconds()
                times[v].append(fn(f"{r}"))
                cpu[v].append(_busy_cpu_seconds() - busy)
        for v, ts in times.items():
            ratios = [p / t for p, t in zip(times[PARQUET], ts)]
            cpu_ratios = [p / c for p, c in zip(cpu[PARQUET], cpu[v]) if c > 0]
            note = "" if v == PARQUET else (
                f"x{statistics.median(ratios):.2f} of parquet (median of rounds; CPU-s "
                f"x{statistics.median(cpu_ratios or [0]):.2f})")
            results.append(Result(NAME, f"{workload}: {v}", n, min(ts), note=note,
                                  extra={"times": ts, "ratios": ratios, "cpu_seconds": cpu[v],
                                         "cpu_ratios": cpu_ratios}))
        df.unpersist()
    shutil.rmtree(tmp, ignore_errors=True)
    spark.stop()
    return results
