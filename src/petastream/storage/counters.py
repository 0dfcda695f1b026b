"""What this process fetched from storage and found in the shard cache, for ``loader.stats()``.

Process-wide running totals (every dataset and loader of the process adds to them; a loader
reports the difference since it started). Bumped once per request or cache lookup, never per
row, under a lock: a few hundred nanoseconds where a GET costs milliseconds.
"""

from __future__ import annotations

import threading

__all__ = ["IO", "IOCounters"]

FIELDS = ("gets", "bytes_fetched", "cache_hits", "cache_misses", "row_groups_decoded")


class IOCounters:
    """``gets`` and ``bytes_fetched``: requests to remote storage (local files are not
    fetched) and the bytes they returned; ``cache_hits``/``cache_misses``: shard-cache
    lookups that found the entry, or had to fill it (here, or by waiting for another reader's
    fill of it); ``row_groups_decoded``: Parquet row groups decoded from their files (not
    those mapped from the decoded cache, nor those a source kept loaded from a pass before)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values = dict.fromkeys(FIELDS, 0)

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._values[name] += n

    def fetched(self, nbytes: int, gets: int = 1) -> None:
        with self._lock:
            self._values["gets"] += gets
            self._values["bytes_fetched"] += nbytes

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._values)


#: This process's counters.
IO = IOCounters()
