"""Petastorm's ``cache_type="local-disk"`` arguments as both readers take them, ``cleanup_cache``,
and the readers' ``diagnostics``.

Petastorm 0.13.1 keeps each row group's decoded rows in a ``diskcache`` at ``cache_location``
for the reader's life and deletes that directory when the reader's context exits (or at
``cleanup_cache()``). Here ``make_batch_reader`` keeps decoded row groups in petastream's shard
cache there (content-keyed, so never stale, and kept for later readers), and ``make_reader``
keeps each row group's decoded columns in a directory of the reader's own there
(:class:`ReaderDiskCache`: later epochs map them instead of decoding the Parquet again).
Both check the arguments as Petastorm does, create the directory, and at cleanup remove what
they wrote and the directory when it is left empty: never a file of the user's (Petastorm
removes the whole tree).
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Callable
from typing import Any

from petastream.errors import InvalidArgumentError

__all__ = ["NullCache", "LocalDiskCache", "ReaderDiskCache", "check_local_disk", "cleanup_cache", "pool_diagnostics", "local_path"]

#: Petastorm's LocalDiskCache default ``shards``: its size check divides the limit by it.
_SHARDS = 6


class NullCache:
    """``reader.cache`` without ``cache_type="local-disk"``: a pass-through, as Petastorm's."""

    def get(self, key: Any, fill_cache_func: Callable[[], Any]) -> Any:
        return fill_cache_func()


class LocalDiskCache(NullCache):
    """``reader.cache`` with ``cache_type="local-disk"``: the directory it made (or was given),
    which :meth:`cleanup` removes when it is left empty."""

    def __init__(self, directory: str):
        self.directory = directory

    def cleanup(self) -> None:
        try:
            os.rmdir(self.directory)
        except FileNotFoundError:
            pass
        except OSError:
            pass  # not empty (kept decoded row groups, or the user's files): kept


class ReaderDiskCache(LocalDiskCache):
    """``make_reader``'s cache: a directory of this reader's own, ``petastream-rows-<random>``
    under ``directory`` (so nothing another reader or an older dataset wrote is ever served),
    where its source keeps each row group's decoded columns (the shard cache, with
    ``cache_decoded``: see :mod:`petastream.parquet.decoded`), up to ``size_limit`` bytes.
    :meth:`cleanup` removes the reader's directory, then ``directory`` if that left it empty."""

    def __init__(self, directory: str, size_limit: int | None):
        super().__init__(directory)
        self.own = os.path.join(directory, f"petastream-rows-{secrets.token_hex(8)}")
        self.size_limit = size_limit

    def cleanup(self) -> None:
        shutil.rmtree(self.own, ignore_errors=True)
        super().cleanup()


def local_path(cache_location: str | None) -> str | None:
    """``cache_location`` as a local path (``file://`` stripped); the cache is a local directory."""
    if cache_location is None:
        return None
    location = os.fspath(cache_location)
    if location.startswith("file://"):
        location = location[len("file://"):]
    if "://" in location:
        raise InvalidArgumentError(f"cache_location={cache_location!r}: the cache is a local directory; pass a path")
    return location


def check_local_disk(reader: str, cache_location: str | None, cache_size_limit: int | None,
                     cache_row_size_estimate: int | None, cache_extra_settings: dict | None) -> str | None:
    """Petastorm's checks of the ``local-disk`` arguments (its ``ValueError`` when the limit is
    too small for the row size); creates ``cache_location`` and returns it as a local path.
    ``cache_extra_settings`` configured Petastorm's diskcache, which petastream does not use:
    refused."""
    if cache_extra_settings:
        raise InvalidArgumentError(
            f"{reader}(cache_extra_settings={cache_extra_settings!r}) configures Petastorm's diskcache, which "
            "petastream does not use; drop it (see docs/migrating.md, Reader API)")
    if cache_size_limit is not None and cache_row_size_estimate is not None \
            and cache_size_limit / _SHARDS < 5 * cache_row_size_estimate:
        raise ValueError("Condition 'size_limit_bytes / shards < 5 * expected_row_size_bytes' needs to hold, "
                         "otherwise, newly added cached values might end up being immediately evicted.")
    directory = local_path(cache_location)
    if directory is not None:
        os.makedirs(directory, exist_ok=True)
    return directory


def cleanup_cache(cache: NullCache, *, announce: bool) -> None:
    """Petastorm's ``cleanup_cache``: a failing cleanup is printed, not raised; ``announce``:
    print ``Cache cleanup complete.`` (its ``cleanup_cache()`` prints it and users' tests
    capture it; not printed at every context exit here)."""
    if isinstance(cache, LocalDiskCache):
        try:
            cache.cleanup()
        except (OSError, AttributeError) as e:
            print(f"Error cleaning cache: {e}")
    if announce:
        print("Cache cleanup complete.")


def pool_diagnostics(pool_type: str, *, waiting: int, handed_out: int, done: int,
                     zmq_copy_buffers: bool) -> dict[str, Any]:
    """``reader.diagnostics`` with the keys of Petastorm's pool of that type: its thread pool
    reports the results ``waiting`` to be read, its process pool the items ``handed_out`` to
    workers, ``done`` and in flight, its dummy pool nothing."""
    if pool_type == "dummy":
        return {}
    if pool_type == "process":
        return {"items_consumed": handed_out, "items_produced": done, "items_inprocess": handed_out - done,
                "zmq_copy_buffers": zmq_copy_buffers}
    return {"output_queue_size": waiting}
