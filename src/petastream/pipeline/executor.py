"""``Executor``: what runs a pass's work in parallel, one protocol for every kind of worker.

A loader hands its executor one :class:`~petastream.pipeline.work.PassWork` per pass and gets a
:class:`~petastream.pipeline.driver.PassRun`: the pass's items in plan order (checked by
:class:`~petastream.pipeline.ordered.PassOrder`), a worker's exception re-raised with its own
type, a dead worker reported within seconds, and ``close()`` stopping the workers promptly.
Between passes an executor keeps what pays to keep (a process pool is parked for the next
pass); :meth:`Executor.close` gives it up.

Implementations:

* :class:`~petastream.pipeline.threads.ThreadExecutor`: decode threads in this process (numpy,
  zstd and Arrow release the GIL);
* :class:`~petastream.pipeline.procpool.ProcessExecutor`: petastream's own worker processes
  with a shared-memory hand-over, parked between passes (TensorFlow);
  :class:`~petastream.pipeline.procpool.AutoExecutor` picks it or threads per pass, by whether
  its processes are ready;
* :class:`petastream.torch.DataLoaderExecutor`: ``torch.utils.data.DataLoader`` worker
  processes (a Python ``transform``, object columns).
"""

from __future__ import annotations

from typing import Protocol

from petastream.pipeline.driver import PassRun
from petastream.pipeline.work import PassWork

__all__ = ["Executor"]


class Executor(Protocol):
    """Runs passes; see the module doc."""

    @property
    def num_workers(self) -> int:
        """Workers a pass is split over (worker ``w`` of these produces items ``w, w+W, ...``)."""
        ...

    @property
    def worker_type(self) -> str:
        """``"thread"`` or ``"process"``: where the passes decode (now)."""
        ...

    def run(self, work: PassWork) -> PassRun:
        """Start a pass over ``work``; its items in plan order."""
        ...

    def close(self) -> None:
        """Give up the workers kept between passes (a later :meth:`run` starts anew)."""
        ...
