"""One shuffled epoch through Petastorm's Spark converter (or petastream's compat façade).

Run by ``benchmarks.peer_envs`` with the Petastorm env's python (``--impl petastorm``) or with
petastream's own (``--impl petastream-compat``): the code below is identical for both, only the
import differs, which is the migration petastream promises. Steps: a local[2] Spark session
reads the workload's Parquet, ``make_spark_converter(df)`` materializes it into a file:// cache
dir (timed apart, reported as extra), then ``make_torch_dataloader(batch_size=1024,
num_epochs=1)`` or ``make_tf_dataset(batch_size=1024, num_epochs=1)`` (defaults otherwise:
``shuffle_row_groups=True``, thread pool; ``--pool process``: ``reader_pool_type="process"``)
is iterated for one epoch, rows counted via ``id``.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time

from _common import BATCH, describe, emit, timed_epochs


def converter_api(impl: str):
    if impl == "petastorm":
        from petastorm.spark import SparkDatasetConverter, make_spark_converter
    else:
        from petastream.compat import SparkDatasetConverter, make_spark_converter
    return SparkDatasetConverter, make_spark_converter


def spark_session(cache_url: str, conf_key: str):
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("petastream-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "4g").config(conf_key, cache_url).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def session_and_frame(impl: str, parquet: str, cache_dir: str, drop: list[str] = ()):
    """``(spark, df, make_spark_converter)``: a local[2] session whose converter cache dir is
    ``cache_dir``, and the workload's Parquet read as a DataFrame (``drop`` columns dropped)."""
    SparkDatasetConverter, make_spark_converter = converter_api(impl)
    spark = spark_session("file://" + os.path.abspath(cache_dir), SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF)
    df = spark.read.parquet("file://" + os.path.abspath(parquet))
    return spark, (df.drop(*drop) if drop else df), make_spark_converter


def row_groups(cache_dir: str) -> tuple[int, int]:
    """Files and row groups the converter wrote (its shuffle permutes row groups only)."""
    import pyarrow.parquet as pq

    files = glob.glob(os.path.join(cache_dir, "**", "*.parquet"), recursive=True)
    return len(files), sum(pq.ParquetFile(f).num_row_groups for f in files)


def torch_epoch(converter, pool: str = "thread") -> int:
    with converter.make_torch_dataloader(batch_size=BATCH, num_epochs=1, reader_pool_type=pool) as loader:
        return sum(len(b["id"]) for b in loader)


def tf_epoch(converter, pool: str = "thread") -> int:
    with converter.make_tf_dataset(batch_size=BATCH, num_epochs=1, reader_pool_type=pool) as ds:
        return sum(int(b.id.shape[0]) for b in ds)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--impl", choices=["petastorm", "petastream-compat"], default="petastorm")
    p.add_argument("--framework", choices=["torch", "tf"], required=True)
    p.add_argument("--parquet", required=True)
    p.add_argument("--cache-dir", required=True)
    p.add_argument("--rows", type=int, required=True, help="rows expected in one epoch")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--drop", nargs="*", default=[], help="columns to drop before converting")
    p.add_argument("--pool", choices=["thread", "process"], default="thread", help="reader_pool_type")
    args = p.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    try:
        spark, df, make_spark_converter = session_and_frame(args.impl, args.parquet, args.cache_dir, args.drop)
        t = time.perf_counter()
        converter = make_spark_converter(df)
        materialize_s = time.perf_counter() - t
    except Exception as e:  # noqa: BLE001 - reported, not raised
        emit(error=f"failed to materialize: {describe(e)}")
        return
    extra = {"materialize_s": round(materialize_s, 3),
             "materialize_rows_per_s": round(args.rows / materialize_s)}
    if args.impl == "petastorm":
        extra["parquet_files"], extra["row_groups"] = row_groups(args.cache_dir)
    epoch = torch_epoch if args.framework == "torch" else tf_epoch
    try:
        out = timed_epochs(lambda: epoch(converter, args.pool), args.rows, args.repeat, args.warmup)
    except TypeError as e:
        out = {"error": f"unsupported: {describe(e)}"}
    except Exception as e:  # noqa: BLE001
        out = {"error": f"failed: {describe(e)}"}
    emit(**out, extra=extra)
    converter.delete()
    spark.stop()


if __name__ == "__main__":
    main()
