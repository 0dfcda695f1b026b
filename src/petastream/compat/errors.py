"""``petastorm.errors``."""

from __future__ import annotations

from petastream.errors import PetastreamError

__all__ = ["NoDataAvailableError", "reset_early_error", "stopped_error"]

_STOPPED = ("Trying to read a sample after a reader created by make_reader/make_batch_reader has "
            "stopped. This may happen if the make_reader/make_batch_reader context manager has "
            "exited but you try to fetch a sample from it anyway")


def stopped_error() -> RuntimeError:
    """Petastorm's error for a read after the reader stopped (its context exited)."""
    return RuntimeError(_STOPPED)


class NoDataAvailableError(PetastreamError, Exception):
    """No row group is left to read (more shards than row groups)."""


_RESET_EARLY = ("Currently do not support resetting a reader while in the middle of iteration. "
                "You can call reset only after all samples were consumed.")


def reset_early_error() -> NotImplementedError:
    """Petastorm's error for ``reader.reset()`` before the last row was read."""
    return NotImplementedError(_RESET_EARLY)
