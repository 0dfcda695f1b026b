"""Where pinning pays: device delivery by batch size, pinned vs pageable vs the size-based default.

    python -m benchmarks.gpu_pinning --rows 1000000 --device cuda      # on a GPU machine
    python -m benchmarks.gpu_pinning --rows 20000 --device cpu         # dry run, same code paths

For each workload and batch size, one loader per variant (built once, iterated once per epoch,
as a training loop does), epochs interleaved round-robin so that the machine's drift hits every
variant alike; each row is the median of ``--repeat`` epochs with its spread (min-max):

* CPU-side: ``torch.loader`` with no device (the rate a device loader is compared with);
* pinned: ``pin_memory=True`` (every batch packed in one pinned block, one copy);
* pageable: ``pin_memory=False`` (tensors in pageable memory, a copy per tensor);
* default: ``pin_memory=None``, pinned from ``PIN_MIN_BYTES`` of numeric columns up.

``batch bytes`` is the numeric bytes of one batch (what a pinned block holds), the quantity the
default decides on. No training step runs: this isolates the delivery (benchmarks/gpu.py has the
overlap with a step).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from benchmarks.harness import Result, report, save
from benchmarks.workloads import make_data, prepare

NAME = "gpu_pinning"
VARIANTS = {"CPU-side (no device)": "cpu", "pinned": True, "pageable": False, "default (by size)": None}


def _epoch(ld, device: str) -> tuple[int, float]:
    import torch

    t = time.perf_counter()
    rows = 0
    for b in ld:
        rows += len(b["features"])
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return rows, time.perf_counter() - t


def sweep(args: argparse.Namespace) -> tuple[list[Result], list[dict]]:
    from petastream.torch import loader
    from petastream.torch._packing import numeric_nbytes

    results, rows_out = [], []
    for workload in args.workloads:
        data = make_data(workload, args.rows)
        url = prepare(workload, args.rows, data)["mds"]
        for batch in args.batches:
            nbytes = numeric_nbytes({k: v[:batch] for k, v in data.items()})
            loaders = {}
            for name, pin in VARIANTS.items():
                on_device = pin != "cpu"
                loaders[name] = loader(url, batch, shuffle=True, seed=1, num_workers=args.workers,
                                       device=args.device if on_device and args.device != "cpu" else None,
                                       pin_memory=pin if on_device else None)
                _epoch(loaders[name], args.device)  # warm-up
            times: dict[str, list[float]] = {name: [] for name in loaders}
            counts: dict[str, int] = {}
            for _ in range(args.repeat):
                for name, ld in loaders.items():
                    counts[name], dt = _epoch(ld, args.device)
                    times[name].append(dt)
            cpu_med = statistics.median(times["CPU-side (no device)"])
            bench = f"{NAME}/{workload}/batch-{batch}"
            for name, ts in times.items():
                med = statistics.median(ts)
                spread = f"{args.rows / max(ts) / 1e6:.2f}-{args.rows / min(ts) / 1e6:.2f}M"
                note = f"{nbytes / 1024:.0f} KiB/batch, {cpu_med / med:.2f}x CPU-side, spread {spread}"
                if counts[name] != args.rows:
                    note += f" INCOMPLETE ({counts[name]} of {args.rows})"
                results.append(Result(bench, name, args.rows, med, note=note,
                                      extra={"times": ts, "batch_bytes": nbytes, "vs_cpu_side": cpu_med / med}))
                rows_out.append({"workload": workload, "batch": batch, "batch_bytes": nbytes, "variant": name,
                                 "median_rows_per_s": args.rows / med, "min": args.rows / max(ts),
                                 "max": args.rows / min(ts), "vs_cpu_side": cpu_med / med})
                print(f"{workload:8s} {batch:6d} {nbytes / 1024:8.0f} KiB  {name:22s} "
                      f"{args.rows / med / 1e6:7.2f}M rows/s  {cpu_med / med:5.2f}x  [{spread}]", flush=True)
    return results, rows_out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--device", default="cuda")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batches", type=lambda s: [int(b) for b in s.split(",")],
                   default=[256, 1024, 2048, 4096, 8192, 16384, 65536])
    p.add_argument("--workloads", type=lambda s: s.split(","), default=["tabular", "binary"])
    p.add_argument("--repeat", type=int, default=5, help="epochs per variant (median and spread)")
    p.add_argument("--json", default=None, help="also write the rows as JSON here")
    args = p.parse_args()
    meta = {"device": "cpu (dry run)", "cpus": os.cpu_count()}
    if args.device.startswith("cuda"):
        import torch

        meta.update(device=torch.cuda.get_device_name(), torch=torch.__version__)
    print(f"device: {meta['device']}, {meta['cpus']} CPUs", flush=True)
    results, rows = sweep(args)
    print(report(results))
    print(f"saved {save(NAME, results, meta)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
