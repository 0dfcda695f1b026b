"""petastream's own decode worker processes, with a shared-memory hand-over.

For consumers that hold the GIL (TensorFlow's per-element Python): decode runs beside them in
fresh interpreters instead of competing with them in threads.

* :mod:`~petastream.pipeline.procpool.pool`: :class:`WorkerPool` (the processes, their
  sockets and arenas) and :class:`PoolRun` (one pass on it, in plan order);
* :mod:`~petastream.pipeline.procpool.arena`: the shared-memory slots items travel in;
* :mod:`~petastream.pipeline.procpool.worker`: the worker process (``python -m``);
* :mod:`~petastream.pipeline.procpool.parking`: :class:`ProcessExecutor`, a loader's pool,
  parked between passes for the next pass or loader;
* :mod:`~petastream.pipeline.procpool.auto`: :class:`AutoExecutor`, the pool where it is
  ready, threads until then.
"""

from petastream.pipeline.procpool.auto import AutoExecutor, processes_fit
from petastream.pipeline.procpool.parking import ProcessExecutor, shutdown_idle
from petastream.pipeline.procpool.pool import PoolRun, WorkerPool

__all__ = ["AutoExecutor", "PoolRun", "ProcessExecutor", "WorkerPool", "processes_fit", "shutdown_idle"]
