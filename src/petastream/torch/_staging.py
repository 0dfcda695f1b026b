"""Device staging: batches copied to the training device ahead of the step that uses them.

On CUDA, batch ``t+1``'s host-to-device copy is issued on a dedicated stream before batch ``t``
is handed out, so the copy runs while the model computes on ``t``: the default stream, where a
copy would queue behind the step, is left to the model. Handing a batch out makes the
consumer's current stream wait on the copy's event (a GPU-side wait; the host does not block)
and marks the tensors as used by that stream (``record_stream``), so the caching allocator
cannot give their memory to the next copy while the step still reads them. With pinned host
memory (``pin_memory``, the default for CUDA) the copies are truly asynchronous, and each
batch arrives packed in one block (:mod:`petastream.torch._packing`): one copy and one
``record_stream`` a batch, its tensors views of the copy.

Other devices (``mps``, ``xla``...) get a plain ``.to(device)``; ``cpu`` needs no stage.

The copies are issued by the thread that iterates the loader, not by the decode threads: on an
H200 with 16 cores, issuing them in the decode threads delivered 5-30% fewer rows/s (1M rows,
four paired comparisons, docs/benchmarks.md "GPU"): the decode threads set the CPU-side rate,
so work added to them lengthens every batch, while this thread otherwise waits on them.
"""

from __future__ import annotations

from typing import Any

import torch

from petastream.torch._packing import to_device

__all__ = ["DeviceRun"]


class DeviceRun:
    """Wrap a pass's run: each batch arrives on ``device``, copied one batch ahead."""

    def __init__(self, run: Any, device: torch.device):
        self._run, self._device = run, device
        self._cuda = device.type == "cuda"
        self._stream = torch.cuda.Stream(device) if self._cuda else None
        self._pending: tuple[dict[str, Any], Any, list[torch.Tensor]] | None = None

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
        return self._hand_out(*ready)

    def _issue(self, batch: dict[str, Any]) -> tuple[dict[str, Any], Any, list[torch.Tensor]]:
        if not self._cuda:
            return to_device(batch, self._device, False)[0], None, []
        with torch.cuda.stream(self._stream):
            moved, owners = to_device(batch, self._device, True)
            event = torch.cuda.Event()
            event.record(self._stream)
        return moved, event, owners

    def _hand_out(self, batch: dict[str, Any], event: Any, owners: list[torch.Tensor]) -> dict[str, Any]:
        if event is None:
            return batch
        current = torch.cuda.current_stream(self._device)
        current.wait_event(event)
        for t in owners:  # one per device allocation: the views of a packed batch share theirs
            t.record_stream(current)
        return batch

    def close(self) -> None:
        self._pending = None
        self._run.close()
