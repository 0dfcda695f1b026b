"""Why do epochs of one loader swing? (issue #36) The loader and the floor, epoch by epoch.

One process per allocator setting; in it, one ``petastream.torch.loader`` (built once, iterated
once per epoch as a training loop does) and the in-memory floor over the same rows
(:func:`petastream.bench.torch_floor`), alternated for ``--epochs`` epochs each. Per epoch:
wall seconds, CPU seconds of the process (all threads), and minor page faults (``getrusage``:
a count the machine's other load does not change). If the loader's epochs swing and the floor's
swing with them (the per-epoch ratio stays put), the swing is the machine; if the loader swings
alone and its page faults follow, it is the allocator handing memory back to the kernel and
faulting it in again (glibc's dynamic mmap/trim thresholds), which the fixed settings remove.

Allocator settings (glibc's environment tunables; each fixes what glibc otherwise adapts):

* ``default``: glibc's dynamic mmap threshold (starts at 128 KiB, rises as large blocks are
  freed) and trim threshold, the library's buffer pool on (its default:
  :mod:`petastream.columns.pool` reuses the loader's chunk buffers);
* ``no-pool``: ``default`` with the pool off (``PETASTREAM_BUFFER_POOL=0``): the allocator alone;
* ``fixed``: ``MALLOC_MMAP_THRESHOLD_=64 MiB`` and ``MALLOC_TRIM_THRESHOLD_=256 MiB`` (batch
  buffers come from the heap and stay mapped between epochs);
* ``arenas2``: ``MALLOC_ARENA_MAX=2`` (one arena per thread otherwise);
* ``mmap-only`` / ``trim-only``: one of ``fixed``'s two settings alone (setting either also
  turns glibc's adaptation of the other off).

The settings other than ``default`` leave the pool off, so that they measure the allocator.

``python -m benchmarks.epoch_swing [--workload tabular] [--rows 1000000] [--epochs 12]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

_OFF = {"PETASTREAM_BUFFER_POOL": "0"}
SETTINGS = {
    "default": {},
    "no-pool": _OFF,
    "fixed": {"MALLOC_MMAP_THRESHOLD_": str(64 << 20), "MALLOC_TRIM_THRESHOLD_": str(256 << 20), **_OFF},
    "arenas2": {"MALLOC_ARENA_MAX": "2", **_OFF},
    "mmap-only": {"MALLOC_MMAP_THRESHOLD_": str(64 << 20), **_OFF},
    "trim-only": {"MALLOC_TRIM_THRESHOLD_": str(256 << 20), **_OFF},
}


def _measured(fn):  # noqa: ANN001, ANN202 - a tiny local helper
    r0, c0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.process_time(), time.perf_counter()
    rows = fn()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    return {"rows": rows, "wall": time.perf_counter() - t0, "cpu": time.process_time() - c0,
            "minflt": r1.ru_minflt - r0.ru_minflt}


def child(url: str, epochs: int, workers: int) -> None:
    """Runs in the subprocess: prints one JSON line of per-epoch measurements."""
    from petastream.bench import read_floor_data, torch_floor
    from petastream.columns.pool import buffer_pool
    from petastream.torch import loader

    data = read_floor_data(url)
    ld = loader(url, 1024, shuffle=True, seed=1, num_workers=workers, rank=0, world_size=1)
    out: dict[str, list[dict]] = {"loader": [], "floor": []}
    for e in range(epochs):
        out["floor"].append(_measured(lambda e=e: torch_floor(data, 1024, seed=e)[0]))
        out["loader"].append(_measured(lambda: sum(len(b["id"]) for b in ld)))
    print(json.dumps({**out, "pool": vars(buffer_pool().stats())}), flush=True)


def _spread(xs: list[float], fmt: str = "{:.3f}") -> str:
    return f"{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}–{fmt.format(max(xs))})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workload", default="tabular", choices=["tabular", "binary"])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--settings", nargs="*", default=list(SETTINGS), choices=list(SETTINGS))
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child, args.epochs, args.workers)
        return
    from benchmarks.workloads import prepare

    url = prepare(args.workload, args.rows)["mds"]
    print(f"{args.workload}, {args.rows:,} rows, {args.workers} thread(s), {args.epochs} epochs each "
          f"(the first is the warm-up, left out); load average {os.getloadavg()[0]:.1f}")
    print(f"{'setting':<9} {'loader s':>22} {'floor s':>22} {'× floor':>22} "
          f"{'loader CPU s':>22} {'faults/epoch':>24}")
    for name in args.settings:
        env = dict(os.environ, **SETTINGS[name])
        proc = subprocess.run([sys.executable, "-m", "benchmarks.epoch_swing", "--child", url,
                               "--epochs", str(args.epochs), "--workers", str(args.workers)],
                              env=env, capture_output=True, text=True, check=True)
        got = json.loads(proc.stdout.strip().splitlines()[-1])
        ld, fl = got["loader"][1:], got["floor"][1:]
        ratio = [a["wall"] / b["wall"] for a, b in zip(fl, ld)]  # floor/loader: the × floor figure
        print(f"{name:<9} {_spread([x['wall'] for x in ld]):>22} {_spread([x['wall'] for x in fl]):>22} "
              f"{_spread(ratio, '{:.2f}'):>22} {_spread([x['cpu'] for x in ld]):>22} "
              f"{_spread([x['minflt'] for x in ld], '{:.0f}'):>24}")
        print("          per epoch, loader wall: " + " ".join(f"{x['wall']:.3f}" for x in ld))
        print("          per epoch, floor wall:  " + " ".join(f"{x['wall']:.3f}" for x in fl))
        pool = got["pool"]
        if pool["max_bytes"]:
            print(f"          buffer pool: {pool['held_bytes'] / 2**20:.0f} MiB in {pool['buffers']} buffers, "
                  f"{pool['reused']} reused, {pool['allocated']} allocated, {pool['dropped']} dropped, "
                  f"{pool['unpooled']} unpooled")


if __name__ == "__main__":
    main()
