"""The converter on a table scan (issues #35, #36): read the table's files directly vs materialize.

``make_spark_converter(df)`` where ``df`` is a scan of a workload's Parquet table ('tabular':
id, 16-float array, label; 'binary': the same plus a 256-byte payload and a short string) with
a projection and a filter (``label < 5``: about half the rows), then one epoch of
``make_torch_dataloader(batch_size=1024)`` (``--convert-only``: no epoch, the conversion alone).
Variants, each in a fresh process with a fresh local[2] Spark session
(``benchmarks/peers/converter_scan.py``), interleaved for ``--rounds`` rounds so a slow moment of
the shared machine hits every variant of a round alike:

* petastream, the converter's choice (``petastream.spark.converter.materialize=auto``): the
  plan is a plain Parquet scan, so it streams the table's own files and writes nothing;
* petastream, materialization forced (``...materialize=always``): the DataFrame as MDS (its
  write tasks read the scan's files themselves: ``petastream.spark._file_scan``);
* with ``--scan-tasks``: the same, its files read by Spark tasks (what a cluster or Spark
  Connect runs) instead of the driver's threads (local mode's default);
* with ``--before-src DIR``: the same forced materialization with another checkout's
  ``src`` first on ``PYTHONPATH`` (before/after in one run);
* Petastorm 0.13.1's converter, in its own env (``.bench/envs/petastorm``): the DataFrame
  written as Parquet by Spark.

Each row: the median (and min–max) over the rounds of seconds from ``make_spark_converter`` to
its return (the conversion; with its CPU seconds: the driver, the JVM and its Python workers),
to the first batch, to the end of the epoch, the bytes written under the cache dir, and the
median over rounds of Petastorm's conversion time ÷ this variant's (same round).

``python -m benchmarks.converter_scan [--rows 1000000] [--rounds 5] [--workloads tabular binary]
[--convert-only] [--scan-tasks] [--before-src /path/to/other/src]``
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
PETASTORM = "Petastorm 0.13.1: materialized as Parquet"
VARIANTS = (
    ("petastream: reads the table's files (auto)", None, "auto"),
    ("petastream: materialized as MDS (always)", None, "always"),
    (PETASTORM, "petastorm", "auto"),
)
BEFORE = "petastream before: materialized as MDS (always)"
TASKS = "petastream: materialized as MDS, files read by Spark tasks (always)"


def _spread(values: list[float]) -> str:
    if not values:
        return "unavailable"
    return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"


def run(args: argparse.Namespace) -> list[Result]:
    results = []
    for workload in getattr(args, "workloads", None) or ["tabular"]:
        results += _run_workload(args, workload)
    return results


def _variants(args: argparse.Namespace) -> list[tuple[str, str | None, str, dict[str, str], list[str]]]:
    out: list[tuple[str, str | None, str, dict[str, str], list[str]]] = [
        (v, peer, mode, {}, []) for v, peer, mode in VARIANTS]
    if getattr(args, "convert_only", False):
        out = out[1:]  # the direct path converts nothing: only its epoch would tell
    if getattr(args, "scan_tasks", False):  # what a cluster or Spark Connect runs
        out.insert(-1, (TASKS, None, "always", {},
                        ["--spark-conf", "petastream.spark.materialize.readFiles=tasks"]))
    if getattr(args, "before_src", None):
        out.insert(-1, (BEFORE, None, "always", {"PYTHONPATH": args.before_src}, []))
    return out


def _run_workload(args: argparse.Namespace, workload: str) -> list[Result]:
    data = make_data(workload, args.rows)
    kept = int((data["label"] < 5).sum())
    paths = prepare(workload, args.rows, data)
    variants = _variants(args)
    runs: dict[str, list[dict]] = {v[0]: [] for v in variants}
    errors: dict[str, str] = {}
    extra = ["--workload", workload] + (["--convert-only"] if getattr(args, "convert_only", False) else [])
    for r in range(args.rounds):
        for variant, peer, mode, env, conf in variants:
            if variant in errors:
                continue
            cache = tempfile.mkdtemp(prefix="petastream-convscan-")
            try:
                res = peer_envs.run_runner(
                    "converter_scan.py",
                    ["--impl", "petastorm" if peer else "petastream-compat", "--materialize", mode,
                     "--parquet", paths["parquet"], "--cache-dir", cache, "--rows", str(kept), *extra, *conf],
                    peer, args.peer_timeout, extra_env=env)
            finally:
                shutil.rmtree(cache, ignore_errors=True)
            if "error" in res:
                errors[variant] = res["error"]
                runs[variant].append({})
            else:
                runs[variant].append(res["extra"])
            print(f"{workload} round {r + 1}/{args.rounds} {variant}: {res.get('extra') or res.get('error')}",
                  flush=True)
    results = []
    peer_runs = runs.get(PETASTORM, [])
    for variant, *_ in variants:
        got = [x for x in runs[variant] if x]
        convert = [x["convert_s"] for x in got]
        cpu = [x.get("convert_cpu_s", 0.0) for x in got]
        ratios = [p["convert_s"] / x["convert_s"] for p, x in zip(peer_runs, runs[variant])
                  if p and x and x["convert_s"]]
        cpu_ratios = [p["convert_cpu_s"] / x["convert_cpu_s"] for p, x in zip(peer_runs, runs[variant])
                      if p and x and x.get("convert_cpu_s")]
        written = statistics.median([x["bytes_written"] for x in got]) if got else 0
        note = (errors.get(variant, "") if not got else
                f"convert {_spread(convert)} s, CPU {_spread(cpu)} s"
                + (f", Petastorm ÷ this: wall x{statistics.median(ratios):.2f} CPU "
                   f"x{statistics.median(cpu_ratios or [0]):.2f}" if ratios and variant != PETASTORM else "")
                + ("" if getattr(args, "convert_only", False) else
                   f", first batch {_spread([x['first_batch_s'] for x in got])} s, "
                   f"epoch end {_spread([x['total_s'] for x in got])} s")
                + f", written {written / 1e6:.1f} MB, materialized={got[0]['materialized']}, {len(got)} rounds")
        results.append(Result(NAME, f"{workload}: {variant}", kept,
                              statistics.median(convert) if convert else None, note=note,
                              extra={"runs": runs[variant], "ratios": ratios, "cpu_ratios": cpu_ratios}))
    return results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--workloads", nargs="+", choices=["tabular", "binary"], default=["tabular"])
    p.add_argument("--convert-only", action="store_true", help="time the conversion alone (no epoch)")
    p.add_argument("--before-src", help="another checkout's src/: its forced materialization too")
    p.add_argument("--scan-tasks", action="store_true",
                   help="also the forced materialization with the files read by Spark tasks (as on a cluster)")
    p.add_argument("--peer-timeout", type=float, default=1800.0)
    args = p.parse_args()
    results = run(args)
    print(f"\n{'variant':<56} note (seconds from make_spark_converter; median (min–max))")
    for res in results:
        print(f"{res.variant:<56} {res.note}")
    print(f"saved {save(NAME, results)}")


if __name__ == "__main__":
    main()
