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


class Floor:
    """The in-memory floor, timed again between the rows compared with it.

    On a shared machine whose speed drifts within a run, a floor timed once at the start can
    read slower than rows timed later (ratios above 100% that only mean the machine sped up).
    ``again()`` after each row; the floor reported is the best of all its timings, so every
    ratio is against the fastest the floor ran at any point of the run.
    """

    def __init__(self, seconds: Callable[[], float], repeat: int = 3):
        self._seconds = seconds
        self.times = [seconds() for _ in range(repeat)]

    def again(self) -> None:
        self.times.append(self._seconds())

    def result(self, bench: str, variant: str, n: int) -> Result:
        return Result(bench, variant, n, min(self.times),
                      note=f"best of {len(self.times)} timings, {len(self.times) - 3} between the rows")


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


def save(name: str, results: list[Result], meta: dict | None = None) -> str:
    os.makedirs("bench-results", exist_ok=True)
    path = os.path.join("bench-results", f"{name}.json")
    meta = {"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **(meta or {})}
    with open(path, "w") as f:
        json.dump({"meta": meta, "results": [
            {**asdict(r), "rows_per_s": r.rows_per_s, "mb_per_s": r.mb_per_s} for r in results
        ]}, f, indent=2)
    return path
