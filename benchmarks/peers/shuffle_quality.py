"""Shuffle quality of Petastorm's converter (or petastream's compat façade) per argument combination.

Run by ``benchmarks.shuffle_quality`` with the Petastorm env's python (``--impl petastorm``) or
petastream's own (``--impl petastream-compat``); only the import differs. A local[2] Spark session
reads the workload's Parquet (``id`` plus the other columns, so Petastorm's converter writes as many
row groups as it would for the real data), ``make_spark_converter`` materializes it once, then for
every combination of ``shuffling_queue_capacity`` and ``shuffle_row_groups`` one epoch of
``make_torch_dataloader(batch_size=1024, num_epochs=1, ...)`` is read and scored:

    score = mean |id[k+1] - id[k]| / (N / 3)     # 1: a uniform shuffle, 0: the stored order
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np
from _common import BATCH, describe, emit
from petastorm_epoch import row_groups, session_and_frame


def score(ids: np.ndarray) -> float:
    ids = np.asarray(ids, dtype=np.float64)
    return float(np.abs(np.diff(ids)).mean() / (len(ids) / 3))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--impl", choices=["petastorm", "petastream-compat"], default="petastorm")
    p.add_argument("--parquet", required=True)
    p.add_argument("--cache-dir", required=True)
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--combos", required=True, help='JSON list of [capacity, shuffle_row_groups]')
    args = p.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    try:
        spark, df, make_spark_converter = session_and_frame(args.impl, args.parquet, args.cache_dir)
        converter = make_spark_converter(df)
    except Exception as e:  # noqa: BLE001 - reported, not raised
        emit(error=f"failed to materialize: {describe(e)}")
        return
    scores, errors = {}, {}
    for capacity, by_group in json.loads(args.combos):
        key = f"{capacity},{by_group}"
        try:
            with converter.make_torch_dataloader(batch_size=BATCH, num_epochs=1, shuffling_queue_capacity=capacity,
                                                 shuffle_row_groups=by_group) as loader:
                ids = np.concatenate([np.asarray(b["id"]) for b in loader])
            if len(ids) != args.rows or len(np.unique(ids)) != args.rows:
                errors[key] = f"epoch of {len(ids)} rows ({len(np.unique(ids))} distinct), expected {args.rows}"
            else:
                scores[key] = round(score(ids), 4)
        except Exception as e:  # noqa: BLE001
            errors[key] = describe(e)
    extra = {}
    if args.impl == "petastorm":
        extra["parquet_files"], extra["row_groups"] = row_groups(args.cache_dir)
    emit(scores=scores, errors=errors, extra=extra)
    converter.delete()
    spark.stop()


if __name__ == "__main__":
    main()
