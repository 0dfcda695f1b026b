"""Tiny benchmark harness: timing, results table, JSON output.

Numbers are measured, never asserted: a benchmark prints rows/s side by side with the
in-memory floor and the peers of the same run, and writes them to bench-results/*.json.

The epoch benchmarks measure in interleaved rounds (:func:`interleaved`, the method of
``petastream bench``, which holds it: :mod:`petastream._rounds`): on a shared machine whose speed
drifts (the in-memory floor itself swings 2x between epochs here, docs/benchmarks.md "epoch
swing"), a row is compared with the floor of its own round, and reported as the median over
the rounds with the spread of that ratio. Per-round values go to the JSON.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from petastream.bench import EpochFn
from petastream.bench import interleaved as rounds_interleaved


@dataclass
class Result:
    benchmark: str
    variant: str
    rows: int
    seconds: float | None  # None: unavailable; with rounds: the median of ``times``
    bytes: int = 0
    note: str = ""
    extra: dict = field(default_factory=dict)
    times: list[float] = field(default_factory=list)  # wall s of each timed (complete) epoch
    cpu: list[float] = field(default_factory=list)  # CPU s of the same epochs (all processes)
    ratios: list[float] = field(default_factory=list)  # rows/s over the floor's, per round

    @property
    def rows_per_s(self) -> float | None:
        return self.rows / self.seconds if self.seconds else None

    @property
    def mb_per_s(self) -> float | None:
        return self.bytes / self.seconds / 1e6 if self.seconds and self.bytes else None

    @property
    def ratio(self) -> float | None:
        """Median over the rounds of this row's rows/s over its round's floor (None: not in rounds)."""
        return statistics.median(self.ratios) if self.ratios else None

    @property
    def cpu_ns_per_row(self) -> float | None:
        return statistics.median(self.cpu) / self.rows * 1e9 if self.cpu and self.rows else None


def wall_of(epoch: EpochFn) -> Callable[[], float]:
    """``epoch`` as a function of its wall seconds alone (the floor that brackets a peer)."""
    return lambda: epoch()[1]


def interleaved(bench: str, n: int, floor: tuple[str, EpochFn], variants: dict[str, EpochFn],
                rounds: int = 5) -> list[Result]:
    """:func:`petastream.bench.interleaved` (one warm-up round, then ``rounds`` of the floor and
    every variant in turn; ratios to the floor of the same round), as this harness's rows: the
    floor's, then each variant's. An epoch short of ``n`` rows is reported, never timed; a
    variant that raises is reported ('unavailable: ...' / 'failed: ...') and left out of later rounds.
    """
    out = []
    for t in rounds_interleaved(n, floor, variants, rounds):
        how = [f"INCOMPLETE epochs (rows {t.incomplete}, expected {n})"] if t.incomplete else []
        if t.times:
            how.append(f"median of {len(t.times)} interleaved rounds")
        if t.variant == floor[0] and t.times:
            how.append(f"epochs {min(t.times):.3f}-{max(t.times):.3f} s")
        out.append(Result(bench, t.variant, n, t.seconds, note=t.note or "; ".join(how),
                          times=t.times, cpu=t.cpu, ratios=t.ratios))
    return out


def peer_result(bench: str, n: int, variant: str, res: dict, note: str) -> Result:
    """A peer's row from its runner's JSON (``benchmarks.peer_envs``): ``--repeat`` epochs in one
    subprocess, which cannot interleave with the floor epoch by epoch; its ratios are against the
    mean of the floor timed just before and just after the subprocess (``res["floors"]``)."""
    times = [float(t) for t in res.get("times") or []] if "error" not in res else []
    extra = res.get("extra") or {}
    if not times:
        return Result(bench, variant, n, None, note=note, extra=extra)
    floors = res.get("floors") or []
    ratios = [sum(floors) / len(floors) / t for t in times] if floors else []
    how = f"median of {len(times)} epochs in one subprocess"
    if floors:
        how += f", vs the floor timed before/after it ({'/'.join(f'{f:.3f}' for f in floors)} s)"
        extra = {**extra, "floors_s": floors}
    return Result(bench, variant, n, statistics.median(times), note="; ".join(x for x in (how, note) if x),
                  extra=extra, times=times, cpu=[float(c) for c in res.get("cpu") or []], ratios=ratios)


def best_of(fn: Callable[[], object], repeat: int = 3) -> float:
    """Best wall time of ``repeat`` runs (after the first, which warms caches)."""
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def report(results: list[Result], floor_variant: str | None = None) -> str:
    """A table; each row's ratio is to the floor row of the same benchmark: the median of its
    per-round ratios and their (min-max) when measured in rounds, else the ratio of rows/s.
    CPU ns/row: the median epoch's CPU time (all processes) per row, beside the wall rate."""
    floors = {r.benchmark: r for r in results if r.variant == floor_variant}
    w = max([36, *(len(r.variant) for r in results)])
    lines = [f"{'benchmark':<22} {'variant':<{w}} {'rows/s':>14} {'MB/s':>9} {'x floor':>7} "
             f"{'(min-max)':>11} {'CPU ns/row':>10}  note"]
    for r in results:
        floor = floors.get(r.benchmark)
        rps = f"{r.rows_per_s:,.0f}" if r.rows_per_s else "unavailable"
        mbs = f"{r.mb_per_s:,.0f}" if r.mb_per_s else ""
        ratio, spread = "", ""
        if r.ratios:
            ratio = f"{r.ratio:.2f}"
            spread = f"({min(r.ratios):.2f}-{max(r.ratios):.2f})"
        elif floor and floor.rows_per_s and r.rows_per_s:
            ratio = f"{r.rows_per_s / floor.rows_per_s:.2f}"
        cpu = f"{r.cpu_ns_per_row:,.0f}" if r.cpu_ns_per_row else ""
        lines.append(f"{r.benchmark:<22} {r.variant:<{w}} {rps:>14} {mbs:>9} {ratio:>7} {spread:>11} "
                     f"{cpu:>10}  {r.note}")
    return "\n".join(lines)


def save(name: str, results: list[Result], meta: dict | None = None) -> str:
    os.makedirs("bench-results", exist_ok=True)
    path = os.path.join("bench-results", f"{name}.json")
    meta = {"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **(meta or {})}
    with open(path, "w") as f:
        json.dump({"meta": meta, "results": [
            {**asdict(r), "rows_per_s": r.rows_per_s, "mb_per_s": r.mb_per_s, "ratio": r.ratio,
             "cpu_ns_per_row": r.cpu_ns_per_row} for r in results
        ]}, f, indent=2)
    return path
