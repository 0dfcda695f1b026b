"""One host block per batch: a batch's numeric columns packed into one pinned allocation, copied
to the device in one transfer and taken apart there as views.

On small batches the per-tensor costs dominate the copy itself: at 1024 'tabular' rows (three
tensors, about 80 KB) each tensor cost a pinned allocation and a copy in the decode thread, and a
device allocation, a copy launch and a ``record_stream`` in the iterating thread, and delivery
ran at 0.41-0.69x the host-side rate on an H200. Packed, a batch costs one allocation, one launch
and one ``record_stream`` whatever its column count (docs/benchmarks.md "GPU" has the
before/after).

The decode threads copy the decoded numpy columns straight into the block with numpy (one copy
per column; a torch view and ``copy_`` per column measured slower: each torch call costs about
3 us of Python on the GIL that the three threads share). A :class:`Packed` batch is only for the
device stage (:func:`to_device`); batches handed to users on the host are tensors as ever.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import torch

from petastream.columns.ops import widen_unsigned
from petastream.torch._convert import to_tensors

__all__ = ["Packed", "pack", "pack_from", "numeric_nbytes", "pinned_block", "to_device", "PIN_MIN_BYTES"]

#: Offsets within the block are multiples of this: every dtype's alignment, and the width of
#: the widest vectorised loads of the kernels that read the device views.
ALIGN = 64


class Slot(NamedTuple):
    """Where one column lies in a block: bytes ``[start, stop)``, as ``dtype`` in ``shape``."""

    name: str
    start: int
    stop: int
    dtype: np.dtype
    torch_dtype: torch.dtype
    shape: tuple[int, ...]


class Packed(NamedTuple):
    """A batch on its way to the device: ``block`` holds the numeric columns at ``slots``;
    ``values`` has every column in the batch's order (those in the block as None)."""

    block: torch.Tensor
    slots: list[Slot]
    values: dict[str, Any]


def pinned_block(nbytes: int) -> torch.Tensor:
    """``nbytes`` of page-locked host memory, from torch's caching host allocator (which reuses
    a block once the copies that read it have completed: no pool of our own is needed)."""
    return torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)


@functools.cache
def _torch_dtype(dtype: np.dtype) -> torch.dtype | None:
    """The tensor dtype ``torch.from_numpy`` gives ``dtype`` (None where it takes none)."""
    try:
        return torch.from_numpy(np.empty(0, dtype)).dtype
    except TypeError:
        return None


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def pack(batch: dict[str, Any], allocate: Callable[[int], torch.Tensor] | None = None) -> Packed:
    """Decoded columns -> a :class:`Packed` batch: numeric arrays copied into one block from
    ``allocate(nbytes)`` (default :func:`pinned_block`), widened as :func:`to_torch` widens
    them; the others converted by ``to_tensors`` (lists of strings, of tensors...)."""
    slots, rest, end = [], {}, 0
    for name, col in batch.items():
        dtype = widen_unsigned(col.dtype) if isinstance(col, np.ndarray) else None
        torch_dtype = _torch_dtype(dtype) if dtype is not None else None  # None for object columns
        if dtype is None or torch_dtype is None:
            rest[name] = col
            continue
        slots.append(Slot(name, end, end + col.size * dtype.itemsize, dtype, torch_dtype, col.shape))
        end = _aligned(slots[-1].stop)
    block = (allocate or pinned_block)(end)
    host = block.numpy()
    for slot in slots:  # numpy copies from the strided decoded views and widens as it goes
        np.copyto(host[slot.start:slot.stop].view(slot.dtype).reshape(slot.shape), batch[slot.name])
    converted = to_tensors(rest)
    return Packed(block, slots, {name: converted.get(name) for name in batch})


#: ``pin_memory=None`` (the default for a CUDA device) pins a batch only when its numeric columns
#: hold at least this many bytes; smaller batches go over from pageable memory. Pinning costs a
#: host allocation from the caching allocator and a copy into it per batch, which pays for
#: itself only once the transfer is long enough to overlap: below this, pageable copies
#: delivered more rows/s (benchmarks/gpu_pinning.py; docs/benchmarks.md "Pinning by size").
PIN_MIN_BYTES = 4 << 20


def numeric_nbytes(batch: dict[str, Any]) -> int:
    """The bytes a batch's numeric columns would take in a packed block (before widening)."""
    return sum(col.nbytes for col in batch.values() if isinstance(col, np.ndarray) and col.dtype != object)


def pack_from(min_bytes: int,
              allocate: Callable[[int], torch.Tensor] | None = None) -> Callable[[dict[str, Any]], Any]:
    """The decode threads' conversion for a CUDA device: a batch whose numeric columns hold at
    least ``min_bytes`` is :func:`pack`-ed into one block from ``allocate`` (default: pinned), a
    smaller one becomes pageable tensors (``to_tensors``); the device stage copies either
    (:func:`to_device`)."""
    return functools.partial(_pack_if_large, min_bytes, allocate)


def _pack_if_large(min_bytes: int, allocate: Callable[[int], torch.Tensor] | None, batch: dict[str, Any]) -> Any:
    if min_bytes > 0 and numeric_nbytes(batch) < min_bytes:
        return to_tensors(batch)
    return pack(batch, allocate)


def to_device(batch: dict[str, Any] | Packed, device: torch.device,
              non_blocking: bool) -> tuple[dict[str, Any], list[torch.Tensor]]:
    """``batch``'s tensors on ``device``, and the device tensors that own their memory (the
    ones to ``record_stream``; views share their base's memory block).

    A :class:`Packed` batch goes over in one copy of its block, then becomes views of the copy;
    a dict tensor by tensor."""
    if isinstance(batch, Packed):
        moved = batch.block.to(device, non_blocking=non_blocking)
        out = dict(batch.values)
        for slot in batch.slots:
            out[slot.name] = moved[slot.start:slot.stop].view(slot.torch_dtype).view(slot.shape)
        return out, [moved]
    out, owners = dict(batch), []
    for k, v in batch.items():
        if isinstance(v, torch.Tensor):
            out[k] = owner = v.to(device, non_blocking=non_blocking)
            owners.append(owner)
    return out, owners
