"""CPU seconds of this process and every process under it, for CPU time per row beside wall time.

Used by ``petastream bench`` (:mod:`petastream._rounds`), the benchmark harness
(``benchmarks.harness``) and the peer runners, which run under a peer env's python without
petastream and load this file by its path (``benchmarks/peers/_clock.py``): standard library
only, and nothing from petastream.

``time.process_time()`` counts this process's threads only; worker processes (TensorFlow's or
compat's process pools, Petastorm's ``reader_pool_type='process'``, DataLoader workers) are
counted by ``getrusage(RUSAGE_CHILDREN)`` only once they exit and are reaped, and workers that
outlive an epoch never are. So a snapshot also reads the live descendants' user+system time
from ``/proc`` (Linux; elsewhere they are left out), and a difference of two snapshots counts
each descendant once: its time while alive from ``/proc`` (with that of its own children that
ended), and a descendant that ended between the snapshots through ``RUSAGE_CHILDREN`` (or its
parent's children time) less what ``/proc`` had already shown of it.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass, field


@dataclass(frozen=True)
class CpuSnapshot:
    own: float  # this process, all its threads
    reaped: float  # children that exited and were waited for (getrusage)
    live: dict[int, float] = field(default_factory=dict)  # pid -> CPU s of each live descendant


def _live_descendants() -> dict[int, float]:
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
        tick = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, AttributeError):  # not Linux: live workers are left out
        return {}
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for name in entries:
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:  # exited meanwhile
            continue
        # fields after the parenthesized command: state ppid ... utime stime cutime cstime (14th-17th);
        # cutime/cstime: its own children that ended, so a grandchild ending moves its time there
        rest = stat[stat.rindex(")") + 2:].split()
        pid = int(name)
        parent[pid] = int(rest[1])
        cpu[pid] = sum(int(v) for v in rest[11:15]) / tick
    mine, todo = {}, [os.getpid()]
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    while todo:
        for child in children.get(todo.pop(), []):
            mine[child] = cpu[child]
            todo.append(child)
    return mine


def snapshot() -> CpuSnapshot:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return CpuSnapshot(time.process_time(), ru.ru_utime + ru.ru_stime, _live_descendants())


def cpu_between(a: CpuSnapshot, b: CpuSnapshot) -> float:
    """CPU seconds spent between two snapshots by this process and every process under it."""
    live = sum(sec - a.live.get(pid, 0.0) for pid, sec in b.live.items())
    ended = sum(sec for pid, sec in a.live.items() if pid not in b.live)  # in ``reaped`` whole
    return (b.own - a.own) + (b.reaped - a.reaped) - ended + live
