"""``petastorm.utils``: decoding one row of a Unischema dataset, and its error.

Readers decode a column at a time (:mod:`petastream.compat._decode`); :func:`decode_row` is the
one-row form Petastorm exposes (and row-group indexing uses), with the same results.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import numpy as np

from petastream.errors import PetastreamError

__all__ = ["DecodeFieldError", "decode_row"]


class DecodeFieldError(PetastreamError, RuntimeError):
    """Decoding a field's value failed; the message names the field, the cause is chained.
    Petastorm's class of the same name is a ``RuntimeError`` too."""


def _casts(numpy_dtype: Any) -> bool:
    return isinstance(numpy_dtype, type) and issubclass(numpy_dtype, (np.generic, Decimal))


def decode_value(field: Any, value: Any) -> Any:
    """One stored value as the reader yields it: the codec's decode, else a cast to the field's
    numpy type (``np.int32(v)``, ``Decimal(v)``), else the value itself; None stays None."""
    if value is None:
        return None
    if field.codec is not None:
        return field.codec.decode(field, value)
    if _casts(field.numpy_dtype):
        return field.numpy_dtype(value)
    return value


def decode_row(row: dict[str, Any], schema: Any) -> dict[str, Any]:
    """Decode the fields of ``row`` (stored values) that are in ``schema``; others are dropped."""
    decoded = {}
    for name, value in row.items():
        field = schema.fields.get(str(name))
        if field is None:
            continue
        try:
            decoded[field.name] = decode_value(field, value)
        except Exception as e:
            raise DecodeFieldError(f'Decoding field "{field.name}" failed') from e
    return decoded
