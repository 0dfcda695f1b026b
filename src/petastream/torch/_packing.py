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
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np
import torch

from petastream.columns.ops import widen_unsigned
from petastream.columns.strings import as_ragged_bytes
from petastream.torch._convert import to_tensors
from petastream.torch._jagged import JaggedBytes

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


class JaggedSlot(NamedTuple):
    """Where a jagged str/bytes column lies in a block: its ``values`` and ``offsets`` slots."""

    name: str
    values: Slot
    offsets: Slot
    utf8: bool


class Packed(NamedTuple):
    """A batch on its way to the device: ``block`` holds the numeric columns at ``slots`` and
    the jagged str/bytes columns at ``jagged``; ``values`` has every column in the batch's
    order (those in the block as None)."""

    block: torch.Tensor
    slots: list[Slot]
    values: dict[str, Any]
    jagged: tuple[JaggedSlot, ...] = ()


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


def pack(batch: dict[str, Any], allocate: Callable[[int], torch.Tensor] | None = None,
         jagged: Mapping[str, str] | None = None) -> Packed:
    """Decoded columns -> a :class:`Packed` batch: numeric arrays copied into one block from
    ``allocate(nbytes)`` (default :func:`pinned_block`), widened as :func:`to_torch` widens
    them, and the ``jagged`` str/bytes columns' bytes and offsets beside them (one transfer
    for all); the others converted by ``to_tensors`` (lists of strings, of tensors...)."""
    slots, rest, end = [], {}, 0
    arrays: dict[str, np.ndarray] = {}
    jagged_slots = []
    for name, kind in (jagged or {}).items():
        if name not in batch:
            continue
        ragged = as_ragged_bytes(name, batch[name], kind)
        pair = []
        for part, arr in (("values", ragged.values), ("offsets", ragged.offsets.astype(np.int64, copy=False))):
            key = f"{name}\0{part}"  # (a key no column has: NUL)
            arrays[key] = arr
            pair.append(Slot(key, end, end + arr.nbytes, arr.dtype, _torch_dtype(arr.dtype) or torch.uint8, arr.shape))
            end = _aligned(pair[-1].stop)
        jagged_slots.append(JaggedSlot(name, pair[0], pair[1], kind == "str"))
    for name, col in batch.items():
        if any(js.name == name for js in jagged_slots):
            continue
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
    for js in jagged_slots:
        for slot in (js.values, js.offsets):
            host[slot.start:slot.stop].view(slot.dtype)[:] = arrays[slot.name]
    converted = to_tensors(rest)
    return Packed(block, slots, {name: converted.get(name) for name in batch}, tuple(jagged_slots))


#: ``pin_memory=None`` (the default for a CUDA device) pins a batch only when its numeric columns
#: hold at least this many bytes; smaller batches go over from pageable memory. Pinning costs a
#: host allocation from the caching allocator and a copy into it per batch, which pays for
#: itself only once the transfer is long enough to overlap: below this, pageable copies
#: delivered more rows/s (benchmarks/gpu_pinning.py; docs/benchmarks.md "Pinning by size").
PIN_MIN_BYTES = 4 << 20


def numeric_nbytes(batch: dict[str, Any], jagged: Mapping[str, str] | None = None) -> int:
    """The bytes a batch's numeric columns (and those of its ``jagged`` columns read as
    ``Ragged`` bytes) would take in a packed block (before widening)."""
    n = sum(col.nbytes for col in batch.values() if isinstance(col, np.ndarray) and col.dtype != object)
    for name in jagged or ():
        col = batch.get(name)
        values = getattr(col, "values", None)  # Ragged (objects: not counted, a guess is no cheaper)
        if isinstance(values, np.ndarray):
            n += values.nbytes + col.offsets.nbytes  # type: ignore[union-attr]
    return n


def pack_from(min_bytes: int, allocate: Callable[[int], torch.Tensor] | None = None,
              jagged: Mapping[str, str] | None = None) -> Callable[[dict[str, Any]], Any]:
    """The decode threads' conversion for a CUDA device: a batch whose numeric columns hold at
    least ``min_bytes`` is :func:`pack`-ed into one block from ``allocate`` (default: pinned), a
    smaller one becomes pageable tensors (``to_tensors``); the device stage copies either
    (:func:`to_device`). ``jagged``: the str/bytes columns handed out as ``JaggedBytes``."""
    return functools.partial(_pack_if_large, min_bytes, allocate, dict(jagged or {}))


def _pack_if_large(min_bytes: int, allocate: Callable[[int], torch.Tensor] | None, jagged: dict[str, str],
                   batch: dict[str, Any]) -> Any:
    if min_bytes > 0 and numeric_nbytes(batch, jagged) < min_bytes:
        return to_tensors(batch, jagged)
    return pack(batch, allocate, jagged)


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
        for js in batch.jagged:
            v, o = js.values, js.offsets
            out[js.name] = JaggedBytes(moved[v.start:v.stop], moved[o.start:o.stop].view(torch.int64), js.utf8)
        return out, [moved]
    out, owners = dict(batch), []
    for k, v in batch.items():
        if isinstance(v, torch.Tensor):
            out[k] = owner = v.to(device, non_blocking=non_blocking)
            owners.append(owner)
        elif isinstance(v, JaggedBytes):
            out[k] = moved_pair = v.to(device, non_blocking=non_blocking)
            owners += [moved_pair.values, moved_pair.offsets]
    return out, owners
