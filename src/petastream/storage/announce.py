"""What each process sharing a shard cache needs soon, where the other processes see it.

Eviction must spare the shards any reader of the node is about to read, not only its own
process's (ranks of a job, or a train and an eval job, that drift apart would otherwise evict
each other's read-ahead and download shards again and again). Each process that reads
through a cache directory publishes its needed-soon keys there::

    <root>/v1/readers/<pid>-<nonce>.lock    held (exclusive flock) for the process's lifetime
    <root>/v1/readers/<pid>-<nonce>.keys    its needed-soon keys, soonest first, one a line
    <root>/v1/readers/<pid>-<nonce>.pos     where its loaders are in their orders (pacing)

Liveness is the ``flock``, as for pins: it dies with its process, so a killed reader's keys
stop counting at once (the next reader that looks removes both files), and a reused pid cannot
revive them (the nonce differs). The ``.keys`` file is rewritten in place under an exclusive
``flock`` of its own, which readers take shared (about 20 us; writing aside and renaming costs
10 to 100 times that on ext4, which flushes a file renamed over another), and only when the set
of keys changes: a loader announces per chunk, and its set changes about once per shuffle
window. At most :data:`MAX_KEYS` keys are published.

Positions (:mod:`petastream.pipeline.pacing`): a loader whose readers pace each other
publishes, per order it reads (``plan``, a key its peers compute alike), the shuffle window it
is in, with the time of its last heartbeat; one line a plan, rewritten when a position changes
(about once per window) and every few seconds while it reads.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import threading
import time
import uuid
import weakref
from collections.abc import Iterable
from typing import NamedTuple

__all__ = ["Announcements", "MAX_KEYS", "Position"]

MAX_KEYS = 512  # keys published per process, soonest first (a few KB)
_KEYS, _LOCK, _POS = ".keys", ".lock", ".pos"


class Position(NamedTuple):
    """Another live process's position in an order: ``window`` (counted from epoch 0) as of
    ``seen`` (its last ``time.time()`` heartbeat), ``pid`` its process."""

    pid: int
    window: int
    seen: float
_LIVE: weakref.WeakSet[Announcements] = weakref.WeakSet()


class Announcements:
    """This process's announcement in ``directory``, and reading the other processes' ones."""

    def __init__(self, directory: str):
        self.directory = directory
        self._reset()
        _LIVE.add(self)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._name = f"{self._pid}-{uuid.uuid4().hex[:12]}"
        self._fd: int | None = None  # the held .lock file
        self._keys_fd: int | None = None
        self._published: frozenset[str] = frozenset()
        self._positions: dict[str, tuple[int, float]] = {}

    # -- this process -------------------------------------------------------------------------
    def publish(self, keys: Iterable[str]) -> bool:
        """Announce ``keys`` (soonest first) unless that set is already announced; True when
        the file was rewritten."""
        wanted = list(dict.fromkeys(keys))[:MAX_KEYS]
        with self._lock:
            if frozenset(wanted) == self._published:
                return False
            if self._keys_fd is None:
                if not wanted:
                    return False
                self._keys_fd = self._open(_KEYS)
            _rewrite(self._keys_fd, "".join(f"{k}\n" for k in wanted))
            self._published = frozenset(wanted)
            return True

    def publish_position(self, plan: str, window: int, *, beat: bool = False) -> None:
        """Say that this process's loader of order ``plan`` is in ``window`` (no write if it
        already said so, unless ``beat``: the same window, at a fresh time)."""
        with self._lock:
            if self._positions.get(plan, (None, 0.0))[0] == window and not beat:
                return
            self._positions[plan] = (window, time.time())
            self._write_positions()

    def withdraw_position(self, plan: str) -> None:
        """This process reads order ``plan`` no more (for now): nobody waits for it."""
        with self._lock:
            if self._positions.pop(plan, None) is not None:
                self._write_positions()

    def _write_positions(self) -> None:
        fd = self._open(_POS)
        _rewrite(fd, "".join(f"{plan} {w} {t!r}\n" for plan, (w, t) in self._positions.items()))
        os.close(fd)

    def _open(self, ext: str) -> int:
        """This process's file ``ext``, created (after the liveness lock) if need be."""
        if self._fd is None:
            os.makedirs(self.directory, exist_ok=True)
            fd = os.open(self._path(_LOCK), os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)  # first: no other file shows without it
            self._fd = fd
        return os.open(self._path(ext), os.O_RDWR | os.O_CREAT, 0o644)

    def withdraw(self) -> None:
        """Remove this process's announcement (at exit; a killed process's is ignored anyway)."""
        with self._lock:
            if self._fd is None or self._pid != os.getpid():
                return
            for ext in (_KEYS, _POS, _LOCK):
                _remove(self._path(ext))
            for fd in (self._keys_fd, self._fd):
                if fd is not None:
                    os.close(fd)
            self._fd = self._keys_fd = None
            self._published = frozenset()
            self._positions = {}
            self._name = f"{self._pid}-{uuid.uuid4().hex[:12]}"  # never reuse a withdrawn name

    def after_fork_in_child(self) -> None:
        # The child's copy of the lock descriptor would keep the parent's announcement alive
        # after the parent dies; closing it leaves the parent's lock as it is (flock locks
        # belong to the open file, which the parent still holds). The child announces anew.
        for fd in (self._keys_fd, self._fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._reset()

    # -- the others ---------------------------------------------------------------------------
    def others(self) -> list[list[str]]:
        """The keys every other live process announced, each list soonest first. Dead
        processes' files are removed on the way."""
        return [text.split() for _, text in self._read_others(_KEYS)]

    def positions(self, plan: str) -> list[Position]:
        """Where every other live process's loader of order ``plan`` is."""
        out = []
        for owner, text in self._read_others(_POS):
            for line in text.splitlines():
                theirs, window, seen = line.split()
                if theirs == plan:
                    out.append(Position(int(owner.split("-", 1)[0]), int(window), float(seen)))
        return out

    def _read_others(self, ext: str) -> list[tuple[str, str]]:
        """``(owner, contents)`` of every other live process's ``ext`` file."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        out = []
        for name in names:
            owner = name[: -len(ext)]
            if not name.endswith(ext) or owner == self._name or not self._alive(owner):
                continue
            try:
                fd = os.open(os.path.join(self.directory, name), os.O_RDONLY)
            except FileNotFoundError:  # withdrawn meanwhile
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)  # not while its owner rewrites it
                out.append((owner, _read_all(fd).decode()))
            finally:
                os.close(fd)
        return out

    def _alive(self, owner: str) -> bool:
        keys, pos, lock = (os.path.join(self.directory, owner + ext) for ext in (_KEYS, _POS, _LOCK))
        try:
            fd = os.open(lock, os.O_RDONLY)
        except FileNotFoundError:  # withdrawn, or found dead by another reader meanwhile
            _remove(keys)
            _remove(pos)
            return False
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            # Free: its owner is gone (a live one holds it from before its first .keys file,
            # and a name is never used again once withdrawn).
            _remove(keys)
            _remove(pos)
            _remove(lock)
            return False
        finally:
            os.close(fd)

    def _path(self, ext: str) -> str:
        return os.path.join(self.directory, self._name + ext)


def _rewrite(fd: int, text: str) -> None:
    """Replace the file's contents in place, under its exclusive ``flock`` (readers take it
    shared): never seen half-written."""
    data = text.encode()
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def _read_all(fd: int) -> bytes:
    parts = []
    while chunk := os.read(fd, 1 << 16):
        parts.append(chunk)
    return b"".join(parts)


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


def _withdraw_all() -> None:
    for a in list(_LIVE):
        with contextlib.suppress(OSError):
            a.withdraw()


def _after_fork_in_child() -> None:
    for a in list(_LIVE):
        a.after_fork_in_child()


atexit.register(_withdraw_all)
os.register_at_fork(after_in_child=_after_fork_in_child)
