"""Errors raised by the Spark materializer; defined in :mod:`petastream.errors` with the rest
(a :class:`~petastream.errors.PetastreamError` that also inherits the builtin it refines)."""

from __future__ import annotations

from petastream.errors import MaterializationError, NullValuesError, UnsupportedColumnError

__all__ = ["UnsupportedColumnError", "NullValuesError", "MaterializationError"]
