"""Shard cache entries in use ("pins"), file by file.

A mapped entry is "being read": its mapping holds a shared ``flock`` on the file (the ``mmap``
keeps a duplicate of the descriptor, so the lock lives exactly as long as the mapping,
including numpy views of it that outlive the reader's LRU). Eviction takes an exclusive
non-blocking lock and skips a file it cannot lock, so a mapped file is never deleted and
never keeps disk space unaccounted for.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import time
from typing import Any

__all__ = ["open_pinned", "map_pinned", "evict", "is_pinned"]


def open_pinned(path: str) -> Any | None:
    """Map a complete cache entry read-only, pinned for as long as the mapping lives; None if
    the entry is absent (or was evicted while we opened it)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        # Blocks only while an evictor holds its exclusive lock, i.e. across one unlink.
        fcntl.flock(fd, fcntl.LOCK_SH)
        st = os.fstat(fd)
        if st.st_nlink == 0:  # evicted between our open and our lock
            return None
        with contextlib.suppress(OSError):
            # atime: when last opened (least recently opened goes first); mtime stays when it
            # was filled (oldest filled goes first while other readers share the cache).
            os.utime(fd, ns=(time.time_ns(), st.st_mtime_ns))
        return map_pinned(fd, st.st_size)
    finally:
        os.close(fd)


def map_pinned(fd: int, size: int) -> Any:
    # mmap keeps its own duplicate of fd, so the flock on it lives as long as the mapping.
    return mmap.mmap(fd, 0, access=mmap.ACCESS_READ) if size else b""


def evict(path: str) -> bool:
    """Delete a complete entry unless it is mapped somewhere on the node."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    finally:
        os.close(fd)
    return True


def is_pinned(path: str) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
