"""``petastorm.errors``."""

from __future__ import annotations

from petastream.errors import PetastreamError

__all__ = ["NoDataAvailableError", "stopped_error"]

_STOPPED = ("Trying to read a sample after a reader created by make_reader/make_batch_reader has "
            "stopped. This may happen if the make_reader/make_batch_reader context manager has "
            "exited but you try to fetch a sample from it anyway. Please check your code.")


def stopped_error() -> RuntimeError:
    """Petastorm's error for a read after the reader stopped (its context exited)."""
    return RuntimeError(_STOPPED)


class NoDataAvailableError(PetastreamError, Exception):
    """No row group is left to read (more shards than row groups)."""
