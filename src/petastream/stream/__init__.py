"""petastream.stream: framework-free sample ordering for streamed MDS datasets.

Shuffle (block permutation + windowed shuffle), partition over ranks and workers, batch plan,
resumable state. Pure numpy: importing it never imports torch, tensorflow or pyspark. The
PyTorch and TensorFlow loaders both build on :class:`StreamPlanner`.

Guarantees, for ``N`` samples, ``GBS = batch_size * world_size``:

* **Order.** Each epoch has one order G, a permutation of ``0..N-1`` that depends only on
  ``(shard_sizes, shuffle, seed, epoch, block_size, window)``: same inputs, same G; another
  epoch, another G; ``shuffle=False`` gives ``0..N-1``. Never on world size, rank or workers.
* **Elastic batches.** Global batch t is ``G[t*GBS:(t+1)*GBS]``; rank r's batch t is its r-th
  ``batch_size`` slice. Layouts with the same GBS see the same global batches.
* **Equal batch counts.** Every rank gets ``floor(N/GBS)`` batches (``drop_last=True``) or
  ``ceil(N/GBS)`` (``drop_last=False``); in the latter case a short last global batch is
  completed by wrapping to the start of G, so each sample appears once per epoch plus fewer
  than GBS padding repeats. ``world_size == 1`` never pads: the last batch is short.
* **Workers.** Worker w of W takes the rank's batches t with ``t % W == w``.
* **Bounded caches.** :func:`fit_to_cache` picks the window and block size whose working set
  fits a shard cache's limit (the loaders use it when the user picks neither).
* **Memory.** O(shards + blocks) metadata; O(window) per chunk; never O(N).
* **Resumption.** ``state_dict()`` stores the epoch and the global samples consumed; loading it
  continues with exactly the unseen samples, also after changing world size, batch size or
  worker count (see :mod:`petastream.stream.planner`).

Argument errors are :class:`~petastream.errors.InvalidArgumentError` (a ``ValueError``) /
:class:`~petastream.errors.InvalidArgumentTypeError` (a ``TypeError``); out-of-range batch or
window indices are :class:`~petastream.errors.OutOfRangeError` (an ``IndexError``).
"""

from petastream.stream.budget import CacheFit, fit_to_cache
from petastream.stream.grouping import ShardGroup, group_by_shard, shard_offsets
from petastream.stream.order import DEFAULT_BLOCK_SIZE, DEFAULT_WINDOW, EpochOrder
from petastream.stream.partition import count_batches, petastorm_shard_to_rank
from petastream.stream.plan import Chunk, EpochPlan
from petastream.stream.planner import STATE_FORMAT, STATE_VERSION, StreamPlanner

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "DEFAULT_WINDOW",
    "STATE_FORMAT",
    "STATE_VERSION",
    "CacheFit",
    "Chunk",
    "EpochOrder",
    "EpochPlan",
    "ShardGroup",
    "StreamPlanner",
    "count_batches",
    "fit_to_cache",
    "group_by_shard",
    "petastorm_shard_to_rank",
    "shard_offsets",
]
