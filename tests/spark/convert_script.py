"""Run by the cross-process tests: convert a Parquet-backed DataFrame in a fresh process.

Usage: python -m tests.spark.convert_script <parquet_dir> <parent_cache_dir> <go_file> <sc://...>
A separate driver process with its own petastream state, on the test session's Spark through
Spark Connect (no second JVM to start). Waits for <go_file> to exist (so two processes start
their conversions together), converts with keep_at_exit=True, reads the whole dataset back and
prints one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> None:
    parquet, parent, go, remote = sys.argv[1:5]
    from pyspark.sql.connect.session import SparkSession

    spark = SparkSession.builder.remote(remote).getOrCreate()
    df = spark.read.parquet(parquet)
    with open(f"{go}.ready-{os.getpid()}", "w"):
        pass
    deadline = time.time() + 120
    while not os.path.exists(go) and time.time() < deadline:
        time.sleep(0.05)
    import petastream
    from petastream.spark import materialize

    m = materialize(df, parent, keep_at_exit=True)
    ds = petastream.open(m.url)
    ids = sorted(int(x) for x in ds.read(range(len(ds)), ["id"])["id"])
    print(json.dumps({"url": m.url, "reused": m.reused, "created": m.created,
                      "complete_ids": ids == list(range(len(ids))), "n": len(ds)}))
    spark.stop()


if __name__ == "__main__":
    main()
