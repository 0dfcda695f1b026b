"""petastream.pipeline: the one epoch loop under every loader, as a composition of values.

A loader is ``(source, planner, work, executor, stages)``; each piece has its own module::

    Source (petastream.source)       what is read: an MDS dataset, Parquet, an Arrow table; opened
                                       by petastream.mix.open_source / petastream.sources
      over the I/O layer (storage/)  locations, the node's shard cache, a source's ShardStore
                                       (read-ahead, what is loaded, cache peers)
    StreamPlanner (stream/)          order, epochs, position; state_dict
    LoaderBudget (stream/budget.py)  what a bounded cache allows: window, chunk, read-ahead
    EpochDriver (driver.py)          what iter() means; num_epochs; supersession; errors
      per pass, a PassWork (work.py), run in each worker:
          decode (decode.py)         chunks of the plan -> bulk reads of the source -> batches
          transform                  the user's batch -> batch
          convert                    framework conversion (torch tensors; tf: parts.py)
          bad samples                on_error (onerror.py): failing rows found by bisecting the
                                       failed read or transform (isolate.py), skipped or raised
      run by an Executor (executor.py), items in plan order (ordered.py):
          threads.py                 ThreadExecutor: decode threads
          inline.py                  InlineExecutor: the iterating thread (compat's 'dummy' pool)
          procpool/                  ProcessExecutor: our own worker processes, shared-memory
                                       hand-over, parked between passes; AutoExecutor
          petastream.torch           DataLoaderExecutor: DataLoader worker processes
      paced (pacing.py) where other processes read the same order through a bounded cache
          (a source's optional capabilities: petastream.capabilities),
      wrapped by consumer-side stages (a list): staging.py (MappedRun), device staging
          (petastream.torch._staging), compat's collate and stop check
      and by loader.stats() (stats.py): the workers' reports taken off their items (innermost),
          batches, rows and waits counted (outermost)
      stages that keep state (the pacer, yours): stateful.py, carried in state_dict()["stages"]

:class:`~petastream.pipeline.loader.BatchLoader` composes them (numpy batches);
:mod:`petastream.torch`, :mod:`petastream.tf` and :mod:`petastream.compat` build their loaders
from values (a convert, an executor, work stages, stages) and keep no epoch loop of their
own: compat's ``make_reader`` too (its codec decoding, predicate and ``TransformSpec`` are the
``transform`` of a ``BatchLoader`` over a ``ParquetSource``, its rows made from the batches).
Nothing here imports a framework.
"""

from petastream.errors import SupersededError
from petastream.pipeline.driver import EpochDriver, PassRun
from petastream.pipeline.executor import Executor
from petastream.pipeline.loader import BatchLoader
from petastream.pipeline.staging import MappedRun
from petastream.pipeline.threads import ThreadExecutor, ThreadRun
from petastream.pipeline.work import PassWork

__all__ = ["BatchLoader", "EpochDriver", "Executor", "MappedRun", "PassRun", "PassWork", "SupersededError",
           "ThreadExecutor", "ThreadRun"]
