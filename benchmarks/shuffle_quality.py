"""Shuffle quality, Petastorm's converter vs petastream compat, per argument combination (#12).

``python -m benchmarks.shuffle_quality --rows 1000000``: the 'tabular' workload's Parquet, one
epoch per combination of ``shuffling_queue_capacity`` (0, 4096, 100000) and
``shuffle_row_groups`` (True, False), in each implementation's own environment (Petastorm's from
``benchmarks/envs``). Score: mean |id[k+1] - id[k]| / (N/3), 1 for a uniform shuffle, 0 for the
stored order. A migrated script must not train on less-shuffled data than before: compat's score
should be at least Petastorm's in every row. Scores only, no timing.
"""

from __future__ import annotations

import argparse
import json
import os

from benchmarks import peer_envs
from benchmarks.workloads import make_data, prepare

COMBOS = [[c, g] for g in (True, False) for c in (0, 4096, 100_000)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--timeout", type=float, default=3600)
    p.add_argument("--impls", default="petastorm,petastream-compat", help="comma-separated")
    args = p.parse_args()
    paths = prepare("tabular", args.rows, make_data("tabular", args.rows))
    results = {}
    for impl, peer in (("petastorm", "petastorm"), ("petastream-compat", None)):
        if impl not in args.impls.split(","):
            results[impl] = {"error": "not run"}
            continue
        cache = os.path.join(paths["root"], f"cache-{impl}-shuffle")
        results[impl] = peer_envs.run_runner(
            "shuffle_quality.py", ["--impl", impl, "--parquet", paths["parquet"], "--cache-dir", cache,
                                   "--rows", str(args.rows), "--combos", json.dumps(COMBOS)],
            peer, args.timeout)
    ps, cs = results["petastorm"], results["petastream-compat"]
    print(f"'tabular', {args.rows:,} rows; Petastorm wrote {ps.get('extra', {}).get('row_groups', '?')} row groups "
          f"in {ps.get('extra', {}).get('parquet_files', '?')} files")
    print("| shuffling_queue_capacity | shuffle_row_groups | Petastorm | compat |")
    print("|---:|---|---:|---:|")
    for capacity, by_group in COMBOS:
        key = f"{capacity},{by_group}"
        cells = [str(r.get("scores", {}).get(key, r.get("errors", {}).get(key, r.get("error", "?"))))
                 for r in (ps, cs)]
        print(f"| {capacity:,} | {by_group} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
