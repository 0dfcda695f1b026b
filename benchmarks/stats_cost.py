"""The per-batch cost of ``loader.stats()`` and ``on_error``, which are always on.

``python -m benchmarks.stats_cost --batches 200000 --rounds 5``

Times the layers themselves over ``--batches`` ready items (a list of one small batch), so
that nothing else (decode, queues) hides or adds to them; each variant's best of ``--rounds``,
the variants interleaved, in CPU nanoseconds per batch (the thread's CPU time: on a loaded
machine wall time mostly measures the wait for a core):

* consumer side: a bare iteration, vs. the same items through :class:`ReportRun` (innermost,
  takes worker reports off) and :class:`StatsRun` (outermost: counts, two clock reads);
* worker side: a bare loop, vs. the loop :class:`~petastream.pipeline.work.PassWork` runs per
  batch (two more clock reads, the guard's checks, :class:`WorkerMeter`'s check).

For the whole loader, ``benchmarks.loader_ab`` compares two trees end to end.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from petastream.pipeline.onerror import SkipLedger
from petastream.pipeline.stats import LoaderStats, ReportRun, StatsRun, WorkerMeter


class _Plan:
    epoch, batch_size, drop_last, world_size, start = 0, 1024, True, 1, 0

    def __init__(self, n: int):
        self.num_batches, self.num_samples = n, n * self.batch_size


class _Run:
    def __init__(self, items: list) -> None:
        self._it = iter(items)

    def __iter__(self) -> _Run:
        return self

    def __next__(self):  # type: ignore[no-untyped-def]
        return next(self._it)

    def close(self) -> None:
        pass


def consumer(n: int, stats: bool) -> float:
    items = [{"id": np.arange(4)}] * n
    run: object = _Run(items)
    if stats:
        st = LoaderStats(SkipLedger())
        reports = ReportRun(run, st)
        run = StatsRun(reports, st, _Plan(n), reports)
    t = time.thread_time()
    for _ in run:  # type: ignore[attr-defined]
        pass
    return time.thread_time() - t


class _Guard:  # a DecodeGuard with nothing left out (the usual case)
    keep = None
    bads: list = []


def worker(n: int, stats: bool) -> float:
    batch = {"id": np.arange(4)}
    meter = WorkerMeter(0, n)
    clock = time.perf_counter
    t = time.thread_time()
    if not stats:
        for _ in range(n):
            item = batch
        return time.thread_time() - t
    guard = _Guard()
    for _ in range(n):
        t0 = clock()
        t1 = clock()
        dropped, bads = 0, []
        if guard.keep is not None:
            dropped = 1
        if guard.bads:
            bads = guard.bads
        meter.decode_s += t1 - t0
        meter.transform_s += clock() - t1
        item = meter.item(batch, dropped, bads)
    del item
    return time.thread_time() - t


def best(fn: Callable[[int, bool], float], n: int, rounds: int) -> tuple[float, float]:
    bare, on = [], []
    for _ in range(rounds):
        bare.append(fn(n, False))
        on.append(fn(n, True))
    return min(bare) / n * 1e9, min(on) / n * 1e9


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches", type=int, default=200_000)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    for name, fn in (("consumer side", consumer), ("worker side", worker)):
        bare, on = best(fn, args.batches, args.rounds)
        print(f"{name}: bare {bare:,.0f} ns/batch, with stats {on:,.0f} ns/batch: +{on - bare:,.0f} ns/batch")


if __name__ == "__main__":
    main()
