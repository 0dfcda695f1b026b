"""Worker processes that end with the process that started them.

A ``torch.utils.data.DataLoader`` worker notices a dead parent (its watchdog compares
``os.getppid()``) but then exits through Python's shutdown, which joins its queue's feeder
thread; that thread is blocked writing a batch into a full pipe nobody will read (the worker
itself holds the pipe's read end too, so the write never fails). A trainer killed with ``kill
-9`` thus left its ``spawn`` workers alive for good, each mapping (and pinning) the shards it
had read in the node's shard cache.

:func:`exit_with_parent` makes the calling process end, without Python's shutdown, once its
parent is gone: on Linux at once, by ``prctl(PR_SET_PDEATHSIG, SIGKILL)``, where that is safe;
everywhere by a daemon thread that polls the parent every ``interval`` seconds.
:class:`ExitWithParent` is the picklable ``worker_init_fn`` that does it in DataLoader workers.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import sys
import threading
from collections.abc import Callable

__all__ = ["ExitWithParent", "exit_with_parent", "pid_alive"]

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_EXIT_CODE = 128 + signal.SIGKILL  # what the parent-death signal would leave
_watching: int | None = None  # the pid this process watches (a forked child starts over)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    with contextlib.suppress(OSError, IndexError):
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    return True


def _set_pdeathsig() -> bool:
    """Linux: the kernel sends SIGKILL to this process when the thread that created it exits."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _gone(parent_pid: int, ppid: int) -> bool:
    # Reparenting (getppid changes) is definitive and immune to pid reuse; the explicit pid
    # covers a parent that is not ours (forkserver: the server forked us).
    return os.getppid() != ppid or (parent_pid != ppid and not pid_alive(parent_pid))


def _watch(parent_pid: int, ppid: int, interval: float) -> None:
    stop = threading.Event()
    while not stop.wait(interval):
        if _gone(parent_pid, ppid):
            os._exit(_EXIT_CODE)  # no shutdown: it would wait for threads blocked on the dead parent


def exit_with_parent(parent_pid: int | None = None, *, signal_safe: bool = False,
                     interval: float = 1.0) -> None:
    """End this process (``os._exit``, no cleanup) when ``parent_pid`` (default: the parent)
    exits. ``signal_safe``: the thread that started this process lives as long as its process
    (the main thread), so the parent-death signal, which follows that thread, may be used."""
    global _watching
    ppid = os.getppid()
    parent_pid = ppid if parent_pid is None else parent_pid
    if _watching == parent_pid:
        return
    if signal_safe and parent_pid == ppid:
        _set_pdeathsig()
    if _gone(parent_pid, ppid):  # died before we were watching
        os._exit(_EXIT_CODE)
    _watching = parent_pid
    threading.Thread(target=_watch, args=(parent_pid, ppid, interval), daemon=True,
                     name="petastream-parent-watch").start()


class ExitWithParent:
    """A DataLoader ``worker_init_fn``: the worker ends when the process that created this
    object does; then ``chained(worker_id)``, the user's own ``worker_init_fn``, if any."""

    def __init__(self, chained: Callable[[int], None] | None = None):
        self.parent_pid = os.getpid()
        # The workers start from the thread that creates the DataLoader iterator, normally
        # this one: the parent-death signal is safe only if that is the main thread.
        self.signal_safe = threading.current_thread() is threading.main_thread()
        self.chained = chained

    def __call__(self, worker_id: int) -> None:
        exit_with_parent(self.parent_pid, signal_safe=self.signal_safe)
        if self.chained is not None:
            self.chained(worker_id)


def _after_fork_in_child() -> None:
    global _watching
    _watching = None  # the watch thread did not survive the fork


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
