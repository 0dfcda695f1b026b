"""The ``str``/``bytes`` objects of row groups read from decoded cache entries, kept between
passes (issue 36).

A row group read from its decoded cache entry (``cache_decoded``; compat's
``cache_type="local-disk"``) maps the entry, which pins it in the shard cache: so at the end of
a pass its source unmaps it (another process may need the room) and the next pass maps it
again, which costs nothing, but makes the Python objects of its ``str``/``bytes`` columns
again, which was most of an epoch's CPU time on 'binary' (a reader per epoch: 0.79 s of CPU
against 0.53 s without the cache, whose row groups stay loaded). Here a source keeps those
object arrays (they hold no mapping: each value is a Python object of its own) by the entry's
key and the column, within a byte budget, least recently used out; a row group mapped again
takes its objects from here.

Safe because an entry's key names its content (the file's version and footer, the row group,
the rows kept, the columns and how they are read: :func:`~.decoded.decoded_key`), and the
objects were made from the entry's bytes after its digest was checked. A new process (a
worker, the next run) keeps nothing and reads the entries from disk, as Petastorm's
``local-disk`` cache is read.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

__all__ = ["KeptObjects", "OBJECT_BYTES"]

#: Bytes a value's object costs beyond its data (a ``bytes`` object's header, its pointer).
OBJECT_BYTES = 48


class KeptObjects:
    """Object arrays by ``(entry key, column)``, at most ``max_bytes`` of them (their values'
    bytes plus :data:`OBJECT_BYTES` a value); 0 keeps nothing."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._kept: OrderedDict[tuple[str, str], tuple[np.ndarray, int]] = OrderedDict()
        self._held = 0

    def get(self, key: str, column: str, rows: int) -> np.ndarray | None:
        """The objects kept for ``column`` of entry ``key``, if they are ``rows`` long."""
        with self._lock:
            got = self._kept.get((key, column))
            if got is None or len(got[0]) != rows:
                return None
            self._kept.move_to_end((key, column))
            return got[0]

    def put(self, key: str, column: str, objects: np.ndarray, nbytes: int) -> None:
        """Keep ``objects`` (their values ``nbytes`` long together), if they fit the budget."""
        size = nbytes + OBJECT_BYTES * len(objects)
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._kept.pop((key, column), None)
            if old is not None:
                self._held -= old[1]
            while self._kept and self._held + size > self.max_bytes:
                self._held -= self._kept.popitem(last=False)[1][1]
            self._kept[(key, column)] = (objects, size)
            self._held += size

    @property
    def held_bytes(self) -> int:
        return self._held

    def __len__(self) -> int:
        return len(self._kept)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._held = 0
