"""Tiny benchmark harness: timing, results table, JSON output.

Numbers are measured, never asserted: a benchmark prints rows/s side by side with the
in-memory floor and the peers of the same run, and writes them to bench-results/*.json.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field


@dataclass
class Result:
    benchmark: str
    variant: str
    rows: int
    seconds: float | None  # None: unavailable
    bytes: int = 0
    note: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def rows_per_s(self) -> float | None:
        return self.rows / self.seconds if self.seconds else None

    @property
    def mb_per_s(self) -> float | None:
        return self.bytes / self.seconds / 1e6 if self.seconds and self.bytes else None


def best_of(fn: Callable[[], object], repeat: int = 3) -> float:
    """Best wall time of ``repeat`` runs (after the first, which warms caches)."""
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def epoch_result(bench: str, variant: str, n: int, epoch: Callable[[], tuple[int, float]]) -> Result:
    """One warm-up epoch, then the best of 3 complete ones; ``epoch()`` returns (rows, seconds).

    An epoch that did not deliver exactly ``n`` rows is reported, never timed.
    """
    try:
        epoch()  # warm the page cache
        runs = [epoch() for _ in range(3)]
    except ImportError as e:
        return Result(bench, variant, n, None, note=f"unavailable: {e}")
    except Exception as e:  # noqa: BLE001 - a benchmark reports, it does not stop
        return Result(bench, variant, n, None, note=f"failed: {type(e).__name__}: {e}"[:300])
    bad = [r for r, _ in runs if r != n]
    good = [sec for r, sec in runs if r == n]
    note = f"INCOMPLETE epochs (rows {bad}, expected {n})" if bad else ""
    return Result(bench, variant, n, min(good) if good else None, note=note)


def report(results: list[Result], floor_variant: str | None = None) -> str:
    """A table; each row's ratio is to the floor row of the same benchmark."""
    floors = {r.benchmark: r for r in results if r.variant == floor_variant}
    w = max([36, *(len(r.variant) for r in results)])
    lines = [f"{'benchmark':<22} {'variant':<{w}} {'rows/s':>14} {'MB/s':>9} {'vs floor':>9}  note"]
    for r in results:
        floor = floors.get(r.benchmark)
        rps = f"{r.rows_per_s:,.0f}" if r.rows_per_s else "unavailable"
        mbs = f"{r.mb_per_s:,.0f}" if r.mb_per_s else ""
        ratio = ""
        if floor and floor.rows_per_s and r.rows_per_s:
            ratio = f"{r.rows_per_s / floor.rows_per_s:.1%}"
        lines.append(f"{r.benchmark:<22} {r.variant:<{w}} {rps:>14} {mbs:>9} {ratio:>9}  {r.note}")
    return "\n".join(lines)


def save(name: str, results: list[Result]) -> str:
    os.makedirs("bench-results", exist_ok=True)
    path = os.path.join("bench-results", f"{name}.json")
    meta = {"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    with open(path, "w") as f:
        json.dump({"meta": meta, "results": [
            {**asdict(r), "rows_per_s": r.rows_per_s, "mb_per_s": r.mb_per_s} for r in results
        ]}, f, indent=2)
    return path
