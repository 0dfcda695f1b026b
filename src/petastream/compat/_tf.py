"""``make_tf_dataset``'s ``tf.data.Dataset``: a reader's plan mapped onto :class:`petastream.tf.TFLoader`.

Elements are the reader's namedtuples of batched tensors (``inferred_schema_view``, or
``inferred_schema_transformed_view`` with a ``TransformSpec``); variable-length arrays come
dense, and a batch whose arrays differ in length raises Petastorm's ``RuntimeError``
(``ragged="uniform"``); ``prefetch=None`` is ``AUTOTUNE``; the dataset is a ``tf.compat.v1``
one (graph code calls ``make_one_shot_iterator()``); after the context exits, reading raises
Petastorm's stopped-reader error. A context per epoch reuses the last one's graph (``GraphCache``).
Over Parquet read in place, without a ``TransformSpec`` no transform runs per batch (the
loader densifies arrays and casts ``dtype`` itself: ``own_arrays``), so batches reach
TensorFlow in groups, as over an MDS dataset.
"""

from __future__ import annotations

from typing import Any

from petastream.pipeline import MappedRun, PassRun
from petastream.pipeline.procpool import processes_fit

__all__ = ["make_tf_dataset"]

_graphs: Any = None  # the GraphCache, made with the first dataset (it imports TensorFlow)


def _worker_type(reader: Any) -> str:
    """Worker processes for ``"process"``, and for ``"thread"`` (Petastorm's default) where that
    changes nothing a script can see (:func:`processes_fit`: no ``TransformSpec``, POSIX): the
    same batches, faster beside TensorFlow's per-element Python (docs/benchmarks.md). With
    ``workers_count=1`` too, as ``petastream.tf.dataset``'s default for one worker: one decode
    thread serializes with TensorFlow's iterator on the interpreter lock. ``"dummy"`` is one
    thread."""
    fits = reader.pool_type == "thread" and processes_fit(reader.transform_spec, max(reader.workers, 2))
    return "process" if reader.pool_type == "process" or fits else "thread"


def make_tf_dataset(reader: Any, *, batch_size: int, prefetch: Any, shuffling_queue_capacity: Any) -> Any:
    global _graphs
    import tensorflow as tf
    from tensorflow.python.data.ops.dataset_ops import DatasetV1Adapter

    from petastream.compat.reader import stopped_error
    from petastream.tf import GraphCache, TFLoader

    def unless_stopped(run: PassRun) -> PassRun:
        return MappedRun(run, lambda batch: batch if not reader.stopped else _raise(stopped_error()))
    worker_type = _worker_type(reader)
    loader = TFLoader(reader.dataset, ragged="uniform", worker_type=worker_type, element=reader.Row,
                      **reader.loader_kwargs(batch_size, _queue_rows(shuffling_queue_capacity), own_arrays=True))
    loader.stages.append(unless_stopped)
    if loader.worker_type == "process":
        reader.worker_loaders.append(loader)  # the context's exit (reader.join) releases them
    _graphs = _graphs or GraphCache()
    # A dataset belongs to the graph it was built in: eager code and each tf.Graph keep their own.
    scope = (reader.Row, prefetch, None if tf.executing_eagerly() else tf.compat.v1.get_default_graph())
    dataset, release = _graphs.bind(loader, scope, lambda ds: DatasetV1Adapter(
        ds.prefetch(tf.data.AUTOTUNE if prefetch is None else prefetch)), stopped_error)
    reader.on_join(release)
    return dataset



def _queue_rows(shuffling_queue_capacity: Any) -> int:
    """The shuffling queue as the reader's plan counts it. Petastorm's ``make_tf_dataset`` runs
    ``dataset.shuffle(capacity)`` on single rows, and a buffer of one row is no shuffle (its
    torch loaders' queue of one does shuffle: it holds a whole row group)."""
    capacity = int(shuffling_queue_capacity or 0)
    return capacity if capacity > 1 else 0


def _raise(error: Exception) -> Any:
    raise error
