"""Epochs measured in interleaved rounds: the method of ``petastream bench`` and ``benchmarks/``.

On a shared machine whose speed drifts (the in-memory floor alone swings 2x between epochs on a
2-core box, docs/benchmarks.md "epoch swing"), a "best of 3" per row, each timed at its own
moment, cannot be compared with another row's. So the floor and every variant run one epoch
each per round, in turn; a variant's ratio is its rows/s over the floor's *in the same round*,
and it is reported as the median over the rounds with the min-max of those ratios. A slow moment
that hits a whole round cancels in the ratio. Each epoch's CPU time (this process and every
process under it, :mod:`petastream._cpu_clock`) is kept beside its wall time.

Standard library only: the benchmark harness wraps these results in its own rows.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from petastream._cpu_clock import cpu_between, snapshot

__all__ = ["EpochFn", "Epoch", "Timed", "measured", "interleaved", "failure_note"]

EpochFn = Callable[[], tuple[int, float]]  # one epoch: (rows delivered, wall seconds)


@dataclass(frozen=True)
class Epoch:
    rows: int
    wall: float
    cpu: float


@dataclass
class Timed:
    """One row measured in rounds: the floor's or a variant's."""

    variant: str
    rows: int
    seconds: float | None = None  # the median timed epoch; None: none was timed (see note)
    note: str = ""  # why it was not timed (raised, or the framework is missing)
    times: list[float] = field(default_factory=list)  # wall s of each complete timed epoch
    cpu: list[float] = field(default_factory=list)  # CPU s of the same epochs (all processes)
    ratios: list[float] = field(default_factory=list)  # rows/s over its round's floor's, per round
    incomplete: list[int] = field(default_factory=list)  # rows of the epochs short of ``rows``

    @property
    def rows_per_s(self) -> float | None:
        return self.rows / self.seconds if self.seconds else None

    @property
    def ratio(self) -> float | None:
        """The median of the per-round ratios (None: not timed)."""
        return statistics.median(self.ratios) if self.ratios else None

    @property
    def spread(self) -> tuple[float, float] | None:
        """(min, max) of the per-round ratios."""
        return (min(self.ratios), max(self.ratios)) if self.ratios else None

    @property
    def cpu_ns_per_row(self) -> float | None:
        """The median epoch CPU time (all processes) per row, in ns."""
        return statistics.median(self.cpu) / self.rows * 1e9 if self.cpu and self.rows else None


def measured(epoch: EpochFn) -> Epoch:
    """One call of ``epoch``: its rows and wall seconds, and the CPU seconds of this process and
    every process under it meanwhile (read outside the wall time the epoch reports)."""
    before = snapshot()
    rows, wall = epoch()
    return Epoch(rows, wall, cpu_between(before, snapshot()))


def failure_note(e: Exception) -> str:
    """A row's note when its epoch raised: 'unavailable: ...' for a missing module, else 'failed: ...'."""
    if isinstance(e, ImportError):
        return f"unavailable: {e}"
    return f"failed: {type(e).__name__}: {e}"[:300]


def interleaved(n: int, floor: tuple[str, EpochFn], variants: Mapping[str, EpochFn], rounds: int = 5,
                describe: Callable[[Exception], str] = failure_note) -> list[Timed]:
    """The floor and every variant, one epoch each per round, in turn: one warm-up round, then
    ``rounds`` timed ones (round r: floor, A, B, ...). Results: the floor's, then each variant's.

    Each ``EpochFn`` keeps its loader between calls (built by the first), so a variant's epochs
    are those of one loader, as a training loop runs them. An epoch short of ``n`` rows is
    recorded in ``incomplete``, never timed; a variant that raises gets ``describe(error)`` as its
    note and is left out of later rounds. The floor raising stops the measurement (its error
    propagates): without it no ratio means anything.
    """
    floor_name, floor_fn = floor
    live = dict(variants)
    out = {name: Timed(name, n) for name in (floor_name, *variants)}
    for r in range(rounds + 1):  # round 0: the warm-up (builds loaders, fills the page cache)
        base = measured(floor_fn)
        if r:
            _add(out[floor_name], base, base, n)
        for name, fn in list(live.items()):
            try:
                got = measured(fn)
            except Exception as e:  # noqa: BLE001 - a benchmark reports, it does not stop
                out[name] = Timed(name, n, note=describe(e))
                del live[name]
                continue
            if r:
                _add(out[name], got, base, n)
    for res in out.values():
        if res.times:
            res.seconds = statistics.median(res.times)
    return list(out.values())


def _add(res: Timed, got: Epoch, base: Epoch, n: int) -> None:
    if got.rows != n:
        res.incomplete.append(got.rows)
        return
    res.times.append(got.wall)
    res.cpu.append(got.cpu)
    res.ratios.append(base.wall / got.wall)
