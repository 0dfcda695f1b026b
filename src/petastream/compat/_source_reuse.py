"""Parquet sources kept between ``make_batch_reader`` readers of the same files.

Petastorm's pattern opens a reader per epoch (``with make_batch_reader(url) as reader:`` in the
epoch loop). A :class:`~petastream.parquet.ParquetSource` keeps the row groups it decoded
(within its ``memory_limit``) so that its next epoch decodes nothing again; a new source per
reader lost them, and a reader per epoch read at about half a resumed reader's speed (1M
'tabular' rows: 0.38 s against 0.24 s, 0.65 s of CPU against 0.35 s).

So a reader that is stopped and joined gives its source back here, and the next
``make_batch_reader`` of the same files takes it instead of the one it just opened. What makes
this safe:

* the new reader still opens its source (a listing and the footers: milliseconds locally, the
  footers cached), and the kept one is used only when their fingerprints agree: the same files
  at the same sizes and versions (and footers), the same row groups and rows kept (filters,
  predicate, selector, shard), the same columns and types. A file changed, added or removed
  gives another fingerprint, so stale data is never served;
* the options that change what a read returns without changing the plan (``null_policy``,
  the cache options, ``storage_options``) are part of the key;
* a source is lent to one reader at a time (taken out while a reader holds it), and only a
  reader's ``join()`` after ``stop()`` (what its ``with`` block and the loaders' do) gives it
  back: a reader never closed keeps its source, as before;
* at most :data:`MAX_IDLE` sources wait (least recently returned out), each holding what a
  resumed reader would hold: its ``memory_limit`` of decoded row groups.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from typing import Any

from petastream.parquet import ParquetSource

__all__ = ["MAX_IDLE", "forget", "give_back", "take"]

#: Sources kept for later readers (a training set and a validation set read in turn: 2).
MAX_IDLE = int(os.environ.get("PETASTREAM_COMPAT_KEPT_SOURCES", "2"))

_lock = threading.Lock()
_idle: OrderedDict[tuple[str, str], ParquetSource] = OrderedDict()
# Weak: a reader never stopped and joined lets its source go with it, as before.
_lent: weakref.WeakKeyDictionary[ParquetSource, tuple[str, str]] = weakref.WeakKeyDictionary()


def _key(source: Any, options: dict[str, Any]) -> tuple[str, str] | None:
    """What a kept source must match, or None when ``source`` is not one to keep (Delta
    snapshots, mixtures, a caller's open source)."""
    if type(source) is not ParquetSource or MAX_IDLE <= 0:
        return None
    return source.fingerprint, repr(sorted(options.items(), key=lambda item: item[0]))


def take(source: Any, options: dict[str, Any]) -> Any:
    """The source a new reader reads: a kept one of the same files and options (``source``,
    just opened, is closed then), else ``source``; either is lent until :func:`give_back`."""
    key = _key(source, options)
    if key is None:
        return source
    with _lock:
        kept = _idle.pop(key, None)
    cache_dir = options.get("cache_dir")
    if kept is not None and (cache_dir is None or os.path.isdir(cache_dir)):
        kept.strings = source.strings  # how strings are read is the new reader's choice
        source.close()
        source = kept
    elif kept is not None:  # its decoded cache was removed: let it go
        kept.close()
    with _lock:
        _lent[source] = key
    return source


def give_back(source: Any) -> None:
    """Keep ``source`` (lent by :func:`take`, its reader done) for the next reader of it."""
    with _lock:
        key = _lent.pop(source, None)
    if key is None:
        return
    source.close()  # end of its last pass: read-ahead dropped, decoded local row groups kept
    evicted: list[ParquetSource] = []
    with _lock:
        previous = _idle.pop(key, None)
        if previous is not None:
            evicted.append(previous)
        _idle[key] = source
        while len(_idle) > MAX_IDLE:
            evicted.append(_idle.popitem(last=False)[1])
    for old in evicted:
        old.close()


def forget() -> None:
    """Drop every kept source (their decoded row groups freed when nothing else holds them)."""
    with _lock:
        kept = list(_idle.values())
        _idle.clear()
    for source in kept:
        source.close()
