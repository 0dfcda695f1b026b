"""Reusable large buffers for the column arrays a read returns (issue 36).

Every chunk of an epoch allocates a few arrays of about the chunk's bytes (packed rows, each
shard's gathered rows, one array per column) and frees them when its batches are dropped.
With glibc's adaptive mmap/trim thresholds those blocks go back to the kernel and are faulted
in again by the next chunk: 20-35 MB of fresh pages an epoch on 'tabular', and slower, jumpier
epochs (``benchmarks/epoch_swing.py``). :class:`BufferPool` keeps those buffers instead and
hands one out again once nothing outside the pool refers to it.

Why a reference count is enough to know a buffer is free: every array made from a pooled
buffer (the view :meth:`BufferPool.empty` returns, any slice, reshape or ``.view`` of it: numpy
collapses view chains onto the array that owns the memory) holds a reference to that owner,
and so do the objects that wrap numpy memory without a copy (``torch.from_numpy`` keeps the
array, TensorFlow's aliasing keeps it, ``memoryview``/Arrow buffers keep their exporter). So
while any batch, column or tensor of the user's still points into a buffer, its count is above
the pool's own references and it is not handed out; a copy (pickling to a worker process,
shared-memory slots, ``pin_memory``) holds nothing and needs nothing. The check and the hand-out
happen under one lock, and only the pool can make a new reference to a free buffer, so two
threads never get the same one. Where reference counts do not say this (a free-threaded
CPython build) the pool is off.

Bounded: the pool holds at most ``max_bytes`` (buffers lent out included); past that it drops
free buffers of other sizes, then falls back to a plain ``np.empty``. Sizes are rounded up to
one of four classes per power of two (at most 25% over), so chunks of nearby sizes share
buffers. ``PETASTREAM_BUFFER_POOL`` sets the bound in bytes for the process (``0``: off;
default 256 MiB); :func:`configure` sets it from code.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from petastream.errors import ConfigurationError, InvalidArgumentError, OutOfRangeError

__all__ = ["BufferPool", "PoolStats", "buffer_pool", "configure", "pooled_empty", "pooled_take",
           "DEFAULT_MAX_BYTES", "ENV_VAR"]

ENV_VAR = "PETASTREAM_BUFFER_POOL"
DEFAULT_MAX_BYTES = 256 << 20
MIN_BYTES = 1 << 16  # smaller arrays come from malloc's own free lists: nothing to gain
_ALIGN = 64  # TensorFlow aliases numpy memory without a copy only at 64-byte alignment


def _refcounts(bufs: list[np.ndarray]) -> list[int]:
    """Each buffer's reference count, as this one line of code sees it: the pool's list slot
    plus whatever the interpreter's loop and call add (3.11 counts the loop variable and the
    argument; an interpreter that borrows them counts less), plus every outside reference."""
    return [sys.getrefcount(raw) for raw in bufs]


# What _refcounts says of a buffer nothing but the pool's list holds, measured here rather than
# assumed, so that a buffer with even one outside reference never reads as free.
_FREE_REFS = _refcounts([np.empty(1, np.uint8)])[0]


@dataclass(frozen=True)
class PoolStats:
    """What the pool holds (``held_bytes``, in ``buffers``) and how it has served requests:
    ``reused`` a free buffer, ``allocated`` a new pooled one, ``unpooled`` fell back to
    ``np.empty`` (the bound reached), ``dropped`` free buffers let go to make room."""

    max_bytes: int
    held_bytes: int
    buffers: int
    reused: int
    allocated: int
    unpooled: int
    dropped: int


def size_class(nbytes: int) -> int:
    """``nbytes`` rounded up to the next of four steps per power of two (at most 25% more)."""
    if nbytes <= 4:
        return 4
    step = 1 << max(0, (nbytes - 1).bit_length() - 3)  # a quarter of the lower power of two
    return -(-nbytes // step) * step


class BufferPool:
    """Large numpy buffers, reused once nothing outside the pool refers to them (see the
    module doc). ``empty(shape, dtype)`` is ``np.empty`` below ``min_bytes``, for object dtypes
    or with ``max_bytes`` 0; otherwise a view of a pooled buffer."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES, min_bytes: int = MIN_BYTES):
        if max_bytes < 0 or min_bytes < 0:
            raise InvalidArgumentError(f"BufferPool(max_bytes={max_bytes}, min_bytes={min_bytes}): "
                                       "the bounds must be >= 0 (max_bytes=0 turns the pool off)")
        self.max_bytes, self.min_bytes = max_bytes, min_bytes
        self._lock = threading.Lock()
        self._bufs: dict[int, list[np.ndarray]] = {}  # size class -> raw uint8 buffers (owners)
        self._start: dict[int, int] = {}  # id(buffer) -> where its 64-byte aligned part starts
        self._held = 0
        self._reused = self._allocated = self._unpooled = self._dropped = 0

    def empty(self, shape: Sequence[int] | int, dtype: Any) -> np.ndarray:
        """An uninitialised C-contiguous array, from the pool where it is worth it."""
        dt = np.dtype(dtype)
        shp = (shape,) if isinstance(shape, int) else tuple(shape)
        nbytes = dt.itemsize
        for d in shp:
            nbytes *= d
        if nbytes < self.min_bytes or nbytes == 0 or dt.hasobject or not self.max_bytes:
            return np.empty(shp, dt)
        cls = size_class(nbytes)
        with self._lock:
            raw = self._free(cls)
            if raw is None:
                raw = self._new(cls)
                if raw is None:
                    self._unpooled += 1
                    return np.empty(shp, dt)
            else:
                self._reused += 1
            # The view is made under the lock: once out, its reference keeps the buffer busy.
            start = self._start[id(raw)]  # (a larger class's buffer has room for it too)
            return raw[start:start + nbytes].view(dt).reshape(shp)

    def _free(self, cls: int) -> np.ndarray | None:
        """A free buffer of class ``cls``, else of the smallest larger class up to twice its
        size: chunks vary in size (the ramp, each worker's last one), and a buffer a little
        larger beats a new one (that then pushes others out at the bound)."""
        for c in sorted(k for k in self._bufs if cls <= k <= 2 * cls):
            bufs = self._bufs[c]
            for i, refs in enumerate(_refcounts(bufs)):
                if refs == _FREE_REFS:
                    return bufs[i]
        return None

    def _new(self, cls: int) -> np.ndarray | None:
        size = cls + _ALIGN
        if size > self.max_bytes:
            return None
        if self._held + size > self.max_bytes:
            self._drop_free(self._held + size - self.max_bytes)
            if self._held + size > self.max_bytes:
                return None
        raw = np.empty(size, np.uint8)
        self._start[id(raw)] = -raw.ctypes.data % _ALIGN  # (ctypes is slow: once per buffer)
        self._bufs.setdefault(cls, []).append(raw)
        self._held += size
        self._allocated += 1
        return raw

    def _drop_free(self, need: int) -> None:
        """Let go of free buffers (largest classes first) until ``need`` bytes are released."""
        for cls in sorted(self._bufs, reverse=True):
            bufs = self._bufs[cls]
            for i, refs in reversed(list(enumerate(_refcounts(bufs)))):
                if need > 0 and refs == _FREE_REFS:
                    need -= bufs[i].nbytes
                    self._held -= bufs[i].nbytes
                    self._dropped += 1
                    del self._start[id(bufs[i])], bufs[i]
            if not bufs:
                del self._bufs[cls]
            if need <= 0:
                return

    def stats(self) -> PoolStats:
        with self._lock:
            return PoolStats(self.max_bytes, self._held, sum(map(len, self._bufs.values())),
                             self._reused, self._allocated, self._unpooled, self._dropped)

    def clear(self) -> None:
        """Forget every buffer (ones still lent out stay valid: their arrays keep them)."""
        with self._lock:
            self._bufs.clear()
            self._start.clear()
            self._held = 0


def _gil_counts() -> bool:
    """Whether reference counts are exact here (not on a free-threaded build without the GIL)."""
    enabled = getattr(sys, "_is_gil_enabled", None)
    return enabled is None or bool(enabled())


def _env_max_bytes() -> int:
    raw = os.environ.get(ENV_VAR, "").strip()
    if not raw:
        return DEFAULT_MAX_BYTES
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ConfigurationError(f"{ENV_VAR}={raw!r}: expected the pool's bound in bytes, an integer >= 0 "
                                 f"(0 turns the buffer pool off; unset: {DEFAULT_MAX_BYTES})")
    return value


_POOL: BufferPool | None = None
_POOL_LOCK = threading.Lock()


def buffer_pool() -> BufferPool:
    """This process's pool (made on first use, bounded by ``PETASTREAM_BUFFER_POOL``)."""
    global _POOL
    pool = _POOL
    if pool is None:
        with _POOL_LOCK:
            if _POOL is None:
                _POOL = BufferPool(_env_max_bytes() if _gil_counts() else 0)
            pool = _POOL
    return pool


def configure(max_bytes: int | None = None, min_bytes: int = MIN_BYTES) -> BufferPool:
    """Bound this process's pool at ``max_bytes`` (0: off; None: ``PETASTREAM_BUFFER_POOL`` or
    the default) from now on, pooling arrays of ``min_bytes`` and more; buffers it held are
    forgotten (arrays still using them keep them alive). Returns the new pool. Worker processes
    start with the environment's bound: set the variable to bound theirs."""
    global _POOL
    if max_bytes is None:
        max_bytes = _env_max_bytes()
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int):
        raise InvalidArgumentError(f"configure(max_bytes={max_bytes!r}): expected an int of bytes (0: off)")
    pool = BufferPool(max_bytes if _gil_counts() else 0, min_bytes)
    with _POOL_LOCK:
        _POOL = pool
    return pool


def pooled_empty(shape: Sequence[int] | int, dtype: Any) -> np.ndarray:
    """``np.empty(shape, dtype)``, from this process's pool where it is worth it."""
    return buffer_pool().empty(shape, dtype)


def pooled_take(a: np.ndarray, ids: np.ndarray, checked: bool = False) -> np.ndarray:
    """``a[ids]`` (items of a 1-D array) into a pooled array. The range is checked here (unless
    the caller has: ``checked``, ids in ``0..len(a)-1``) and the take runs with ``mode="clip"``:
    in its default ``"raise"`` numpy writes through a fresh temporary ``out`` (what the pool is
    here to avoid)."""
    ids = np.asarray(ids)
    if not a.flags.c_contiguous:
        # np.take first copies a non-contiguous source whole (an overlapping window of items,
        # as gather_rows's, would be its size times the item's): plain fancy indexing does not.
        return a[ids]
    if checked:
        out = buffer_pool().empty((len(ids),), a.dtype)
        np.take(a, ids, out=out, mode="clip")
        return out
    if len(ids) and (int(ids.min()) < -len(a) or int(ids.max()) >= len(a)):
        raise OutOfRangeError(f"row ids {int(ids.min())}..{int(ids.max())} out of range for {len(a)} rows")
    if len(ids) and int(ids.min()) < 0:
        ids = np.where(ids < 0, ids + len(a), ids)  # numpy's negative indexing, kept
    out = buffer_pool().empty((len(ids),), a.dtype)
    np.take(a, ids, out=out, mode="clip")
    return out


def _forget_in_child() -> None:
    # A forked child inherits the parent's buffers (and perhaps a lock held by another of the
    # parent's threads): it starts with a pool of its own.
    global _POOL, _POOL_LOCK
    _POOL, _POOL_LOCK = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
