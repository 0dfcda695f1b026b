"""Tiny benchmark harness: timing, results table, JSON output.

Numbers are measured, never asserted: a benchmark prints rows/s side by side with the
in-memory floor and the peers of the same run, and writes them to bench-results/*.json.

The epoch benchmarks measure in interleaved rounds (:func:`interleaved`): on a shared machine
whose speed drifts (the in-memory floor itself swings 2x between epochs here, docs/benchmarks.md
"epoch swing"), a row is compared with the floor of its own round, and reported as the median
over the rounds with the spread of that ratio. Per-round values go to the JSON.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from benchmarks.peers._clock import cpu_between, snapshot

EpochFn = Callable[[], tuple[int, float]]  # one epoch: (rows delivered, wall seconds)


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


@dataclass(frozen=True)
class Epoch:
    rows: int
    wall: float
    cpu: float


def measured(epoch: EpochFn) -> Epoch:
    """One call of ``epoch``: its rows and wall seconds, and the CPU seconds of this process and
    every process under it meanwhile (:mod:`benchmarks.peers._clock`; read outside the wall time)."""
    before = snapshot()
    rows, wall = epoch()
    return Epoch(rows, wall, cpu_between(before, snapshot()))


def wall_of(epoch: EpochFn) -> Callable[[], float]:
    """``epoch`` as a function of its wall seconds alone (the floor that brackets a peer)."""
    return lambda: epoch()[1]


def _failed(bench: str, variant: str, n: int, e: Exception) -> Result:
    if isinstance(e, ImportError):
        return Result(bench, variant, n, None, note=f"unavailable: {e}")
    return Result(bench, variant, n, None, note=f"failed: {type(e).__name__}: {e}"[:300])


def interleaved(bench: str, n: int, floor: tuple[str, EpochFn], variants: dict[str, EpochFn],
                rounds: int = 5) -> list[Result]:
    """The floor and every variant, one epoch each per round, in turn: one warm-up round, then
    ``rounds`` timed ones (round r: floor, A, B, ...). Results: the floor's, then each variant's.

    Each ``EpochFn`` keeps its loader between calls (built by the first), so a variant's epochs
    are those of one loader, as a training loop runs them. A row's ``ratios`` are its rows/s
    over the floor's in the same round; ``seconds`` is the median epoch. An epoch short of ``n``
    rows is reported, never timed; a variant that raises is reported and left out of later rounds.
    """
    floor_name, floor_fn = floor
    live = dict(variants)
    out = {name: Result(bench, name, n, None) for name in (floor_name, *variants)}
    short: dict[str, list[int]] = {name: [] for name in out}
    for r in range(rounds + 1):  # round 0: the warm-up (builds loaders, fills the page cache)
        base = measured(floor_fn)
        if r:
            out[floor_name].times.append(base.wall)
            out[floor_name].cpu.append(base.cpu)
            out[floor_name].ratios.append(1.0)
        for name, fn in list(live.items()):
            try:
                got = measured(fn)
            except Exception as e:  # noqa: BLE001 - a benchmark reports, it does not stop
                out[name] = _failed(bench, name, n, e)
                del live[name]
                continue
            if not r:
                continue
            if got.rows != n:
                short[name].append(got.rows)
                continue
            res = out[name]
            res.times.append(got.wall)
            res.cpu.append(got.cpu)
            res.ratios.append(base.wall / got.wall)
    for name, res in out.items():
        if res.times:
            res.seconds = statistics.median(res.times)
            res.note = f"median of {len(res.times)} interleaved rounds"
        if short[name]:
            res.note = f"INCOMPLETE epochs (rows {short[name]}, expected {n}); {res.note}".rstrip("; ")
    floor_res = out[floor_name]
    if floor_res.times:
        floor_res.note += f"; epochs {min(floor_res.times):.3f}-{max(floor_res.times):.3f} s"
    return list(out.values())


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
