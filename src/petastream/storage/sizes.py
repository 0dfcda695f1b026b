"""Byte sizes as users write them: ``50_000_000``, ``"50gb"``, ``"1.5 GiB"``, ``"800mb"``.

Units follow Mosaic Streaming's ``cache_limit``: ``kb``/``mb``/``gb``/``tb`` are powers of 1000,
``kib``/``mib``/``gib``/``tib`` powers of 1024, case-insensitive; a bare number is bytes.
"""

from __future__ import annotations

import os
import re

from petastream.errors import InvalidArgumentError, InvalidArgumentTypeError

__all__ = ["parse_size", "cache_limit_setting", "human", "CACHE_LIMIT_ENV"]

#: Environment variable that sets the shard cache's size limit when no argument does.
CACHE_LIMIT_ENV = "PETASTREAM_CACHE_LIMIT"

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "k": 10**3, "m": 10**6,
          "g": 10**9, "t": 10**12}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$")


def parse_size(value: int | str, *, what: str = "size") -> int:
    """``value`` in bytes: an int, or a string with an optional unit (``"50gb"``)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InvalidArgumentTypeError(f"{what} must be bytes (int) or a string like '50gb', got {value!r}")
    if isinstance(value, int):
        nbytes = value
    else:
        m = _SIZE.match(value.lower())
        if m is None or m.group(2) not in _UNITS:
            raise InvalidArgumentError(
                f"{what}={value!r} is not a size; write bytes or a number with a unit "
                f"({', '.join(u for u in _UNITS if len(u) > 1)}), e.g. '50gb'"
            )
        nbytes = int(float(m.group(1)) * _UNITS[m.group(2)])
    if nbytes <= 0:
        raise InvalidArgumentError(f"{what} must be positive, got {value!r}")
    return nbytes


def cache_limit_setting(value: int | str | None) -> int | None:
    """The cache limit an argument asks for, else ``$PETASTREAM_CACHE_LIMIT``, else None (the
    cache then only keeps the disk from filling up; see :mod:`petastream.storage.cache`)."""
    if value is None:
        value = os.environ.get(CACHE_LIMIT_ENV) or None
        if value is None:
            return None
        return parse_size(value, what=CACHE_LIMIT_ENV)
    return parse_size(value, what="cache_limit")


def human(n: float) -> str:
    """``1536`` -> ``'1.5 KiB'``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)
