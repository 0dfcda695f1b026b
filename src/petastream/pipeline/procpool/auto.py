"""``AutoExecutor``: worker processes where they pay, threads until they are ready.

Decoding in worker processes beside TensorFlow's per-element Python runs faster than in
threads competing with it for the interpreter lock (docs/benchmarks.md), but a fresh pool takes
about 1.5 s to start (interpreters importing numpy, pyarrow and petastream, each opening the
dataset): a freshly built ``tf.data`` pipeline waited that long for its first batch, and one
epoch of 300k 'tabular' rows through it ran at 0.19x the floor against 0.38x in threads.

So a pass runs on the pool only when the pool is ready: one parked by an earlier loader or
pass (a training loop's next epoch, compat's next context), or one whose workers have
finished starting. Otherwise the pass runs in threads while the pool starts beside it, and a
later pass takes it. The batches are the same either way (the same ``PassWork``, in plan
order). A pool that cannot start (no way to spawn, a source whose options do not pickle)
leaves threads for good, with a warning.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from petastream.pipeline.driver import PassRun
from petastream.pipeline.procpool.parking import ProcessExecutor
from petastream.pipeline.threads import ThreadExecutor
from petastream.pipeline.work import PassWork

__all__ = ["AutoExecutor", "processes_fit"]

log = logging.getLogger("petastream.pipeline")


def processes_fit(transform: Any, num_workers: int) -> bool:
    """Whether decoding in worker processes changes nothing a caller can see, so that a
    loader may choose them by itself: no user code runs in the workers (no ``transform``),
    two workers or more (one process beside the consumer gains little over one thread), and a
    POSIX system (the workers get their socket by inheritance)."""
    return transform is None and num_workers >= 2 and os.name == "posix"


class AutoExecutor:
    """Passes on ``processes`` when its pool is ready, else on ``threads`` (see the module doc)."""

    def __init__(self, processes: ProcessExecutor, threads: ThreadExecutor):
        self.processes: ProcessExecutor | None = processes
        self.threads = threads

    @property
    def num_workers(self) -> int:
        return self.threads.num_workers

    @property
    def worker_type(self) -> str:
        """Where the passes decode now: ``"process"``, or ``"thread"`` once processes failed."""
        return "thread" if self.processes is None else "process"

    @property
    def pool(self) -> Any:
        """The worker pool the processes run on (None: none held, or threads for good)."""
        return None if self.processes is None else self.processes.pool

    def prestart(self) -> None:
        """Start the pool now (it does not wait for the workers), so that it is starting while
        the caller builds the rest of its pipeline."""
        self._ready()

    def run(self, work: PassWork) -> PassRun:
        if self.processes is not None and self._ready():
            try:
                return self.processes.run(work)
            except Exception as e:  # noqa: BLE001 - threads do the same work
                self._give_up(e)
        run = self.threads.run(work)
        # The starting pool is parked when this pass ends, as a pool pass's would be: the next
        # pass (or another loader) takes it back, and a loader nobody closes (a tf.data graph
        # keeps its loader alive for good) holds no processes.
        return run if self.processes is None else _ParkingRun(run, self.processes)

    def _ready(self) -> bool:
        if self.processes is None:
            return False
        try:
            return self.processes.ready()
        except Exception as e:  # noqa: BLE001 - threads do the same work
            self._give_up(e)
            return False

    def _give_up(self, error: Exception) -> None:
        log.warning("decode worker processes did not start (%s: %s); decoding in threads instead "
                    "(pass worker_type='process' to see the error, or 'thread' to silence this)",
                    type(error).__name__, error)
        if self.processes is not None:
            self.processes.close()
        self.processes = None

    def close(self) -> None:
        if self.processes is not None:
            self.processes.close()


class _ParkingRun:
    """A threads pass that parks ``processes``' pool when it ends."""

    def __init__(self, run: PassRun, processes: ProcessExecutor):
        self._run, self._processes = run, processes

    def __iter__(self) -> _ParkingRun:
        return self

    def __next__(self) -> Any:
        return next(self._run)

    def close(self) -> None:
        self._run.close()
        self._processes.close()
