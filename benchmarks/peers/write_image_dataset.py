"""Write the image-codec Unischema dataset of ``benchmarks.image_epoch`` with the real Petastorm.

Run once by ``benchmarks.image_epoch`` with the Petastorm env's python (and OpenCV, which
Petastorm's ``CompressedImageCodec`` needs, on ``--sys-path``): ``materialize_dataset`` around a
local[2] Spark write, as Petastorm's docs write a dataset. Schema: ``id`` (int64,
``ScalarCodec(LongType)``), ``label`` (int32, ``ScalarCodec(IntegerType)``), ``image`` (uint8
(64, 64, 3), ``CompressedImageCodec('png')``). Images: three seeded sinusoidal gradients (one
per channel, random direction and frequency) plus uniform noise of +-4: PNG compresses them to
about 70% of their 12,288 raw bytes, neither trivial nor white noise. Rows are range-partitioned
by ``id`` into ``--files`` files; ``--row-group-mb`` is ``materialize_dataset``'s
``row_group_size_mb``. Prints one JSON line (``_common.emit``): rows, files, row groups, bytes.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import sys
import time

from _common import describe, emit

SIDE = 64
NOISE = 4


def image(rng, np):
    """One (64, 64, 3) uint8 image: a sinusoidal gradient per channel, plus noise."""
    y, x = np.mgrid[0:SIDE, 0:SIDE] / SIDE * 2 * np.pi
    angle = rng.uniform(0, 2 * np.pi, 3)
    freq = rng.uniform(0.5, 3.0, 3)
    chans = [127 + 100 * np.sin(freq[c] * (x * np.cos(angle[c]) + y * np.sin(angle[c]))) for c in range(3)]
    noise = rng.integers(-NOISE, NOISE + 1, (SIDE, SIDE, 3))
    return np.clip(np.stack(chans, -1) + noise, 0, 255).astype(np.uint8)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True, help="the dataset directory (replaced)")
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--files", type=int, default=4)
    p.add_argument("--row-group-mb", type=int, default=4)
    p.add_argument("--seed", type=int, default=12)
    p.add_argument("--sys-path", default=None, help="a directory put first on sys.path (OpenCV)")
    args = p.parse_args()
    if args.sys_path:
        sys.path.insert(0, args.sys_path)
    try:
        import numpy as np
        import pyarrow.parquet as pq
        from petastorm.codecs import CompressedImageCodec, ScalarCodec
        from petastorm.etl.dataset_metadata import materialize_dataset
        from petastorm.unischema import Unischema, UnischemaField, dict_to_spark_row
        from pyspark.sql import SparkSession
        from pyspark.sql import types as T

        schema = Unischema("ImageRows", [
            UnischemaField("id", np.int64, (), ScalarCodec(T.LongType()), False),
            UnischemaField("label", np.int32, (), ScalarCodec(T.IntegerType()), False),
            UnischemaField("image", np.uint8, (SIDE, SIDE, 3), CompressedImageCodec("png"), False),
        ])
        t = time.perf_counter()
        os.environ["PYSPARK_PYTHON"] = sys.executable
        spark = (SparkSession.builder.master("local[2]").appName("petastream-image-dataset")
                 .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                 .config("spark.driver.memory", "2g").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        rng = np.random.default_rng(args.seed)
        rows = [dict_to_spark_row(schema, {"id": np.int64(i), "label": np.int32(rng.integers(0, 10)),
                                           "image": image(rng, np)})
                for i in range(args.rows)]
        shutil.rmtree(args.out, ignore_errors=True)
        url = "file://" + os.path.abspath(args.out)
        with materialize_dataset(spark, url, schema, row_group_size_mb=args.row_group_mb):
            df = spark.createDataFrame(rows, schema.as_spark_schema()).repartitionByRange(args.files, "id")
            df.write.mode("overwrite").parquet(url)
        spark.stop()
        for name in os.listdir(args.out):  # Spark's checksums (dot files: glob skips them)
            if name.endswith(".crc"):
                os.remove(os.path.join(args.out, name))
        files = sorted(glob.glob(os.path.join(args.out, "*.parquet")))
        out = {"rows": args.rows, "seconds": time.perf_counter() - t, "extra": {
            "files": len(files), "row_groups": sum(pq.ParquetFile(f).num_row_groups for f in files),
            "bytes": sum(os.path.getsize(f) for f in files)}}
    except Exception as e:  # noqa: BLE001 - reported, not raised
        out = {"error": f"failed: {describe(e)}"}
    emit(**out)


if __name__ == "__main__":
    main()
