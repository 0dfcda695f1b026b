"""Operations on decoded column blocks (dicts of numpy arrays, object arrays or Ragged)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from petastream.mds.ndarray import Ragged

__all__ = ["concat_columns", "take_columns", "num_rows", "WIDEN_UNSIGNED", "widen_unsigned"]

#: Unsigned dtypes that torch and TensorFlow handle poorly, and the signed type that holds them
#: (Petastorm's mapping: uint16 -> int32, uint32 -> int64).
WIDEN_UNSIGNED = {np.dtype("uint16"): np.dtype("int32"), np.dtype("uint32"): np.dtype("int64"),
                  np.dtype("uint64"): np.dtype("int64")}


def widen_unsigned(dtype: np.dtype) -> np.dtype:
    return WIDEN_UNSIGNED.get(np.dtype(dtype), np.dtype(dtype))


def num_rows(block: dict[str, Any]) -> int:
    return len(next(iter(block.values()))) if block else 0


def _concat(parts: Sequence[Any]) -> Any:
    if isinstance(parts[0], Ragged):
        values = np.concatenate([p.values for p in parts])
        lengths = np.concatenate([p.lengths() for p in parts])
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return Ragged(values, offsets)
    return np.concatenate(parts)


def concat_columns(blocks: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Stack blocks with the same columns, row-wise."""
    if len(blocks) == 1:
        return blocks[0]
    return {name: _concat([b[name] for b in blocks]) for name in blocks[0]}


def take_columns(block: dict[str, Any], ids: np.ndarray) -> dict[str, Any]:
    """Rows ``ids`` of every column, in that order."""
    return {name: (col.take(ids) if isinstance(col, Ragged) else col[ids]) for name, col in block.items()}
