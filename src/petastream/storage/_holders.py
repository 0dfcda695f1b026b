"""Which processes pin shard-cache entries (Linux ``/proc``; nothing elsewhere).

A pin is a shared ``flock`` on an entry that lives as long as a mapping of it (see
:mod:`petastream.storage.cache`); the kernel drops it when the last process holding the mapping
goes, so a pin never outlives its holders and there is nothing to reclaim from a dead one. What
a full cache can do is name them: a ``CacheFullError`` that says "pid 4242 (alive)" points at
the leftover worker of a killed job.

Two sources: ``/proc/locks`` gives the pid that took each lock, which may be dead while a
process that inherited the mapping (a forked child) keeps the lock; ``/proc/<pid>/maps`` gives
the processes that map the entry now.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable

from petastream.parent_death import pid_alive

__all__ = ["pin_holders", "describe_holders"]


def _file_ids(paths: Iterable[str]) -> tuple[set[tuple[int, int, int]], set[str]]:
    ids, names = set(), set()
    for path in paths:
        with contextlib.suppress(OSError):
            st = os.stat(path)
            ids.add((os.major(st.st_dev), os.minor(st.st_dev), st.st_ino))
            names.add(os.path.realpath(path))
    return ids, names


def _lock_takers(ids: set[tuple[int, int, int]]) -> set[int]:
    """Pids that took a ``flock`` on one of the files (``/proc/locks``)."""
    pids: set[int] = set()
    try:
        with open("/proc/locks") as f:
            lines = f.readlines()
    except OSError:
        return pids
    for line in lines:
        fields = line.split()
        if len(fields) < 6 or fields[1] == "->":  # "->": a waiter, not a holder
            continue
        with contextlib.suppress(ValueError):
            major, minor, inode = fields[5].split(":")
            pid = int(fields[4])
            if pid > 0 and (int(major, 16), int(minor, 16), int(inode)) in ids:
                pids.add(pid)
    return pids


def _mappers(ids: set[tuple[int, int, int]], names: set[str]) -> set[int]:
    """Pids that map one of the files now (``/proc/<pid>/maps``; only processes we may read)."""
    pids: set[int] = set()
    try:
        entries = [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return pids
    for pid in entries:
        try:
            with open(f"/proc/{pid}/maps") as f:
                for line in f:
                    fields = line.split(maxsplit=5)
                    if len(fields) < 6:
                        continue
                    major, minor = fields[3].split(":")
                    if ((int(major, 16), int(minor, 16), int(fields[4])) in ids
                            or fields[5].strip() in names):
                        pids.add(pid)
                        break
        except (OSError, ValueError):
            continue
    return pids


def pin_holders(paths: Iterable[str]) -> dict[int, bool]:
    """``{pid: alive}`` of the processes holding pins on ``paths``; empty without ``/proc``."""
    ids, names = _file_ids(paths)
    if not ids or not os.path.isdir("/proc"):
        return {}
    pids = _lock_takers(ids) | _mappers(ids, names)
    return {pid: pid_alive(pid) for pid in sorted(pids)}


def describe_holders(holders: dict[int, bool], me: int | None = None) -> str:
    """``"pid 12 (alive), pid 34 (dead: ...)"`` (``me``: this process's pid, named as such),
    or why there are none to name."""
    if not holders:
        return "processes this one cannot see (another user or container, or no /proc)"
    return ", ".join(f"pid {pid} (this process)" if pid == me else f"pid {pid} (alive)" if alive
                     else f"pid {pid} (dead: a process it forked still maps the shard)"
                     for pid, alive in holders.items())
