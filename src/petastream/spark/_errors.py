"""Errors raised by the Spark materializer.

They follow :mod:`petastream.errors` (a :class:`PetastreamError` that also inherits the builtin
it refines, message as the only argument, so they pickle) and live here until the root module
takes them over.
"""

from __future__ import annotations

from petastream.errors import PetastreamError

__all__ = ["UnsupportedColumnError", "NullValuesError", "MaterializationError"]


class UnsupportedColumnError(PetastreamError, TypeError):
    """A DataFrame column has a Spark type with no MDS encoding (struct, map, nested array...)."""


class NullValuesError(PetastreamError, ValueError):
    """A column holds nulls and ``null_policy='error'``; the message names columns and counts."""


class MaterializationError(PetastreamError, RuntimeError):
    """The Spark job that writes the dataset failed; the message carries the task's error."""
