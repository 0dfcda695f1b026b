"""``petastream.json``: what each column was before MDS stored it.

MDS has no boolean encoding, so a Spark ``boolean`` is stored as ``uint8`` (and
``array<boolean>`` as ``ndarray:uint8``). ``index.json`` must stay exactly Mosaic's (readers
check its keys), so the original types go into this small file beside it, which Mosaic ignores::

    {"format": "petastream.columns", "version": 1,
     "columns": {"flag": {"source_type": "boolean", "dtype": "bool"},
                 "id":   {"source_type": "bigint"}}}

``source_type`` is informative (Spark's ``simpleString``). ``dtype``, present only where it
differs from the stored one, is the numpy dtype readers may view the column as: only ``bool``
today, a zero-copy view of 0/1 bytes. Written before ``index.json``, so a published dataset
always has it; a dataset without it (Mosaic's, older ones) simply has no logical types.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from petastream.errors import FormatError, InvalidArgumentError

__all__ = ["SIDECAR", "dump_sidecar", "parse_sidecar", "logical_dtypes", "apply_logical"]

SIDECAR = "petastream.json"
_FORMAT, _VERSION = "petastream.columns", 1
_VIEWS = {"bool": (np.dtype(np.uint8), np.dtype(np.bool_))}  # logical -> (stored, view)


def dump_sidecar(columns: Mapping[str, Mapping[str, str]]) -> bytes:
    for name, info in columns.items():
        dtype = info.get("dtype")
        if dtype is not None and dtype not in _VIEWS:
            raise InvalidArgumentError(f"column {name!r}: logical dtype {dtype!r} is not one of {sorted(_VIEWS)}")
    doc = {"format": _FORMAT, "version": _VERSION, "columns": {k: dict(v) for k, v in columns.items()}}
    return json.dumps(doc, sort_keys=True).encode()


def parse_sidecar(data: bytes, source: str = SIDECAR) -> dict[str, dict[str, str]]:
    """The ``columns`` mapping; a newer version or another format is refused, not guessed at."""
    try:
        doc = json.loads(data)
    except ValueError as e:
        raise FormatError(f"{source}: not valid JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT or not isinstance(doc.get("columns"), dict):
        raise FormatError(f"{source}: not a petastream column file (format {_FORMAT!r} expected)")
    if doc.get("version") != _VERSION:
        raise FormatError(f"{source}: version {doc.get('version')!r}; this petastream reads version "
                          f"{_VERSION}: upgrade petastream")
    return doc["columns"]


def logical_dtypes(columns: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """``{column: logical dtype}`` for the columns stored as another dtype."""
    return {name: info["dtype"] for name, info in columns.items() if info.get("dtype") in _VIEWS}


def apply_logical(batch: dict[str, Any], dtypes: Mapping[str, str]) -> dict[str, Any]:
    """View ``batch``'s columns as their logical dtypes (no copy); other columns as they are."""
    from petastream.columns.ragged import Ragged

    if not dtypes:
        return batch
    out = dict(batch)
    for name, logical in dtypes.items():
        col = out.get(name)
        stored, view = _VIEWS[logical]
        if isinstance(col, Ragged) and col.values.dtype == stored:
            out[name] = Ragged(col.values.view(view), col.offsets)
        elif isinstance(col, np.ndarray) and col.dtype == stored:
            out[name] = col.view(view)
    return out
