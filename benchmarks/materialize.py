"""Materialization: a Spark DataFrame -> petastream MDS vs Spark's own ``df.write.parquet``.

``df.write.parquet`` is what Petastorm's converter does. Same DataFrame ('tabular': id long,
16-float array, int label), same local[2] session, each timed after one warm-up run of each.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

from benchmarks.harness import Result

NAME = "materialize"


def run(args: argparse.Namespace) -> list[Result]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from petastream.spark import materialize

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    n = args.rows
    features = F.array(*[F.rand(seed=i).cast("float") for i in range(16)]).alias("features")
    df = spark.range(n, numPartitions=2).select("id", features, (F.col("id") % 10).cast("int").alias("label"))
    df = df.cache()
    df.count()
    tmp = tempfile.mkdtemp(prefix="petastream-bench-")

    def parquet(i: int) -> float:
        out = os.path.join(tmp, f"parquet-{i}")
        t = time.perf_counter()
        df.write.option("compression", "snappy").parquet("file://" + out)
        return time.perf_counter() - t

    def mds(i: int, compression: str | None) -> float:
        parent = os.path.join(tmp, f"mds-{i}-{compression}")
        t = time.perf_counter()
        materialize(df, "file://" + parent, compression=compression, reuse=False, keep_at_exit=True)
        return time.perf_counter() - t

    results = []
    parquet(0)
    results.append(Result(NAME, "spark df.write.parquet (snappy)", n, min(parquet(i) for i in (1, 2))))
    for comp in ("zstd", None):
        mds(0, comp)
        label = f"petastream materialize ({comp or 'uncompressed'})"
        results.append(Result(NAME, label, n, min(mds(i, comp) for i in (1, 2))))
    shutil.rmtree(tmp, ignore_errors=True)
    spark.stop()
    return results
