"""Framework conversion for PyTorch: decoded numpy columns → tensors (runs in the workers)."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from petastream.columns.ops import widen_unsigned
from petastream.columns.ragged import Ragged
from petastream.columns.strings import as_ragged_bytes
from petastream.torch._jagged import JaggedBytes

__all__ = ["to_torch", "to_tensors", "to_jagged", "to_pinned_tensors", "pinning_for"]


def to_torch(col: Any) -> Any:
    """One decoded column as a tensor, or a list where a tensor cannot hold it."""
    if isinstance(col, Ragged):
        # One writable copy of the batch's values, cut into a view per row in C++: a tensor
        # per row made in Python cost 5 us a row (a 16-value row read 18x slower than fixed-size).
        values = col.values[int(col.offsets[0]):int(col.offsets[-1])] if len(col) else col.values[:0]
        return list(torch.from_numpy(np.array(values)).split(col.lengths().tolist())) if len(col) else []
    if isinstance(col, np.ndarray):
        if col.dtype == object:
            # ndarray columns whose shards differ in rank or dtype: a tensor per row, as Ragged's
            if len(col) and all(isinstance(v, np.ndarray) and v.dtype != object for v in col):
                return [torch.from_numpy(np.array(v)) for v in col]
            return col.tolist()
        col = col.astype(widen_unsigned(col.dtype), copy=False)
        # Packed-record views are unaligned and strided: one contiguous copy per batch.
        return torch.from_numpy(np.ascontiguousarray(col))
    return col


def to_jagged(name: str, col: Any, kind: str) -> JaggedBytes:
    """A decoded ``str``/``bytes`` column (``kind``) as :class:`JaggedBytes`: its bytes and
    offsets copied once, no Python object per value where it was read as ``Ragged``."""
    ragged = as_ragged_bytes(name, col, kind)
    return JaggedBytes.from_numpy(ragged.values, ragged.offsets, utf8=kind == "str")


def to_tensors(batch: dict[str, Any], jagged: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Decoded numpy columns -> tensors (lists where a tensor cannot hold them); the columns
    of ``jagged`` (``{column: "str" | "bytes"}``, see :mod:`petastream.columns.strings`) as
    :class:`JaggedBytes`."""
    if jagged:
        return {name: to_jagged(name, col, jagged[name]) if name in jagged else _tensor(name, col)
                for name, col in batch.items()}
    return {name: _tensor(name, col) for name, col in batch.items()}


def _tensor(name: str, col: Any) -> Any:
    if isinstance(col, Ragged):
        _hint_fixed_length(name, col)
    return to_torch(col)


def _hint_fixed_length(name: str, col: Ragged) -> None:
    """Say when a variable-length column's batch has one length throughout (once per column:
    Python's warning filter shows a message once): a Parquet list column of, say, 16 features
    per row reads 10x faster as one (rows, 16) tensor (``array_lengths``) than as a tensor per
    row, and nothing in the file says its rows agree."""
    lengths = col.lengths()
    if len(lengths) < 2 or not lengths[0] or (lengths != lengths[0]).any():
        return
    n = int(lengths[0])
    warnings.warn(
        f"column {name!r} is read as variable-length arrays (a tensor per row), and every row of this "
        f"batch has {n} values: if every row of the data has, open the source with "
        f"array_lengths={{{name!r}: {n}}} (petastream.parquet.open_parquet, or dataset_options=) to get one "
        f"(rows, {n}) tensor per batch, many times faster", UserWarning, stacklevel=2)


def to_pinned_tensors(batch: dict[str, Any], jagged: Mapping[str, str] | None = None) -> dict[str, Any]:
    """:func:`to_tensors`, in page-locked memory (so the host-to-device copy can be async).

    ``pin_memory()`` takes its blocks from torch's caching host allocator, which reuses a
    batch's block once the copies reading it have completed: that is the reusable pool. Copying
    the decoded (strided) columns straight into such a block instead, one copy rather than
    two, measured 0-7% faster at 1024 rows and half as fast at 16384 on an H200 (torch spreads
    its copy over cores, numpy does not; docs/benchmarks.md "GPU")."""
    return {k: v.pin_memory() if isinstance(v, torch.Tensor | JaggedBytes) else v
            for k, v in to_tensors(batch, jagged).items()}


def _pin_for(device_index: int, pin: Callable[[dict[str, Any]], Any], batch: dict[str, Any]) -> Any:
    torch.cuda.set_device(device_index)  # thread-local, and cheap once set
    return pin(batch)


def pinning_for(device_index: int,
                pin: Callable[[dict[str, Any]], Any] = to_pinned_tensors) -> Callable[[dict[str, Any]], Any]:
    """``pin`` (default :func:`to_pinned_tensors`; the device stage's ``pack``) for decode
    threads serving CUDA device ``device_index``.

    Pinning needs a CUDA context, and a new thread's current device is 0: on a node with a GPU
    per rank, every rank's decode threads would otherwise create a context (hundreds of MB) on
    GPU 0. PyTorch's own pin-memory thread sets the device for the same reason."""
    return functools.partial(_pin_for, device_index, pin)
