"""``JaggedBytes``: a batch's ``str``/``bytes`` column as two tensors, no Python object per value.

``values`` (uint8) holds the column's bytes back to back and ``offsets`` (int64, rows + 1, from
0) where each row starts: row ``i`` is ``values[offsets[i]:offsets[i+1]]``. The names and the
layout are those of PyTorch's jagged layout (``torch.nested.nested_tensor_from_jagged(values,
offsets)``, :meth:`JaggedBytes.nested`) and of Arrow's binary arrays, which is also how
Mosaic's and LitData's tokenised samples travel (a flat buffer and its boundaries).

Why a class of our own rather than a nested tensor: a nested tensor of bytes is a valid
jagged tensor, but ``pin_memory()``, ``tolist()`` and ``nt[i]`` on it do not give back the
strings, and a ``DataLoader`` worker hands it over less directly than two plain tensors. Why not
a ``NamedTuple``: ``len()`` and ``[i]`` must mean rows, not the two fields.

A ``DataLoader`` pins it through :meth:`pin_memory` (it calls that method on any object that
has one), and worker processes hand it over as its two tensors in shared memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from petastream.errors import InvalidArgumentTypeError, OutOfRangeError

__all__ = ["JaggedBytes"]


class JaggedBytes:
    """A column of ``str`` (``utf8``, their UTF-8 bytes) or ``bytes`` values as ``values`` +
    ``offsets`` tensors (see the module doc). ``len(j)`` rows; ``j[i]`` the i-th value as
    ``str``/``bytes``; ``j.tolist()`` all of them (as the objects form gives them);
    ``j.lengths()`` bytes per row; ``j.to(device)``, ``j.pin_memory()``, ``j.nested()``."""

    __slots__ = ("values", "offsets", "utf8")

    def __init__(self, values: torch.Tensor, offsets: torch.Tensor, utf8: bool = False):
        self.values, self.offsets, self.utf8 = values, offsets, utf8

    @classmethod
    def from_numpy(cls, values: np.ndarray, offsets: np.ndarray, utf8: bool = False) -> JaggedBytes:
        """From a ``Ragged``'s arrays (offsets from 0), shared where they are the batch's own
        (a gather into memory numpy allocated, as numeric columns are), else copied: views of a
        shard or of Arrow buffers a cache holds must not be handed out. (A copy of a batch's
        256 KB of payload, in a fresh allocation that faults its pages in, was a third of the
        column's cost.)"""
        return cls(torch.from_numpy(_owned(values, np.uint8)), torch.from_numpy(_owned(offsets, np.int64)), utf8)

    def __len__(self) -> int:
        return int(self.offsets.shape[0]) - 1

    def __getitem__(self, i: int) -> str | bytes:
        n = len(self)
        if isinstance(i, bool) or not isinstance(i, int | np.integer):
            raise InvalidArgumentTypeError(f"JaggedBytes indices must be integers, got {type(i).__name__}")
        if not -n <= i < n:
            raise OutOfRangeError(f"row {i} out of range for a column of {n} rows")
        i = int(i) % n
        start, stop = (int(x) for x in self.offsets[i:i + 2].tolist())
        raw = self.values[start:stop].cpu().numpy().tobytes()
        return raw.decode("utf-8") if self.utf8 else raw

    def __iter__(self) -> Iterator[str | bytes]:
        return iter(self.tolist())

    def tolist(self) -> list[Any]:
        """Every row as ``str``/``bytes``, made in Arrow (one object a value, as the objects
        form): for code that needs the objects after all."""
        import pyarrow as pa

        values = np.ascontiguousarray(self.values.cpu().numpy())
        offsets = np.ascontiguousarray(self.offsets.cpu().numpy(), dtype=np.int64)
        arr = pa.Array.from_buffers(pa.large_string() if self.utf8 else pa.large_binary(), len(self),
                                    [None, pa.py_buffer(offsets), pa.py_buffer(values)])
        return arr.to_pylist()

    def lengths(self) -> torch.Tensor:
        """Bytes per row (int64)."""
        return self.offsets[1:] - self.offsets[:-1]

    def to(self, device: Any, non_blocking: bool = False) -> JaggedBytes:
        return JaggedBytes(self.values.to(device, non_blocking=non_blocking),
                           self.offsets.to(device, non_blocking=non_blocking), self.utf8)

    def pin_memory(self) -> JaggedBytes:
        return JaggedBytes(self.values.pin_memory(), self.offsets.pin_memory(), self.utf8)

    def is_pinned(self) -> bool:
        return bool(self.values.is_pinned() and self.offsets.is_pinned())

    @property
    def device(self) -> torch.device:
        return self.values.device

    def nested(self) -> torch.Tensor:
        """The column as a nested tensor of jagged layout (uint8 rows of varying length),
        sharing ``values`` and ``offsets``."""
        return torch.nested.nested_tensor_from_jagged(self.values, self.offsets)

    def __reduce__(self) -> tuple[Any, ...]:
        return JaggedBytes, (self.values, self.offsets, self.utf8)

    def __repr__(self) -> str:
        kind = "str" if self.utf8 else "bytes"
        return f"JaggedBytes({kind}, rows={len(self)}, bytes={int(self.values.numel())}, device={self.device})"


def _owned(a: np.ndarray, dtype: type) -> np.ndarray:
    """``a`` as a contiguous array of ``dtype`` that nothing else reads: itself where it is a
    view of memory numpy allocated (a batch's own gather), else a copy. Writability does not
    tell: numpy views of a cached row group's Arrow buffers, or of a shard, may be writable."""
    base: Any = a
    while isinstance(base, np.ndarray) and not base.flags.owndata:
        base = base.base
    if isinstance(base, np.ndarray) and not isinstance(base, np.memmap) and a.dtype == dtype \
            and a.flags.writeable and a.flags.c_contiguous:
        return a
    return np.array(a, dtype=dtype)
