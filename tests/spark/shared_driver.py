"""One driver process of the shared-cache tests and the stress run: its own local Spark
session, one conversion into a shared parent directory, then reading the dataset.

Usage: python -m tests.spark.shared_driver <mode> <parquet_dir> <parent> <workdir> [options]

* ``mode``: ``native`` (``materialize`` into the Spark conf's cache directory) or ``compat``
  (``make_spark_converter`` and ``make_torch_dataloader``), default settings (delete at exit).
* Waits for ``<workdir>/<--go, default go>`` before converting, so the processes start together; writes
  ``<workdir>/<name>.converted.json`` (url, created) right after converting.
* ``--slow S``: the DataFrame's rows go through a Python function (``mapInPandas``) that
  sleeps S seconds per partition (the plan, hence the content key, is the same whatever S is,
  0 included).
* Reads every row of the dataset ``--passes`` times, reopening it each pass, and then keeps
  reading while ``<workdir>/<name>.keep-reading`` exists, plus one pass after it is gone. The
  last stdout line is JSON: url, created, passes, ok (every pass saw every id once).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time


def _spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[1]").appName("petastream-shared")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "512m").config("spark.sql.shuffle.partitions", "1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _dataframe(spark, parquet: str, slow: float | None):
    from pyspark.sql import functions as F

    def passthrough(it):  # sleeps in the executor; its body is not part of the plan text
        import time as _t

        _t.sleep(slow)
        yield from it

    df = spark.read.parquet(parquet)
    if slow is not None:
        df = df.mapInPandas(passthrough, df.schema)
    return df.select("id", F.col("x"))


def _read_native(url: str) -> list[int]:
    import petastream

    ds = petastream.open(url)
    return sorted(int(i) for i in ds.read(range(len(ds)), ["id"])["id"])


def _read_compat(conv) -> list[int]:
    with conv.make_torch_dataloader(batch_size=64, num_epochs=1, workers_count=1) as loader:
        return sorted(int(i) for b in loader for i in b["id"])


class _Writes(logging.Handler):
    """compat does not say whether it wrote: its "Materialize dataframe" log line does."""

    created = False

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("Materialize dataframe to url"):
            self.created = True


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["native", "compat"])
    p.add_argument("parquet")
    p.add_argument("parent")
    p.add_argument("workdir")
    p.add_argument("--name", default=str(os.getpid()))
    p.add_argument("--slow", type=float, default=None)
    p.add_argument("--go", default="go")
    p.add_argument("--passes", type=int, default=1)
    p.add_argument("--rows", type=int, required=True)
    a = p.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(created).3f %(name)s %(message)s")
    logging.getLogger("petastream.spark").setLevel(logging.DEBUG)
    for noisy in ("py4j", "pyspark", "s3fs", "botocore", "aiobotocore", "fsspec"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    spark = _spark()
    df = _dataframe(spark, a.parquet, a.slow)
    go = os.path.join(a.workdir, a.go)
    open(os.path.join(a.workdir, f"{a.name}.ready"), "w").close()
    while not os.path.exists(go):
        time.sleep(0.05)
    if a.mode == "native":
        from petastream.spark import PARENT_CONF, materialize

        # The cache directory from the Spark conf: delete at exit by default (a parent_url
        # argument names a destination, which is kept).
        spark.conf.set(PARENT_CONF, a.parent)
        m = materialize(df, progress_interval=1.0)
        url, created = m.url, m.created

        def read() -> list[int]:
            return _read_native(url)
    else:
        from petastream.compat import SparkDatasetConverter, make_spark_converter

        spark.conf.set(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, a.parent)
        writes = _Writes()
        logging.getLogger("petastream.compat").addHandler(writes)
        conv = make_spark_converter(df, materialize=True)  # a plain scan would be read in place (#35)
        url, created = conv.cache_dir_url, writes.created

        def read() -> list[int]:
            return _read_compat(conv)
    with open(os.path.join(a.workdir, f"{a.name}.converted.json"), "w") as f:
        json.dump({"url": url, "created": created, "t": time.time()}, f)
    expected = list(range(a.rows))
    passes, ok = 0, True
    keep = os.path.join(a.workdir, f"{a.name}.keep-reading")
    while True:
        more = os.path.exists(keep)  # looked at before the pass: one full pass after it goes
        ok = ok and read() == expected
        passes += 1
        if passes >= a.passes and not more:
            break
        time.sleep(0.2)
    print(json.dumps({"url": url, "created": created, "passes": passes, "ok": ok}), flush=True)


if __name__ == "__main__":
    main()
