"""The converter on a table scan (issue #35): read the table's files directly vs materialize.

``make_spark_converter(df)`` where ``df`` is a scan of the 'tabular' workload's Parquet table
with a projection and a filter (``label < 5``: about half the rows), then one epoch of
``make_torch_dataloader(batch_size=1024)``. Three variants, each in a fresh process with a fresh
local[2] Spark session (``benchmarks/peers/converter_scan.py``), interleaved for ``--rounds``
rounds so a slow moment of the shared machine hits every variant of a round alike:

* petastream, the converter's choice (``petastream.spark.converter.materialize=auto``): the
  plan is a plain Parquet scan, so it streams the table's own files and writes nothing;
* petastream, materialization forced (``...materialize=always``): the DataFrame as MDS;
* Petastorm 0.13.1's converter, in its own env (``.bench/envs/petastorm``): the DataFrame
  written as Parquet.

Each row: the median (and min–max) over the rounds of seconds from ``make_spark_converter`` to
the first batch, to the end of the epoch, and the bytes written under the cache dir.

``python -m benchmarks.converter_scan [--rows 1000000] [--rounds 5]``
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile

from benchmarks import peer_envs
from benchmarks.harness import Result, save
from benchmarks.workloads import make_data, prepare

NAME = "converter_scan"
VARIANTS = (
    ("petastream: reads the table's files (auto)", None, "auto"),
    ("petastream: materialized as MDS (always)", None, "always"),
    ("Petastorm 0.13.1: materialized as Parquet", "petastorm", "auto"),
)


def _spread(values: list[float]) -> str:
    if not values:
        return "unavailable"
    return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"


def run(args: argparse.Namespace) -> list[Result]:
    data = make_data("tabular", args.rows)
    kept = int((data["label"] < 5).sum())
    paths = prepare("tabular", args.rows, data)
    runs: dict[str, list[dict]] = {v: [] for v, _, _ in VARIANTS}
    errors: dict[str, str] = {}
    for r in range(args.rounds):
        for variant, peer, mode in VARIANTS:
            if variant in errors:
                continue
            cache = tempfile.mkdtemp(prefix="petastream-convscan-")
            try:
                res = peer_envs.run_runner(
                    "converter_scan.py",
                    ["--impl", "petastorm" if peer else "petastream-compat", "--materialize", mode,
                     "--parquet", paths["parquet"], "--cache-dir", cache, "--rows", str(kept)],
                    peer, args.peer_timeout)
            finally:
                shutil.rmtree(cache, ignore_errors=True)
            if "error" in res:
                errors[variant] = res["error"]
            else:
                runs[variant].append(res["extra"])
            print(f"round {r + 1}/{args.rounds} {variant}: {res.get('extra') or res.get('error')}", flush=True)
    results = []
    for variant, _, _ in VARIANTS:
        got = runs[variant]
        first = [x["first_batch_s"] for x in got]
        total = [x["total_s"] for x in got]
        written = statistics.median([x["bytes_written"] for x in got]) if got else 0
        note = (errors.get(variant, "") if not got else
                f"first batch {_spread(first)} s, epoch end {_spread(total)} s, "
                f"written {written / 1e6:.1f} MB, "
                f"materialized={got[0]['materialized']}, {len(got)} rounds")
        results.append(Result(NAME, variant, kept, statistics.median(first) if first else None, note=note,
                              extra={"runs": got}))
    return results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--peer-timeout", type=float, default=1800.0)
    args = p.parse_args()
    results = run(args)
    print(f"\n{'variant':<44} note (seconds from make_spark_converter; median (min–max))")
    for res in results:
        print(f"{res.variant:<44} {res.note}")
    print(f"saved {save(NAME, results)}")


if __name__ == "__main__":
    main()
