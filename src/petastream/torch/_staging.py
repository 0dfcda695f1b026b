"""Device staging: batches copied to the training device ahead of the step that uses them.

On CUDA the host-to-device copies run on a dedicated stream, so they overlap the model's work
on the consumer's stream. Two placements, one hand-out:

* :class:`WorkerCopies` (thread workers, the default for CUDA): each decode thread issues its
  batch's copies right after converting it, so the copies also leave the thread that iterates
  the loader, which on a small-batch epoch is the bottleneck (measured on an H200: per-batch
  copy calls in that thread cut the delivered rate to about half the CPU-side rate).
* :class:`DeviceRun` (worker processes, whose batches reach this process first, and non-CUDA
  devices): the consumer's thread issues batch ``t+1``'s copy before handing out batch ``t``.

Handing a batch out makes the consumer's current stream wait on the copy's event (a GPU-side
wait; the host does not block) and marks the tensors as used by that stream (``record_stream``),
so the caching allocator cannot give their memory to another copy while the step still reads
them. With pinned host memory (``pin_memory``, the default for CUDA) the copies are truly
asynchronous. Other devices (``mps``, ``xla``...) get a plain ``.to(device)``; ``cpu`` needs no
stage.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["DeviceRun", "WorkerCopies"]


def _move(batch: dict[str, Any], device: torch.device, non_blocking: bool) -> dict[str, Any]:
    return {k: v.to(device, non_blocking=non_blocking) if isinstance(v, torch.Tensor) else v
            for k, v in batch.items()}


def _hand_out(device: torch.device, batch: dict[str, Any], event: Any) -> dict[str, Any]:
    if event is None:
        return batch
    current = torch.cuda.current_stream(device)
    current.wait_event(event)
    for v in batch.values():
        if isinstance(v, torch.Tensor):
            v.record_stream(current)
    return batch


def _copy_ahead(convert: Callable[[Any], dict[str, Any]] | None, device: torch.device,
                stream: Any, batch: Any) -> tuple[dict[str, Any], Any]:
    """In a decode thread: convert, then issue the copies on the side stream."""
    batch = batch if convert is None else convert(batch)
    with torch.cuda.stream(stream):
        moved = _move(batch, device, True)
        event = torch.cuda.Event()
        event.record(stream)
    return moved, event


class WorkerCopies:
    """The decode threads copy each batch to ``device`` (CUDA) as they finish it.

    Built per pass in the consumer's thread: ``device="cuda"`` means that thread's current
    device, which the decode threads (their own current device is 0) are told explicitly.
    Device memory holds the batches queued for the consumer (``prefetch`` per worker) and the
    ones being decoded, as host memory would.
    """

    def __init__(self, device: torch.device):
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        self.device = device
        self.stream = torch.cuda.Stream(device)

    def convert(self, convert: Callable[[Any], dict[str, Any]] | None) -> Callable[[Any], Any]:
        """The workers' convert, followed by the copy."""
        return functools.partial(_copy_ahead, convert, self.device, self.stream)

    def hand_out(self, item: tuple[dict[str, Any], Any]) -> dict[str, Any]:
        """In the consumer's thread: the batch, ordered after its copy on the current stream."""
        return _hand_out(self.device, *item)


class DeviceRun:
    """Wrap a pass's run: each batch arrives on ``device``, copied one batch ahead."""

    def __init__(self, run: Any, device: torch.device):
        self._run, self._device = run, device
        self._cuda = device.type == "cuda"
        self._stream = torch.cuda.Stream(device) if self._cuda else None
        self._pending: tuple[dict[str, Any], Any] | None = None

    def __iter__(self) -> DeviceRun:
        return self

    def __next__(self) -> dict[str, Any]:
        if self._pending is None:
            self._pending = self._issue(next(self._run))
        ready = self._pending
        try:
            self._pending = self._issue(next(self._run))  # t+1's copy overlaps t's step
        except StopIteration:
            self._pending = None
        return _hand_out(self._device, *ready)

    def _issue(self, batch: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        if not self._cuda:
            return _move(batch, self._device, False), None
        return _copy_ahead(None, self._device, self._stream, batch)

    def close(self) -> None:
        self._pending = None
        self._run.close()
