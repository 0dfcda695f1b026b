"""Mixture throughput vs one dataset of the same bytes (issue 28: ≥ 0.9×).

``python -m benchmarks.mixture --rows 300000 --rounds 3``

The 'tabular' rows (:mod:`benchmarks.workloads`) are written once as one MDS dataset and once
split into two halves. Per round, alternating (so machine load hits both alike), one shuffled
epoch of ``BatchLoader`` (numpy batches of 1024, 2 decode threads), and of
``petastream.torch.loader`` (the same, as tensors: what training reads), over: ``single``, the one
dataset; ``mixture``, ``[Stream(half_a), Stream(half_b)]`` (the same rows as whole copies);
``choose``, ``[Stream(half_a, choose=n/2 - 1), Stream(half_b)]`` (a partial selection drawn
every epoch: the costlier path, a draw and a gather through it). Best epoch of each round; median over rounds;
the ratios are mixture / single.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import numpy as np

from benchmarks.workloads import make_data
from petastream import Stream
from petastream.mds.writer import write_mds
from petastream.pipeline import BatchLoader


def _epoch(dataset, epochs: int = 2, kind: str = "numpy") -> float:
    if kind == "torch":
        from petastream.torch import loader as torch_loader

        loader = torch_loader(dataset, 1024, shuffle=True, seed=1, num_workers=2)
    else:
        loader = BatchLoader(dataset, 1024, shuffle=True, seed=1, num_workers=2, num_epochs=1)
    best = 0.0
    for _ in range(epochs):
        t, rows = time.perf_counter(), 0
        for batch in loader:
            rows += len(next(iter(batch.values())))
        best = max(best, rows / (time.perf_counter() - t))
    loader.close()
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    n = args.rows
    data = make_data("tabular", n)
    with tempfile.TemporaryDirectory() as root:
        write_mds(data, f"{root}/all")
        write_mds({k: v[: n // 2] for k, v in data.items()}, f"{root}/a")
        write_mds({k: v[n // 2 :] for k, v in data.items()}, f"{root}/b")
        runs = {
            "single": lambda: f"{root}/all",
            "mixture": lambda: [Stream(f"{root}/a"), Stream(f"{root}/b")],
            "choose": lambda: [Stream(f"{root}/a", choose=n // 2 - 1), Stream(f"{root}/b", repeat=1.0)],
        }
        rates: dict[tuple[str, str], list[float]] = {(k, name): [] for k in ("numpy", "torch") for name in runs}
        for _ in range(args.rounds):
            for kind, name in rates:
                rates[kind, name].append(_epoch(runs[name](), kind=kind))
    med = {k: statistics.median(v) for k, v in rates.items()}
    for (kind, name), rate in med.items():
        print(f"{kind:6s} {name:8s} {rate:12,.0f} rows/s   ratio {rate / med[kind, 'single']:.2f}")
    assert np.isfinite(list(med.values())).all()


if __name__ == "__main__":
    main()
