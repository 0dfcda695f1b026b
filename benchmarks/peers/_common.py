"""Shared by the peer runners. They run under a peer env's python: nothing here imports petastream.

A runner prints exactly one JSON line on stdout (its last line), read by ``benchmarks.peer_envs``:
``{"rows": N, "seconds": best, "times": [...], "cpu": [...], "incomplete": [...], "note": ..., "extra": {...}}``
(``times``: wall s of each complete timed epoch; ``cpu``: CPU s of the same epochs, this process
and every process under it, :mod:`_clock`)
or, when it could not time a complete epoch, ``{"error": "<status>: <Type>: <message>"}``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable

from _clock import cpu_between, snapshot

BATCH = 1024


def emit(**fields: object) -> None:
    sys.stdout.flush()
    print(json.dumps(fields), flush=True)


def describe(exc: BaseException) -> str:
    """``TypeError: first line of the message`` (trimmed)."""
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first[:300]}"


def timed_epochs(epoch: Callable[[], int], expected: int, repeat: int, warmup: int = 1) -> dict:
    """Time ``repeat`` complete epochs after ``warmup`` untimed ones; ``epoch()`` returns its rows.

    An incomplete epoch (fewer or more rows than ``expected``: Petastorm's thread pool sometimes
    yields an empty one with no error) is recorded and retried once; the best complete time is
    the result.
    """
    times: list[float] = []
    cpu: list[float] = []
    incomplete: list[int] = []
    for _ in range(warmup):
        rows = epoch()
        if rows != expected:
            incomplete.append(rows)
    for _ in range(repeat):
        for _attempt in range(2):
            before = snapshot()
            t = time.perf_counter()
            rows = epoch()
            dt = time.perf_counter() - t
            if rows == expected:
                times.append(dt)
                cpu.append(round(cpu_between(before, snapshot()), 4))
                break
            incomplete.append(rows)
    out: dict = {"rows": expected, "times": [round(x, 4) for x in times], "cpu": cpu, "incomplete": incomplete,
                 "epochs": warmup + len(times) + len(incomplete)}
    if times:
        out["seconds"] = min(times)
    else:
        out["error"] = f"failed: incomplete epochs (rows seen {incomplete}, expected {expected})"
    return out
