"""The node-local shard cache: one fill per shard per node, atomic, bounded in size.

Every reader of a remote, compressed or FUSE-mounted shard goes through a :class:`ShardCache`
rooted at a local directory (``cache_dir``, else ``$PETASTREAM_CACHE_DIR``, else
``~/.cache/petastream/shards``). Entries are raw (uncompressed) shard files named by a key
that identifies their bytes (see :mod:`petastream.mds.sources`), so a repaired or rewritten
source never hits an old copy. Layout::

    <root>/v1/data/<key>                     a complete, verified raw shard
    <root>/v1/data/<key>.tmp-<pid>-<rand>    a fill in progress (or one a killed process left)
    <root>/v1/locks/<abc>.lock               fill locks, one per stripe of keys (never removed)
    <root>/v1/evict.lock                     serializes space accounting and eviction
    <root>/v1/readers/<pid>-<nonce>.*        what each live reader needs soon (see mds.announce)

Single flight. Threads of a process wait on one in-process future per key; processes sharing
the directory (DataLoader workers, ranks of a node) take the key's stripe lock, a ``flock``
through :mod:`filelock`, and look again before filling. :meth:`ShardCache.get_made` fills an
entry made from other data (a parsed index, :mod:`petastream.mds.index_open`) the same way:
the one process that makes it holds the lock while it does, the others wait and map it. A ``flock`` dies with its process, so
nothing a crashed run leaves behind blocks the next one.

Atomic fills. A fill writes ``<key>.tmp-*`` and renames it to ``<key>`` only once the bytes
are verified: a file under a final name is always complete (a ``kill -9`` leaves only a
temporary file, which never reads as an entry and is removed by the next eviction once its
stripe lock is free). No ``fsync``: a power loss may leave a renamed file with lost pages;
sizes are checked on every open, contents when filled.

Pins (:mod:`petastream.storage.pins`). A mapped entry is "being read": eviction never deletes it.

Bounded size. Before a fill, under ``evict.lock``, the cache counts its files (temporary ones
at their full size: a fill truncates its file to the final size at once, which makes it a
reservation other processes see) and evicts unpinned entries, least recently opened first,
skipping the keys a reader of any live process on the cache needs soon (its read-ahead window,
announced by :meth:`ShardCache.announce`), until the new shard fits ``limit``. Without a
limit the cache keeps 5% of the disk (at least 1 GiB) free.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from filelock import FileLock, Timeout

from petastream.errors import CacheFullError, CorruptShardError, StorageError
from petastream.storage._holders import describe_holders, pin_holders
from petastream.storage.announce import Announcements
from petastream.storage.counters import IO
from petastream.storage.pins import evict, is_pinned, map_pinned, open_pinned
from petastream.storage.sizes import human

__all__ = ["ShardCache", "CacheUsage", "default_cache_root", "open_pinned"]

_LAYOUT = "v1"
_TMP = ".tmp-"
_STRIPES = 3  # hex digits of the key hash naming its fill lock: at most 4096 lock files
_FREE_FRACTION = 0.05  # without a limit, leave this much of the disk free ...
_FREE_MIN = 1 << 30  # ... and at least this many bytes


def default_cache_root() -> str:
    return os.environ.get("PETASTREAM_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "petastream", "shards"
    )


@dataclass
class _File:
    key: str
    path: str
    size: int
    mtime: float  # filled
    atime: float = 0.0  # last opened


@dataclass
class CacheUsage:
    """What a cache directory holds: complete entries and temporary files (in progress or left
    by a killed process), with their bytes."""

    root: str
    entries: int = 0
    bytes: int = 0
    temporary: int = 0
    temporary_bytes: int = 0
    pinned: int = 0
    pinned_bytes: int = 0
    files: list[_File] = field(default_factory=list, repr=False)
    pinned_paths: list[str] = field(default_factory=list, repr=False)  # with count_pinned

    @property
    def total_bytes(self) -> int:
        return self.bytes + self.temporary_bytes


class ShardCache:
    """One cache directory, shared by every dataset of the process that uses it (see :meth:`at`)."""

    #: Seconds a fill waits for another process's fill of the same stripe.
    lock_timeout = 1800.0
    #: Seconds a reader waits for other readers to unpin space when the cache is full.
    full_timeout = 300.0

    _instances: dict[str, ShardCache] = {}
    _instances_lock = threading.Lock()

    def __init__(self, root: str):
        self.root = os.path.abspath(os.path.expanduser(root))
        self.data_dir = os.path.join(self.root, _LAYOUT, "data")
        self.lock_dir = os.path.join(self.root, _LAYOUT, "locks")
        self._evict_lock_path = os.path.join(self.root, _LAYOUT, "evict.lock")
        self._protectors: list[weakref.WeakMethod] = []
        self._announcements = Announcements(os.path.join(self.root, _LAYOUT, "readers"))
        self._dirs_ready = False
        self._reset()

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._flights: dict[str, Future] = {}

    @classmethod
    def at(cls, root: str | None = None) -> ShardCache:
        """The process's :class:`ShardCache` for ``root`` (default: :func:`default_cache_root`)."""
        root = os.path.abspath(os.path.expanduser(root or default_cache_root()))
        with cls._instances_lock:
            cache = cls._instances.get(root)
            if cache is None:
                cache = cls._instances[root] = cls(root)
            return cache

    def __repr__(self) -> str:
        return f"ShardCache({self.root!r})"

    # -- entries -----------------------------------------------------------------------------
    def path(self, key: str) -> str:
        return os.path.join(self.data_dir, key)

    def open(self, key: str) -> Any | None:
        """The pinned mapping of entry ``key``, or None if it is not cached."""
        return open_pinned(self.path(key))

    def protect(self, keys_needed_soon: Callable[[], Iterable[str]]) -> None:
        """Register a bound method returning the keys a reader needs next, soonest first (its
        read-ahead window): eviction takes them last, the furthest-needed first."""
        with self._lock:
            self._protectors = [p for p in self._protectors if p() is not None]
            self._protectors.append(weakref.WeakMethod(keys_needed_soon))

    @property
    def peers(self) -> Announcements:
        """What the processes on this cache tell each other: needed-soon keys, positions."""
        return self._announcements

    def announce(self) -> None:
        """Tell the other processes on this cache what this one's readers need soon (call it
        when that may have changed: a new read-ahead request, a closed reader). Writes a file
        only when the set of keys changed."""
        soon = self._own_protected()
        self._announcements.publish(sorted(soon, key=soon.__getitem__))

    def get(self, key: str, size: int, fill: Callable[[BinaryIO], None], *,
            limit: int | None = None, wait: bool = True,
            on_pressure: Callable[[], None] | None = None) -> Any | None:
        """The pinned mapping of entry ``key``, filled by ``fill(file)`` (which writes the
        entry's ``size`` bytes and raises unless they are verified) by exactly one thread of
        one process of the node if it is absent.

        ``wait=False`` (read-ahead): give up and return None when the cache has no room now.
        ``on_pressure()``: called once when the cache is full, to unpin what the caller can.
        """
        return self._get(key, lambda: (size, fill), limit, wait, on_pressure)

    def get_made(self, key: str, make: Callable[[], Any], *, limit: int | None = None,
                 wait: bool = True) -> Any | None:
        """The pinned mapping of entry ``key`` whose bytes ``make()`` returns (any bytes-like
        object), made by exactly one thread of one process of the node while the others wait
        for it: an entry derived from other data (a parsed index), whose size is known only
        once it is made. ``make`` runs under the key's fill lock, before space is reserved."""
        def prepare() -> tuple[int, Callable[[BinaryIO], None]]:
            data = memoryview(make()).cast("B")

            def fill(f: BinaryIO) -> None:
                f.write(data)

            return data.nbytes, fill

        return self._get(key, prepare, limit, wait, None)

    def _get(self, key: str, prepare: Callable[[], tuple[int, Callable[[BinaryIO], None]]],
             limit: int | None, wait: bool, on_pressure: Callable[[], None] | None) -> Any | None:
        buf = self.open(key)
        filled = False  # by this call (a miss); found, or filled meanwhile by another reader: a hit
        while buf is None:
            with self._lock:
                flight = self._flights.get(key)
                leader = flight is None
                if leader:
                    flight = self._flights[key] = Future()
            assert flight is not None
            if not leader:
                flight.result()  # the leader's error is ours too (a corrupt source stays corrupt)
                buf = self.open(key)
                if buf is None and not wait:
                    return None
                continue  # filled and evicted again already, or the leader had no room: lead
            try:
                buf, filled = self._fill(key, prepare, limit, wait, on_pressure)
                flight.set_result(None)
            except BaseException as e:
                flight.set_exception(e)
                raise
            finally:
                with self._lock:
                    self._flights.pop(key, None)
            if buf is None:
                return None
        IO.add("cache_misses" if filled else "cache_hits")
        return buf

    def _fill(self, key: str, prepare: Callable[[], tuple[int, Callable[[BinaryIO], None]]],
              limit: int | None, wait: bool, on_pressure: Callable[[], None] | None) -> tuple[Any | None, bool]:
        """The entry's mapping (None: no room, ``wait`` False), and whether this call filled it."""
        self._makedirs()
        stripe = FileLock(self._stripe(key), timeout=self.lock_timeout)
        try:
            stripe.acquire()
        except Timeout:
            raise StorageError(
                f"waited {self.lock_timeout:.0f}s for another process filling {self.path(key)} "
                f"(lock {stripe.lock_file}); is a process of an earlier run stuck?"
            ) from None
        try:
            buf = self.open(key)  # another process filled it while we waited
            if buf is not None:
                return buf, False
            size, fill = prepare()
            reserved = self._reserve(key, size, limit, wait, on_pressure)
            if reserved is None:
                return None, False
            fd, tmp = reserved
            try:
                with open(fd, "wb", buffering=1 << 20, closefd=False) as f:
                    fill(f)
                    f.flush()
                    written = f.tell()
                if written != size:
                    raise CorruptShardError(f"cache entry {key}: {written} bytes written, expected {size}")
                # Under the accounting lock: a directory scan racing a rename may see the file
                # twice or not at all, and a scan that misses it could let the cache overflow.
                with FileLock(self._evict_lock_path, timeout=self.lock_timeout):
                    os.replace(tmp, self.path(key))
                return map_pinned(fd, size), True
            except BaseException:
                with contextlib.suppress(OSError):
                    os.remove(tmp)
                raise
            finally:
                os.close(fd)
        finally:
            stripe.release()

    # -- space -------------------------------------------------------------------------------
    def _reserve(self, key: str, size: int, limit: int | None, wait: bool,
                 on_pressure: Callable[[], None] | None) -> tuple[int, str] | None:
        """Make room and create the entry's temporary file at its full size (so every process
        counts it); None when there is no room and ``wait`` is False."""
        if limit is not None and size > limit:
            raise CacheFullError(
                f"a shard of {human(size)} cannot fit cache_limit={human(limit)} ({self.root}); "
                "raise cache_limit above the largest shard (a few shards' worth at least)"
            )
        deadline = time.monotonic() + self.full_timeout
        delay, pressured = 0.01, False
        while True:
            with FileLock(self._evict_lock_path, timeout=self.lock_timeout):
                room = self._make_room(size, limit)
                if room:
                    tmp = f"{self.path(key)}{_TMP}{os.getpid()}-{uuid.uuid4().hex[:8]}"
                    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
                    try:
                        fcntl.flock(fd, fcntl.LOCK_SH)
                        os.ftruncate(fd, size)  # the reservation other processes count
                    except BaseException:
                        os.close(fd)
                        os.remove(tmp)
                        raise
                    return fd, tmp
            if not wait:
                return None
            if on_pressure is not None:  # again each time: read-ahead may have pinned more
                on_pressure()
                if not pressured:
                    pressured = True
                    continue
            if time.monotonic() > deadline:
                raise self._full_error(size, limit)
            time.sleep(delay)
            delay = min(delay * 2, 0.5)

    def _full_error(self, size: int, limit: int | None) -> CacheFullError:
        usage = self.usage(count_pinned=True)
        holders = pin_holders(usage.pinned_paths)
        me = os.getpid()
        hint = ("; or end the other processes holding them (workers a killed job left behind?)"
                if any(pid != me for pid in holders) else "")
        pinned = f" (pinned by {describe_holders(holders, me)})" if usage.pinned else ""
        return CacheFullError(
            f"cache {self.root} is full: {human(usage.total_bytes)} of cache_limit="
            f"{human(limit or 0)} held, {human(usage.pinned_bytes)} of it by {usage.pinned} shards "
            f"being read{pinned}, and no room for a shard of {human(size)} after "
            f"{self.full_timeout:.0f}s; raise cache_limit, or read with fewer processes or less "
            f"read-ahead{hint}"
        )

    def _make_room(self, need: int, limit: int | None) -> bool:
        usage = self.usage()
        used = usage.total_bytes
        budget = limit if limit is not None else self._disk_budget(used)
        if used + need <= budget:
            return True
        for f in usage.files:  # temporary files whose fill lock is free: left by a dead process
            if _TMP in f.key and self._stale(f):
                used -= f.size
        # Needed soon by no live reader first, then the needed-soon ones, the one needed last
        # first (a window larger than the cache must still make room). Of the first, alone:
        # least recently opened first; with other readers on the cache, oldest filled first:
        # they read at their own paces, and what the reader ahead filled first, the ones behind
        # it pass first too (least recently opened would evict what they need next and keep
        # what all of them just passed).
        others = self._announcements.others()
        soon = self._protected(others)
        entries = [f for f in usage.files if _TMP not in f.key]
        entries.sort(key=lambda f: (1, -soon[f.key]) if f.key in soon else (0, f.mtime if others else f.atime))
        for f in entries:
            if used + need <= budget:
                break
            if evict(f.path):
                used -= f.size
        return used + need <= budget

    def _disk_budget(self, used: int) -> int:
        disk = shutil.disk_usage(self.data_dir)
        return used + disk.free - max(_FREE_MIN, int(disk.total * _FREE_FRACTION))

    def _stale(self, f: _File) -> bool:
        key = f.key.split(_TMP, 1)[0]
        try:
            with FileLock(self._stripe(key), blocking=False):
                os.remove(f.path)
                return True
        except (Timeout, FileNotFoundError):
            return False

    def _protected(self, others: list[list[str]]) -> dict[str, int]:
        """Key -> how soon a reader of this process or of another live one on the cache
        (``others``: their announcements) needs it (0: next)."""
        soon = self._own_protected()
        for keys in others:
            for rank, key in enumerate(keys):
                soon[key] = min(rank, soon.get(key, rank))
        return soon

    def _own_protected(self) -> dict[str, int]:
        soon: dict[str, int] = {}
        with self._lock:
            protectors = list(self._protectors)
        for ref in protectors:
            fn = ref()
            if fn is not None:
                for rank, key in enumerate(fn()):
                    soon[key] = min(rank, soon.get(key, rank))
        return soon

    # -- inspection and pruning (the ``petastream cache`` command) ---------------------------
    def usage(self, *, count_pinned: bool = False) -> CacheUsage:
        usage = CacheUsage(self.root)
        try:
            scan = list(os.scandir(self.data_dir))
        except FileNotFoundError:
            return usage
        for de in scan:
            try:
                st = de.stat()
            except FileNotFoundError:
                continue
            f = _File(de.name, de.path, st.st_size, st.st_mtime, st.st_atime)
            usage.files.append(f)
            if _TMP in de.name:
                usage.temporary += 1
                usage.temporary_bytes += f.size
            else:
                usage.entries += 1
                usage.bytes += f.size
                if count_pinned and is_pinned(f.path):
                    usage.pinned += 1
                    usage.pinned_bytes += f.size
                    usage.pinned_paths.append(f.path)
        return usage

    def prune(self, to_bytes: int | None = None) -> tuple[int, int]:
        """Remove temporary files left by dead processes and, given ``to_bytes``, evict
        unpinned entries, least recently opened first, until at most ``to_bytes`` remain (0:
        all). Returns ``(files removed, bytes freed)``."""
        if not os.path.isdir(self.data_dir):
            return 0, 0
        removed = freed = 0
        with FileLock(self._evict_lock_path, timeout=self.lock_timeout):
            usage = self.usage()
            used = usage.total_bytes
            for f in usage.files:
                if _TMP in f.key and self._stale(f):
                    removed, freed, used = removed + 1, freed + f.size, used - f.size
            for f in sorted((f for f in usage.files if _TMP not in f.key), key=lambda f: f.atime):
                if to_bytes is None or used <= to_bytes:
                    break
                if evict(f.path):
                    removed, freed, used = removed + 1, freed + f.size, used - f.size
        return removed, freed

    def remove(self, keys: Iterable[str]) -> tuple[int, int]:
        """Delete the given entries (their dataset is being deleted), mapped or not: a reader
        that still maps one keeps reading it intact, and its space is freed when unmapped.
        Returns ``(removed, of which still mapped)``."""
        removed = mapped = 0
        with FileLock(self._evict_lock_path, timeout=self.lock_timeout):
            for key in set(keys):
                path = self.path(key)
                if not os.path.exists(path):
                    continue
                mapped += is_pinned(path)
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)
                    removed += 1
        return removed, mapped

    # -- helpers -----------------------------------------------------------------------------
    def _stripe(self, key: str) -> str:
        digest = hashlib.blake2s(key.encode(), digest_size=4).hexdigest()[:_STRIPES]
        return os.path.join(self.lock_dir, f"{digest}.lock")

    def _makedirs(self) -> None:
        """Before this process's first fill: the directories, and the temporary files killed
        processes left (their space would otherwise count until the cache runs full)."""
        if self._dirs_ready:
            return
        os.makedirs(self.data_dir, exist_ok=True)
        os.makedirs(self.lock_dir, exist_ok=True)
        with FileLock(self._evict_lock_path, timeout=self.lock_timeout):
            for f in self.usage().files:
                if _TMP in f.key:
                    self._stale(f)
        self._dirs_ready = True


def _after_fork_in_child() -> None:
    # A thread of the parent may have held these locks at fork time; the child starts afresh.
    ShardCache._instances_lock = threading.Lock()
    for cache in ShardCache._instances.values():
        cache._reset()


os.register_at_fork(after_in_child=_after_fork_in_child)
