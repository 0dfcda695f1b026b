"""Shard hashes: ``hashlib`` algorithms (not ``shake_*``) plus ``xxhash``'s.

A digest is ``func(data).hexdigest()`` with default parameters: lowercase hex, seed 0 for
xxhash, whose hexdigest is the canonical big-endian form (``xxh64(b'abc') = 44bc2cf5ad770999``).
The whole shard file is hashed: raw bytes for ``raw_data``, compressed bytes for ``zip_data``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Any

from petastream.errors import FormatError

__all__ = ["HASH_ALGORITHMS", "DEFAULT_HASHES", "hasher", "hexdigest", "check_hashes"]

#: What materialization and the writers record per shard unless told otherwise (``hashes=[]``
#: records none): xxh3-64 hashes at memory
#: speed (tens of GB/s), so every reader checks each shard once at no noticeable cost, and
#: Mosaic Streaming reads it too (``validate_hash='xxh3_64'``).
DEFAULT_HASHES: tuple[str, ...] = ("xxh3_64",)

_HASHLIB = sorted(
    name
    for name in hashlib.algorithms_available
    if hasattr(hashlib, name) and not name.startswith("shake_")
)
_XXHASH = ["xxh32", "xxh64", "xxh3_64", "xxh3_128", "xxh128"]

HASH_ALGORITHMS: tuple[str, ...] = tuple(sorted(set(_HASHLIB) | set(_XXHASH)))


def _func(name: str) -> Callable[..., Any]:
    if name in _XXHASH:
        import xxhash

        return getattr(xxhash, name)
    if name in _HASHLIB:
        return getattr(hashlib, name)
    raise FormatError(f"unknown hash algorithm {name!r}; valid: {', '.join(HASH_ALGORITHMS)}")


def hasher(name: str) -> Any:
    """An incremental hasher (``update``, ``hexdigest``) for algorithm ``name``."""
    return _func(name)()


def hexdigest(name: str, data: bytes | memoryview) -> str:
    """The lowercase hex digest of ``data`` under algorithm ``name``."""
    return _func(name)(data).hexdigest()


def check_hashes(names: Iterable[str] | None) -> list[str]:
    """Validate a writer's ``hashes`` argument: known names, given in sorted order (as Mosaic)."""
    names = list(names or [])
    for name in names:
        _func(name)
    if names != sorted(names):
        raise FormatError(f"hashes must be given sorted, got {names}; pass {sorted(names)}")
    return names
