"""Before/after of a change on the loader path: two source trees, interleaved, same data.

``python -m benchmarks.loader_ab --before /path/to/old/checkout --rows 300000 --rounds 3``

For each round and each tree (alternating, so machine load hits both alike), a fresh Python
process with that tree's ``src`` first on ``sys.path`` builds each loader fresh and reports:

* ``first batch``: seconds from importing petastream's adapter (torch and TensorFlow themselves
  and pyarrow are imported before) through building the loader to its first batch: what a
  fresh process pays (module imports moved between the trees, so they count);
* ``fresh epoch``: rows/s of that first epoch, building included;
* ``steady epoch``: rows/s of the best of the next two epochs of the same loader.

Loaders: torch ``loader`` with 2 threads, ``tf.dataset`` with its default workers (auto) and
with 2 threads, on the 'tabular' workload (:mod:`benchmarks.workloads`). Medians over rounds;
the ratio is after/before (> 1: faster).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks.workloads import prepare

ROOT = Path(__file__).resolve().parent.parent
BATCH = 1024
LOADERS = ("torch threads=2", "tf auto (default)", "tf threads=2")

_CHILD = r"""
import json, sys, time
import pyarrow  # the frameworks and pyarrow before timing: process-wide costs, not the loader's
url, which, BATCH = sys.argv[1], sys.argv[2], int(sys.argv[3])
if which.startswith("tf"):
    import os
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow
    t0 = time.perf_counter()  # petastream's own imports count: they moved between the trees
    import petastream.tf as ptf
    kind = "auto" if "auto" in which else "thread"
    ds = ptf.dataset(url, BATCH, shuffle=True, seed=1, num_epochs=1, num_workers=2, worker_type=kind)
    rows = lambda b: int(b["id"].shape[0])
else:
    import torch
    t0 = time.perf_counter()
    import petastream.torch as pt
    ds = pt.loader(url, BATCH, shuffle=True, seed=1, num_epochs=1, num_workers=2)
    rows = lambda b: len(b["id"])
it = iter(ds)
n = rows(next(it))
first = time.perf_counter() - t0
for b in it:
    n += rows(b)
fresh = n / (time.perf_counter() - t0)
steady = 0.0
for _ in range(2):
    t = time.perf_counter()
    m = sum(rows(b) for b in ds)
    steady = max(steady, m / (time.perf_counter() - t))
print(json.dumps({"first": first, "fresh": fresh, "steady": steady}))
"""


def measure(tree: Path, url: str, which: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    out = subprocess.run([sys.executable, "-c", _CHILD, url, which, str(BATCH)], env=env, capture_output=True,
                         text=True, timeout=900)
    if out.returncode:
        raise RuntimeError(f"{tree} {which}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", type=Path, required=True, help="checkout of the code before the change")
    p.add_argument("--after", type=Path, default=ROOT, help="checkout after (default: this one)")
    p.add_argument("--rows", type=int, default=300_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--loaders", nargs="*", choices=LOADERS, default=list(LOADERS))
    args = p.parse_args()
    url = prepare("tabular", args.rows)["mds"]
    got: dict[tuple[str, str], list[dict[str, float]]] = {}
    for r in range(args.rounds):
        for which in args.loaders:
            for name, tree in (("before", args.before), ("after", args.after))[:: 1 if r % 2 == 0 else -1]:
                got.setdefault((which, name), []).append(measure(tree, url, which))
    print(f"'tabular', {args.rows} rows, batches of {BATCH}, medians of {args.rounds} interleaved rounds")
    print("| loader | metric | before | after | after/before |\n|---|---|---:|---:|---:|")
    for which in args.loaders:
        for metric, unit in (("first", "s to first batch"), ("fresh", "rows/s, fresh loader's epoch"),
                             ("steady", "rows/s, later epochs")):
            b = statistics.median(x[metric] for x in got[(which, "before")])
            a = statistics.median(x[metric] for x in got[(which, "after")])
            ratio = b / a if metric == "first" else a / b
            fmt = (lambda v: f"{v:.2f}") if metric == "first" else (lambda v: f"{v / 1e6:.2f}M")
            print(f"| {which} | {unit} | {fmt(b)} | {fmt(a)} | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
