"""petastream.pipeline: the one epoch loop under every loader, as composable stages.

The data path of one iteration, stage by stage (each in its own module)::

    StreamPlanner (stream/)         order, epochs, position; state_dict
      └ EpochDriver (driver.py)     what iter() means; num_epochs; supersession; errors
          └ per pass, in each worker (work.py):
                decode (decode.py)     chunks of the plan → bulk reads → batches; read-ahead
                transform              the user's batch -> batch
                convert                framework conversion (torch tensors, tf parts: parts.py)
          └ parallel execution       threads.py (ThreadRun); processes.py (worker processes
                                       of our own, shared-memory hand-over: arena.py), or
                                       DataLoader worker processes (petastream.torch._processes)
          └ consumer-side stages     staging.py (MappedRun), device staging
                                       (petastream.torch._staging, tf prefetch_to_device)

:class:`~petastream.pipeline.loader.BatchLoader` composes them (numpy batches);
:mod:`petastream.torch`, :mod:`petastream.tf` and :mod:`petastream.compat` extend it with their
conversion, executor and stages, and keep no epoch loop of their own. Nothing here imports a
framework.
"""

from petastream.pipeline.driver import EpochDriver, PassRun, SupersededError
from petastream.pipeline.loader import BatchLoader
from petastream.pipeline.staging import MappedRun
from petastream.pipeline.threads import ThreadRun
from petastream.pipeline.work import PassWork

__all__ = ["BatchLoader", "EpochDriver", "MappedRun", "PassRun", "PassWork", "SupersededError", "ThreadRun"]
