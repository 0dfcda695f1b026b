"""The converter on a table scan: time to the first batch, and bytes written to the cache dir.

Run by ``benchmarks.converter_scan`` with the Petastorm env's python (``--impl petastorm``) or
petastream's (``--impl petastream-compat``, ``--materialize auto|always``: the converter's own
choice, which reads a plain Parquet scan's files directly, or materialization forced). The code
is the same for both, only the import differs. Steps, in a fresh process (a fresh Spark
session): ``df = spark.read.parquet(table).select(...).where(label < 5)`` (what a training job
hands the converter: a table scan with a projection and a filter), then timed from
``make_spark_converter(df)`` to the first batch of ``make_torch_dataloader(batch_size=1024,
num_epochs=1)``, then to the end of that epoch; bytes under the cache dir are counted after the
converter returned.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from _clock import cpu_between, snapshot
from _common import BATCH, describe, emit

COLUMNS = {"tabular": ("id", "features", "label"),
           "binary": ("id", "features", "label", "payload", "name")}


def _bytes_under(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--impl", choices=["petastorm", "petastream-compat"], default="petastorm")
    p.add_argument("--materialize", choices=["auto", "always"], default="auto")
    p.add_argument("--parquet", required=True)
    p.add_argument("--cache-dir", required=True)
    p.add_argument("--rows", type=int, required=True, help="rows the filter keeps")
    p.add_argument("--workload", choices=sorted(COLUMNS), default="tabular")
    p.add_argument("--convert-only", action="store_true", help="no epoch: time the conversion only")
    p.add_argument("--spark-conf", action="append", default=[], help="key=value, set on the session")
    args = p.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if args.impl == "petastorm":
        from petastorm.spark import SparkDatasetConverter, make_spark_converter
    else:
        from petastream.compat import SparkDatasetConverter, make_spark_converter
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    cache_url = "file://" + os.path.abspath(args.cache_dir)
    builder = (SparkSession.builder.master("local[2]").appName("petastream-bench")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", "4g")
               .config(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, cache_url))
    if args.impl != "petastorm":
        builder = builder.config("petastream.spark.converter.materialize", args.materialize)
    for kv in args.spark_conf:
        builder = builder.config(*kv.split("=", 1))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    df = (spark.read.parquet("file://" + os.path.abspath(args.parquet))
          .select(*COLUMNS[args.workload]).where(F.col("label") < 5))
    try:
        before = snapshot()
        t0 = time.perf_counter()
        converter = make_spark_converter(df)
        convert_s = time.perf_counter() - t0
        convert_cpu = cpu_between(before, snapshot())  # this process and all under it: JVM, workers
        written = _bytes_under(args.cache_dir)
        rows, first_s = (args.rows if args.convert_only else 0), None
        if not args.convert_only:
            with converter.make_torch_dataloader(batch_size=BATCH, num_epochs=1) as loader:
                for batch in loader:
                    if first_s is None:
                        first_s = time.perf_counter() - t0
                    rows += len(batch["id"])
        total_s = time.perf_counter() - t0
    except Exception as e:  # noqa: BLE001 - reported, not raised
        emit(error=f"failed: {describe(e)}")
        return
    if rows != args.rows:
        emit(error=f"failed: the epoch served {rows} rows, the filter keeps {args.rows}")
        return
    extra = {"convert_s": round(convert_s, 3), "convert_cpu_s": round(convert_cpu, 3), "first_batch_s": round(first_s or total_s, 3),
             "total_s": round(total_s, 3), "bytes_written": written,
             "materialized": bool(getattr(converter, "materialized", True))}
    emit(rows=rows, seconds=total_s, extra=extra)
    converter.delete()
    spark.stop()


if __name__ == "__main__":
    main()
