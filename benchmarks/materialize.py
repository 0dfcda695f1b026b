"""Materialization: a Spark DataFrame -> petastream MDS vs Spark's own ``df.write.parquet``.

``df.write.parquet`` is what Petastorm's converter does. Same cached DataFrame, same local[2]
session. Workloads: 'tabular' (id long, 16-float array, int label) and 'binary' (the same plus
a 256-byte binary payload and a short string); codecs zstd:1 (the default), zstd (level 3)
and none. After one warm-up run of each variant, the
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
WORKLOADS = ("tabular", "binary")
CODECS = ("zstd:1", "zstd", None)  # materialize's default (level 1), level 3, none


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

        variants = {PARQUET: parquet}
        for codec in CODECS:
            variants[f"petastream materialize ({codec or 'uncompressed'})"] = (
                lambda tag, codec=codec: mds(tag, codec))
        times: dict[str, list[float]] = {v: [] for v in variants}
        for v, fn in variants.items():
            fn(f"warm-{len(times[v])}")
        for r in range(rounds):
            for v, fn in variants.items():
                times[v].append(fn(f"{r}"))
        for v, ts in times.items():
            ratios = [p / t for p, t in zip(times[PARQUET], ts)]
            note = "" if v == PARQUET else f"x{statistics.median(ratios):.2f} of parquet (median of rounds)"
            results.append(Result(NAME, f"{workload}: {v}", n, min(ts), note=note,
                                  extra={"times": ts, "ratios": ratios}))
        df.unpersist()
    shutil.rmtree(tmp, ignore_errors=True)
    spark.stop()
    return results
