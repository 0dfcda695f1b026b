"""Framework conversion for PyTorch: decoded numpy columns → tensors (runs in the workers)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch

from petastream.mds.columns import widen_unsigned
from petastream.mds.ndarray import Ragged

__all__ = ["to_torch", "to_tensors", "to_pinned_tensors"]


def to_torch(col: Any) -> Any:
    """One decoded column as a tensor, or a list where a tensor cannot hold it."""
    if isinstance(col, Ragged):
        return [torch.from_numpy(np.array(col[i])) for i in range(len(col))]
    if isinstance(col, np.ndarray):
        if col.dtype == object:
            return col.tolist()
        col = col.astype(widen_unsigned(col.dtype), copy=False)
        # Packed-record views are unaligned and strided: one contiguous copy per batch.
        return torch.from_numpy(np.ascontiguousarray(col))
    return col


def to_tensors(batch: dict[str, Any]) -> dict[str, Any]:
    """Decoded numpy columns -> tensors (lists where a tensor cannot hold them)."""
    return {name: to_torch(col) for name, col in batch.items()}


def _empty_pinned(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    # Page-locked blocks come from torch's caching host allocator: a freed batch's block is
    # reused once the copies that read it have completed (torch records their events), so
    # steady state allocates nothing new and no pool of our own is needed.
    return torch.empty(shape, dtype=dtype, pin_memory=True)


@functools.lru_cache(maxsize=64)
def _torch_dtype(dtype: np.dtype) -> torch.dtype | None:
    try:
        return torch.from_numpy(np.empty(0, dtype=dtype)).dtype
    except (TypeError, ValueError):  # no torch dtype (datetime64, str...): to_torch decides
        return None


def _to_pinned(col: Any) -> Any:
    if not isinstance(col, np.ndarray) or col.dtype == object:
        return to_torch(col)
    col = col.astype(widen_unsigned(col.dtype), copy=False)
    dtype = _torch_dtype(col.dtype)
    if dtype is None:
        return to_torch(col)
    out = _empty_pinned(col.shape, dtype)
    # One copy, straight from the decoded (often strided, packed-record) view into pinned
    # memory: tensor-then-pin_memory() would copy twice.
    np.copyto(out.numpy(), col, casting="no")
    return out


def to_pinned_tensors(batch: dict[str, Any]) -> dict[str, Any]:
    """:func:`to_tensors`, in page-locked memory (so the host-to-device copy can be async)."""
    return {name: _to_pinned(col) for name, col in batch.items()}
