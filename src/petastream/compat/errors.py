"""``petastorm.errors``."""

from __future__ import annotations

from petastream.errors import PetastreamError

__all__ = ["NoDataAvailableError"]


class NoDataAvailableError(PetastreamError, Exception):
    """No row group is left to read (more shards than row groups)."""
