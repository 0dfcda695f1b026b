"""A dataset's open shards: an LRU of mapped shards, one load per shard at a time, and
read-ahead on a bounded thread pool.

The loader tells the dataset which shards its coming chunks need, in plan order
(:meth:`OpenShards.prefetch`); up to ``workers`` of them load at once (fetch, verify,
decompress: zstd, hashing and socket reads release the GIL) and at most ``depth`` loaded
shards wait unread, so the decoder finds its next shard mapped. A read (:meth:`OpenShards.get`)
of a shard being loaded waits for that load instead of starting another; a read of a shard
nobody asked for loads it in the reading thread.

"Needed soon" (what eviction must keep, in this process and, announced, in the others on the
cache) is the window: the shards loading and those of the latest request, whether loaded yet
or not (a shuffled window's chunks read its shards again and again). A shard read-ahead loaded
but no reader took within :data:`_STALE_REQUESTS` later requests (the plan moved on) stops
counting against the read-ahead budget. A read-ahead load that finds the cache full gives
up (the reader will load it synchronously) and pauses read-ahead until the next read.
Each load runs in a thread of its own (at most ``workers`` at once), so no idle pool outlives
the reading; a load with nothing to fetch or check (a local file already verified) is done in
the asking thread.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any

from petastream.errors import StateError

__all__ = ["OpenShards"]

log = logging.getLogger("petastream.storage")

_STALE_REQUESTS = 16
_LIVE: weakref.WeakSet[OpenShards] = weakref.WeakSet()


class _Slot:
    __slots__ = ("data", "unread", "asked", "nbytes", "cached")

    def __init__(self, data: Any, unread: bool, asked: int, nbytes: int, cached: bool):
        self.data, self.unread, self.asked, self.nbytes, self.cached = data, unread, asked, nbytes, cached


class OpenShards:
    """``load(i, wait)`` maps shard ``i`` (None: no cache room and ``wait`` False);
    ``cost(i)`` is ``(bytes, whether they sit in the shard cache)``; ``inline(i)``: loading is
    cheap enough to do in the asking thread (a local file with nothing left to check).

    Bounds: ``max_open`` mapped shards; mapped cache bytes of read shards at most
    ``cached_budget`` and of unread (read-ahead) shards at most ``ahead_budget`` (None:
    unbounded), so that read-ahead never pins more of a limited cache than its share.
    """

    def __init__(self, load: Callable[[int, bool], Any | None], cost: Callable[[int], tuple[int, bool]],
                 inline: Callable[[int], bool], *, max_open: int = 64, depth: int = 8, workers: int = 8,
                 cached_budget: int | None = None, ahead_budget: int | None = None):
        # Weak: the dataset owns this object, and a cycle would keep its shards mapped (and so
        # pinned in the cache) until a garbage collection instead of until it is dropped.
        self._load_ref = _weak(load)
        self._cost_ref = _weak(cost)
        self._inline_ref = _weak(inline)
        self.max_open, self.depth, self.workers = max(1, max_open), max(0, depth), max(1, workers)
        self.cached_budget, self.ahead_budget = cached_budget, ahead_budget
        self._open: OrderedDict[int, _Slot] = OrderedDict()
        self._pending: deque[int] = deque()
        self._max_pending = 4 * self.depth + 64
        self._requested: list[int] = []  # the latest request, deduplicated
        self._reset()
        _LIVE.add(self)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._loading: dict[int, Future] = {}
        self._inflight: dict[int, int] = {}  # read-ahead loads running: shard -> bytes
        self._generation = 0
        self._paused = False

    # -- reads -------------------------------------------------------------------------------
    def get(self, i: int) -> Any:
        while True:
            with self._lock:
                slot = self._open.get(i)
                if slot is not None:
                    slot.unread = False
                    self._open.move_to_end(i)
                    self._paused = False
                    self._trim()
                    self._pump()
                    return slot.data
                if i in self._pending:
                    self._pending.remove(i)
                flight = self._loading.get(i)
                leader = flight is None
                if leader:
                    flight = self._loading[i] = Future()
            assert flight is not None
            if not leader:
                flight.result()  # a failed read-ahead gives None: then this thread loads it
                continue
            try:
                data = self._call(self._load_ref, i, True)
            except BaseException as e:
                with self._lock:
                    del self._loading[i]
                flight.set_exception(e)
                raise
            with self._lock:
                del self._loading[i]
                self._insert(i, data, unread=False)
                self._paused = False
                self._pump()
            flight.set_result(data)
            return data

    # -- read-ahead --------------------------------------------------------------------------
    def prefetch(self, shards: Iterable[int]) -> None:
        """Schedule loads of ``shards`` (plan order); shards open, loading or queued are skipped."""
        if self.depth == 0:
            return
        with self._lock:
            self._generation += 1
            self._requested = list(dict.fromkeys(shards))
            queued = set(self._pending)
            for s in self._requested:
                slot = self._open.get(s)
                if slot is not None:
                    slot.asked = self._generation
                    continue
                if s in self._loading or s in queued:
                    continue
                if len(self._pending) >= self._max_pending:
                    break
                self._pending.append(s)
                queued.add(s)
            for slot in self._open.values():  # the plan moved past these: no longer needed soon
                if slot.unread and slot.asked < self._generation - _STALE_REQUESTS:
                    slot.unread = False
            self._trim()
            self._pump()

    def is_open(self, i: int) -> bool:
        """Whether shard ``i`` is mapped now (a read of it will not wait)."""
        with self._lock:
            return i in self._open

    def needed_soon(self) -> list[int]:
        """Shards loading or in the latest request, soonest first."""
        with self._lock:
            return list(dict.fromkeys([*self._loading, *self._requested]))

    def release(self) -> None:
        """Unmap every shard this dataset keeps open (the cache is full: let eviction have them).
        Arrays a caller still holds keep their own shard mapped."""
        with self._lock:
            self._open.clear()

    def close(self) -> None:
        """Forget the queued read-ahead (loads already running finish on their own)."""
        with self._lock:
            self._pending.clear()
            self._requested = []

    @staticmethod
    def _call(ref: Callable[[], Callable[..., Any] | None], *args: Any) -> Any:
        fn = ref()
        if fn is None:
            raise StateError("the dataset these shards belong to is gone")
        return fn(*args)

    def _pump(self) -> None:
        """Start read-ahead loads while the window has room (lock held)."""
        unread = [s for s in self._open.values() if s.unread]
        ahead = sum(s.nbytes for s in unread if s.cached) + sum(self._inflight.values())
        while self._pending and not self._paused and len(self._inflight) < self.workers:
            if len(unread) + len(self._inflight) >= self.depth:
                return
            i = self._pending[0]
            nbytes, cached = self._call(self._cost_ref, i)
            busy = unread or self._inflight
            if cached and self.ahead_budget is not None and busy and ahead + nbytes > self.ahead_budget:
                return
            self._pending.popleft()
            if i in self._open or i in self._loading:
                continue
            if self._call(self._inline_ref, i):  # mapping a checked local file: microseconds
                data = self._try_load(i)
                if data is not None:
                    self._insert(i, data, unread=True)
                    unread.append(self._open[i])
                continue
            flight: Future = Future()
            self._loading[i] = flight
            self._inflight[i] = nbytes if cached else 0
            ahead += self._inflight[i]
            # A thread per load, at most `workers` at once: none lingers once the window is
            # loaded (daemon: a fill cut short at exit leaves only a temporary file).
            threading.Thread(target=self._read_ahead, args=(i, flight), daemon=True,
                             name=f"petastream-readahead-{i}").start()

    def _try_load(self, i: int) -> Any | None:
        try:
            return self._call(self._load_ref, i, False)
        except Exception as e:  # the reader will load it again and raise with the full story
            log.debug("read-ahead of shard %d failed: %r", i, e)
            return None

    def _read_ahead(self, i: int, flight: Future) -> None:
        data = None
        try:
            data = self._try_load(i)
        finally:
            with self._lock:
                self._loading.pop(i, None)
                self._inflight.pop(i, None)
                if data is not None:
                    self._insert(i, data, unread=True)
                else:
                    self._paused = True  # no room (or an error): wait for the reader
                self._pump()
            flight.set_result(data)

    def _insert(self, i: int, data: Any, unread: bool) -> None:
        nbytes, cached = self._call(self._cost_ref, i)
        self._open[i] = _Slot(data, unread, self._generation, nbytes, cached)
        self._open.move_to_end(i)
        self._trim(keep=i)

    def _trim(self, keep: int | None = None) -> None:
        """Drop least recently used read shards beyond the bounds (lock held)."""
        read = [i for i, s in self._open.items() if not s.unread and i != keep]
        cached = sum(self._open[i].nbytes for i in read if self._open[i].cached)
        for i in read:
            over_count = len(self._open) > self.max_open
            over_bytes = self.cached_budget is not None and cached > self.cached_budget
            if not (over_count or over_bytes):
                break
            slot = self._open.pop(i)
            if slot.cached:
                cached -= slot.nbytes


def _weak(fn: Callable[..., Any]) -> Callable[[], Callable[..., Any] | None]:
    if hasattr(fn, "__self__"):
        return weakref.WeakMethod(fn)
    return lambda: fn


def _after_fork_in_child() -> None:
    # The parent's pool threads and any lock they held do not exist in the child.
    for shards in list(_LIVE):
        shards._reset()


os.register_at_fork(after_in_child=_after_fork_in_child)
