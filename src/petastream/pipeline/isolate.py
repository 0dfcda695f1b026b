"""Finding the samples that fail, so that ``on_error`` can name or skip them.

Reads and transforms work in bulk (a chunk of many batches per read, a batch per transform
call), so an error says only that something in the bulk failed. Nothing here runs until one
does; then:

* **decode** (:class:`DecodeGuard`): each shard's part of the failed chunk is read again on its
  own; a part that fails is split in halves until the failing rows are single (bisection:
  about ``2 log2(n)`` reads per bad row). A part whose first and last rows both fail alone is
  taken as a damaged shard (or row group) and left out whole, without reading each row: a
  truncated file, a failed checksum. Bisection gives up after ``_MAX_FAILED_READS`` failed
  reads of a part and treats the rest of it as damaged. A single bad row is read once per
  column to name the column. The good rows are then read together, in order.
* **transform** (:func:`transformed`): the user's ``transform`` works on a batch, so a batch it
  fails on is bisected by calling it on halves of the batch until single rows fail, then
  called once more on the rows that passed (the batch, short by the bad rows). This assumes
  what a per-row transform gives: its output for a row does not depend on the other rows of
  the batch (a transform that normalises by the batch's mean sees a smaller batch); under
  ``"raise"`` only the first bad row is looked for (``log2(n)`` calls) before raising.

Samples already skipped (``exclude``: the ids a resumed state carries) are left out of every
read before it happens, so a resumed epoch serves each remaining sample exactly once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from petastream.errors import StorageError
from petastream.pipeline.onerror import BadSample, ErrorPolicy
from petastream.source import Source
from petastream.stream.grouping import ShardGroup

__all__ = ["DecodeGuard", "NOT_DATA", "batch_rows", "take_rows", "transformed"]

_MAX_FAILED_READS = 64
# Errors that say nothing about a sample: never skipped, never bisected (storage that cannot be
# read now, a full cache: a damaged or missing shard file is a CorruptShardError, not these).
NOT_DATA: tuple[type[BaseException], ...] = (StorageError, MemoryError)


def batch_rows(batch: dict[str, Any]) -> int:
    """Rows of a batch of columns (0 for no columns)."""
    for col in batch.values():
        return len(col)
    return 0


def take_rows(batch: dict[str, Any], rows: np.ndarray) -> dict[str, Any]:
    """The batch's rows ``rows`` (numpy columns, lists and ``Ragged`` alike)."""
    out = {}
    for name, col in batch.items():
        if isinstance(col, np.ndarray) or hasattr(col, "take"):
            out[name] = col[rows] if isinstance(col, np.ndarray) else col.take(rows)
        else:
            out[name] = [col[int(i)] for i in rows]
    return out


def _empty_block(ds: Source, columns: Sequence[str] | None) -> dict[str, Any]:
    return ds.read_shard(0, np.zeros(0, np.int64), columns) if ds.num_shards else {}


class DecodeGuard:
    """Reads a worker's chunks under an :class:`ErrorPolicy`, leaving out ``exclude`` ids and
    the rows that fail; remembers, for the chunk read last, which rows each batch lost."""

    def __init__(self, policy: ErrorPolicy, exclude: np.ndarray, dataset: str,
                 read: Callable[[Source, Any, list[str] | None], dict[str, Any]]):
        self.policy, self.exclude, self.dataset, self._read = policy, exclude, dataset, read
        self.chunk: Any = None
        self.keep: np.ndarray | None = None  # chunk positions kept (None: all)
        self.bounds: np.ndarray | None = None  # the chunk's batch bounds after leaving rows out
        self.bads: list[BadSample] = []  # what the chunk read last skipped (reported once)

    def read(self, ds: Source, chunk: Any, columns: list[str] | None) -> dict[str, Any]:
        self.chunk, self.bads = chunk, []
        drop = np.zeros(len(chunk.ids), bool)
        if self.exclude.size:
            drop |= np.isin(chunk.ids, self.exclude)
        try:
            return self._read_kept(ds, chunk, columns, drop)
        except NOT_DATA:
            raise
        except Exception as e:
            failed = e
        # (outside the except: the sample's error is raised on its own, not "during handling" of this one)
        self._isolate(ds, chunk, columns, drop, failed)
        return self._read_kept(ds, chunk, columns, drop)  # (fails again: not the rows' doing)

    def dropped(self, i: int) -> int:
        """Rows the chunk's batch ``i`` lost."""
        b, nb = self.chunk.bounds, self.bounds
        assert nb is not None
        return int(b[i + 1] - b[i] - (nb[i + 1] - nb[i]))

    def ids(self, i: int) -> np.ndarray:
        """The sample ids of the rows the chunk's batch ``i`` came out with."""
        assert self.bounds is not None
        ids = self.chunk.ids if self.keep is None else self.chunk.ids[self.keep]
        return ids[int(self.bounds[i]):int(self.bounds[i + 1])]

    def take_bads(self) -> list[BadSample]:
        bads, self.bads = self.bads, []
        return bads

    # -- finding the bad rows -----------------------------------------------------------------
    def _isolate(self, ds: Source, chunk: Any, columns: list[str] | None, drop: np.ndarray,
                 first: Exception) -> None:
        for g in chunk.by_shard():
            sel = ~drop[g.positions]
            if sel.any():
                part = ShardGroup(g.shard, g.local_ids[sel], g.positions[sel])
                drop[self._bad_in_group(ds, part, columns, first)] = True

    def _bad_in_group(self, ds: Source, g: ShardGroup, columns: list[str] | None,
                      first: Exception) -> np.ndarray:
        def fails(sel: np.ndarray, cols: list[str] | None = columns) -> Exception | None:
            try:
                ds.read_shard(g.shard, g.local_ids[sel], cols)
            except NOT_DATA:
                raise
            except Exception as e:
                return e
            return None

        n = len(g.local_ids)
        every = np.arange(n)
        err = fails(every)
        if err is None:
            return np.zeros(0, np.int64)
        if n > 2 and fails(every[:1]) is not None and fails(every[-1:]) is not None:
            self._skip(g, every, err, None, whole=True)
            return g.positions
        bad: list[int] = []
        budget = [_MAX_FAILED_READS]
        stack = [(every, err)]
        while stack:
            sel, e = stack.pop()
            if len(sel) == 1:
                bad.append(int(sel[0]))
                self._skip(g, sel, e, self._column(fails, sel, columns if columns is not None else
                                                   list(ds.columns)), whole=False)
                continue
            if budget[0] <= 0:  # too many failures to bisect: the rest of the part is damaged
                bad.extend(int(s) for s in sel)
                self._skip(g, sel, e, None, whole=True)
                continue
            half = len(sel) // 2
            for part in (sel[half:], sel[:half]):  # (popped first half first: ids in order)
                pe = fails(part)
                if pe is not None:
                    budget[0] -= 1
                    stack.append((part, pe))
        return g.positions[np.asarray(sorted(bad), np.int64)]

    def _column(self, fails: Callable[..., Exception | None], sel: np.ndarray, columns: list[str]) -> str | None:
        if len(columns) < 2:
            return columns[0] if columns else None
        failing = [c for c in columns if fails(sel, [c]) is not None]
        return failing[0] if len(failing) == 1 else None

    def _skip(self, g: ShardGroup, sel: np.ndarray, error: Exception, column: str | None, whole: bool) -> None:
        local = g.local_ids[sel]
        offset = int(self.chunk.shard_offsets[g.shard])
        bad = BadSample("decode", self.dataset, tuple(int(i) + offset for i in local), shard=int(g.shard),
                        rows=tuple(int(i) for i in local), column=column, error_type=type(error).__name__,
                        error_text=str(error), whole_shard=whole)
        self.policy.handle(bad, error)  # raises unless skipped
        self.bads.append(bad)

    def _read_kept(self, ds: Source, chunk: Any, columns: list[str] | None, drop: np.ndarray) -> dict[str, Any]:
        if not drop.any():
            self.keep, self.bounds = None, chunk.bounds
            return self._read(ds, chunk, columns)
        keep = ~drop
        self.keep = np.flatnonzero(keep)
        self.bounds = chunk.bounds - np.searchsorted(np.flatnonzero(drop), chunk.bounds, side="left")
        n = int(self.keep.size)
        if n == 0:
            return _empty_block(ds, columns)
        new_pos = np.cumsum(keep) - 1
        groups = []
        for g in chunk.by_shard():
            sel = keep[g.positions]
            if sel.any():
                groups.append(ShardGroup(g.shard, g.local_ids[sel], new_pos[g.positions[sel]]))
        return ds.read_parts(groups, n, columns)


def transformed(transform: Callable[[dict[str, Any]], dict[str, Any]], batch: dict[str, Any],
                policy: ErrorPolicy | None, ids: Callable[[], np.ndarray], dataset: str,
                shard_offsets: np.ndarray | None = None) -> tuple[dict[str, Any], list[BadSample]]:
    """``transform(batch)``; where it raises, the rows it raises on are found (see the module
    doc) and, as ``policy`` says, raised with a note or left out. ``ids()``: the batch rows'
    sample ids (asked only on a failure); ``shard_offsets``: the source's, to name a failing
    sample's shard (a Parquet source's row group) and row in it."""
    try:
        return transform(batch), []
    except NOT_DATA:
        raise
    except Exception as e:
        if policy is None:
            raise
        first = e
    n = batch_rows(batch)

    def fails(rows: np.ndarray) -> Exception | None:
        try:
            transform(take_rows(batch, rows))
        except NOT_DATA:
            raise
        except Exception as e:
            return e
        return None

    bads: list[BadSample] = []
    bad_rows: list[int] = []
    stack = [(np.arange(n), first)]
    while stack:
        rows, err = stack.pop()
        if len(rows) == 1:
            sample = int(ids()[rows[0]])
            shard: int | None = None
            row: tuple[int, ...] = ()
            if shard_offsets is not None:
                shard = int(np.searchsorted(shard_offsets, sample, side="right")) - 1
                row = (sample - int(shard_offsets[shard]),)
            bad = BadSample("transform", dataset, (sample,), shard=shard, rows=row, error_type=type(err).__name__,
                            error_text=str(err))
            policy.handle(bad, err)  # raises unless skipped
            bads.append(bad)
            bad_rows.append(int(rows[0]))
            continue
        half = len(rows) // 2
        found = False
        for part in (rows[half:], rows[:half]):
            pe = fails(part)
            if pe is not None:
                stack.append((part, pe))
                found = True
        if not found:  # fails on the whole, on neither half: not one row's doing
            raise first
    keep = np.setdiff1d(np.arange(n), np.asarray(bad_rows, np.int64))
    return transform(take_rows(batch, keep)), bads
