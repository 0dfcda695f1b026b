"""Run benchmarks: ``python -m benchmarks.run [mds_decode ...] [--rows N]``."""

from __future__ import annotations

import argparse
import importlib

from benchmarks.harness import report, save

BENCHMARKS = {
    "mds_decode": ("benchmarks.mds_decode", "floor: np.frombuffer in memory"),
    "materialize": ("benchmarks.materialize", "spark df.write.parquet (snappy)"),
    "torch_epoch": ("benchmarks.torch_epoch", "floor: numpy perm+gather+from_numpy"),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("names", nargs="*", default=list(BENCHMARKS), help=f"any of {list(BENCHMARKS)}")
    p.add_argument("--rows", type=int, default=1_000_000)
    args = p.parse_args()
    for name in args.names:
        module, floor = BENCHMARKS[name]
        results = importlib.import_module(module).run(args)
        print(report(results, floor))
        print(f"saved {save(name, results)}\n")


if __name__ == "__main__":
    main()
