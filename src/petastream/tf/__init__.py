"""TensorFlow adapter: an MDS dataset as a ``tf.data.Dataset`` of whole batches.

``petastream.tf.dataset(url, batch_size=1024, shuffle=True, seed=1)`` streams an MDS dataset
(ours or Mosaic-written) as ``dict[str, tf.Tensor]`` batches, through the same bulk reader,
order and resumable state as :mod:`petastream.torch` (:class:`~petastream.pipeline.BatchLoader`):

* **fed in bulk**: decode threads turn each batch into flat numpy columns; ``tf.data`` takes a
  whole batch per Python call (one generator step per batch, not per row; see
  :mod:`petastream.tf._source`);
* **types** (see :mod:`petastream.tf._columns`): numeric columns keep their dtype (``uint16 ->
  int32``, ``uint32``/``uint64 -> int64``); ``str``/``bytes``/decimal -> ``tf.string``;
  fixed-shape arrays -> dense ``(batch, *shape)``; variable-length arrays -> ``tf.RaggedTensor``.
  ``element_spec`` is exact: the batch dimension is ``None``, or ``batch_size`` when every batch
  is full (``drop_last``, or several ranks); Spark booleans (stored as uint8, recorded in
  ``petastream.json``) are ``tf.bool`` unless ``logical_types=False``;
* **order**: every sample exactly once per epoch, the same order for the same seed, a new
  order each epoch; ``rank``/``world_size`` (or a ``tf.distribute.InputContext``) split every
  epoch into disjoint parts with the same number of batches on every rank;
* **resumption**: ``loader.state_dict()`` counts a batch as consumed when it is handed to
  TensorFlow. The loader's dataset does not read ahead (tf.data's automatic prefetch injection
  is off; the decode threads already keep batches ready), so in a plain loop over it the state
  after ``k`` batches resumes at batch ``k+1``, also with another ``num_workers`` or
  ``world_size``. Stages that read ahead (``device=``, your ``.prefetch()``, a ``.map()`` that
  tf.data parallelizes, as in ``model.fit(ds.map(...))``) hold batches your loop has not seen,
  and those count too: there, checkpoint with ``loader.state_dict(steps=k)``, the position
  after the first ``k`` batches of the current iteration, exact whatever was read ahead;
* **workers**: without a ``transform`` (``worker_type="auto"``, the default; POSIX), the
  decode runs in ``num_workers`` worker processes, one included, that hand batches over in shared
  memory (str/bytes as bytes and offsets, cut apart in the graph), out of the way of
  TensorFlow's Python per element: 1.2-2x the rows/s of threads on numeric rows in this
  project's benchmarks, about level with strings (docs/benchmarks.md). Otherwise, or with
  ``worker_type="thread"``, in threads; ``worker_type="process"`` insists on processes;
* **device**: ``device="/gpu:0"`` prefetches batches onto that device with
  ``tf.data.experimental.prefetch_to_device``. Tested with ``"/cpu:0"`` only; unmeasured on GPU.

Keras: ``model.fit(ds.map(lambda b: (b["features"], b["label"])), epochs=3)``; each Keras epoch
is one pass in a new order. Distributed::

    def dataset_fn(ctx):
        return petastream.tf.dataset(url, ctx.get_per_replica_batch_size(1024), shuffle=True,
                                     seed=1, input_context=ctx, num_epochs=None)
    dist = strategy.distribute_datasets_from_function(dataset_fn)
"""

from __future__ import annotations

from petastream.tf._columns import ColumnPlan, NonUniformArrayError
from petastream.tf._graph import GraphCache
from petastream.tf._loader import TFLoader, dataset
from petastream.tf._source import batch_source, groups_supported

__all__ = ["TFLoader", "dataset", "ColumnPlan", "GraphCache", "NonUniformArrayError", "batch_source",
           "groups_supported"]
