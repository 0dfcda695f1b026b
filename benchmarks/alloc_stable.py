"""Prototype (issue 36): allocation-stable epochs by reusing the loader's chunk buffers.

``benchmarks/epoch_swing.py`` found that glibc's adaptive thresholds make each epoch of a loader
fault in 20-35 MB of fresh pages: every chunk of an MDS epoch allocates a packed-row table, a
gathered copy of each shard's rows and one array per column (about 3x the chunk's bytes, 5 MB
a chunk on 'tabular'), above the mmap threshold or in heap that the trim threshold hands back,
and frees them when its batches are dropped. Fixing the thresholds process-wide
(``MALLOC_MMAP_THRESHOLD_`` + ``MALLOC_TRIM_THRESHOLD_``) removes most of those faults, but is the
user's choice to make, not a library's.

This prototype keeps the allocations in the loader's own hands instead: a :class:`BufferPool`
hands out large buffers and takes one back for reuse once nothing outside the pool refers to
it (its reference count: a batch tensor made by ``torch.from_numpy`` holds the array it was
made from, which holds the pool's buffer), so a buffer is never reused while a batch of the
user's still points into it. :func:`read_parts` is ``MDSDataset.read_parts`` for all-fixed-size
layouts with every large array from the pool; :func:`install` patches it in (for
``epoch_swing --settings pooled`` only: where it would live is
``petastream.mds.dataset``/``columns.ops``, whose owners decide).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

_FREE_REFS = 3  # the pool's list, the loop variable, getrefcount's argument


class BufferPool:
    """Large buffers reused once nothing outside the pool refers to them.

    ``empty(shape, dtype)`` is ``np.empty`` for anything under ``min_bytes``; above it, a view of
    the smallest free pooled buffer that fits (a new one when none is free and the pool holds
    under ``max_bytes``; past that, a plain ``np.empty``).
    """

    def __init__(self, min_bytes: int = 1 << 16, max_bytes: int = 512 << 20):
        self.min_bytes, self.max_bytes = min_bytes, max_bytes
        self._bufs: list[np.ndarray] = []
        self._lock = threading.Lock()
        self.reused = self.allocated = 0

    def empty(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape)) * dtype.itemsize
        if nbytes < self.min_bytes:
            return np.empty(shape, dtype)
        with self._lock:  # no two threads may take the same free buffer
            best = None
            for buf in self._bufs:  # no enumerate: its tuple would hold a reference
                if buf.nbytes >= nbytes and sys.getrefcount(buf) == _FREE_REFS and (
                        best is None or buf.nbytes < best.nbytes):
                    best = buf
            if best is None:
                held = sum(b.nbytes for b in self._bufs)
                if held + nbytes > self.max_bytes:
                    return np.empty(shape, dtype)
                best = np.empty(nbytes, np.uint8)
                self._bufs.append(best)
                self.allocated += 1
            else:
                self.reused += 1
            return best[:nbytes].view(dtype).reshape(shape)


POOL = BufferPool()


def read_parts(self: Any, groups: Iterable[Any], n: int, columns: Sequence[str] | None = None,
               *, _original: Any = None) -> dict[str, Any]:
    """``MDSDataset.read_parts`` with the packed-row table, each shard's gathered rows and the
    column arrays from :data:`POOL` (others: the original method)."""
    dtype = self.row_layout()
    if dtype is None:
        return _original(self, groups, n, columns)
    wanted = list(self.layout.names) if columns is None else list(columns)
    row = np.dtype((np.void, dtype.itemsize))
    rows = POOL.empty((n,), row)
    for g in groups:
        table = self.shard(g.shard)._fixed_table().view(row)  # prototype: a private reach
        got = POOL.empty((len(g.local_ids),), row)
        np.take(table, g.local_ids, out=got)
        rows[g.positions] = got
        del got
    fields = dtype.fields
    out = {}
    for name in wanted:
        field, offset = fields[name][:2]
        col = POOL.empty((n, *field.shape), field.base)
        if n:
            items = np.ndarray((n,), dtype=np.dtype((np.void, field.itemsize)), buffer=rows,
                               offset=offset, strides=(dtype.itemsize,))
            col.reshape(n, -1).view(np.dtype((np.void, field.itemsize))).reshape(n)[...] = items
        out[name] = col
    return out


def read_shard(self: Any, shard: int, ids: np.ndarray | None = None, columns: Sequence[str] | None = None,
               *, _original: Any = None) -> dict[str, Any]:
    """``MDSDataset.read_shard`` (a chunk inside one shard) with each column gathered straight
    from the shard's packed rows into a :data:`POOL` buffer (others: the original method)."""
    dtype = self.row_layout()
    if dtype is None:
        return _original(self, shard, ids, columns)
    table = self.shard(shard)._fixed_table()  # prototype: a private reach
    ids = np.arange(len(table)) if ids is None else ids
    n = len(ids)
    out = {}
    for name in (list(self.layout.names) if columns is None else list(columns)):
        field, offset = dtype.fields[name][:2]
        col = POOL.empty((n, *field.shape), field.base)
        if n:
            item = np.dtype((np.void, field.itemsize))
            items = np.ndarray((len(table),), dtype=item, buffer=table, offset=offset, strides=(dtype.itemsize,))
            np.take(items, ids, out=col.reshape(n, -1).view(item).reshape(n))
        out[name] = col
    return out


def install() -> BufferPool:
    """Patch :func:`read_parts` and :func:`read_shard` into ``MDSDataset`` (this process only);
    the pool, for its counts."""
    import functools

    from petastream.mds.dataset import MDSDataset

    for name, fn in (("read_parts", read_parts), ("read_shard", read_shard)):
        setattr(MDSDataset, name, functools.partialmethod(fn, _original=getattr(MDSDataset, name)))
    return POOL
