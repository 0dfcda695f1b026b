"""The ``tf.data.Dataset`` behind ``make_tf_dataset``: :mod:`petastream.tf` in Petastorm's shape.

Batches, dtypes, order and sharding are :class:`petastream.tf.TFLoader`'s (one copy of that
logic); this module only maps the reader's plan onto it and gives the elements Petastorm's form:

* elements are namedtuples of batched tensors (``inferred_schema_view``, or
  ``inferred_schema_transformed_view`` with a ``TransformSpec``), fields in the reader's order;
* variable-length arrays come as dense ``(batch, length)`` tensors and a batch whose arrays
  differ in length raises ``RuntimeError`` with Petastorm's message (``ragged="uniform"``);
  the native :mod:`petastream.tf` gives ``tf.RaggedTensor`` instead;
* ``prefetch=None`` is ``AUTOTUNE``; the shuffling queue is the loader's shuffle window;
* the dataset is a ``tf.compat.v1`` dataset (``DatasetV1Adapter``), so graph-mode code can call
  ``dataset.make_one_shot_iterator()``; it iterates eagerly in TF2 as well;
* after the context manager exits, reading raises Petastorm's "reader ... has stopped" error.
"""

from __future__ import annotations

from typing import Any

__all__ = ["make_tf_dataset"]


def _v1(dataset: Any) -> Any:
    try:
        from tensorflow.python.data.ops.dataset_ops import DatasetV1Adapter
    except ImportError:  # pragma: no cover - depends on the TensorFlow version
        return dataset
    return DatasetV1Adapter(dataset)


def make_tf_dataset(reader: Any, *, batch_size: int, prefetch: Any, shuffling_queue_capacity: Any) -> Any:
    import tensorflow as tf

    from petastream.compat.reader import _STOPPED
    from petastream.pipeline import MappedRun
    from petastream.tf import TFLoader

    def unless_stopped(batch: Any) -> Any:
        if reader.stopped:
            raise RuntimeError(_STOPPED)
        return batch

    Row = reader.Row

    class ReaderLoader(TFLoader):
        def _stage(self, run: Any) -> Any:
            return MappedRun(super()._stage(run), unless_stopped)

        def _element(self, columns: dict[str, Any]) -> Any:
            return Row(**columns)  # once per hand-over (a group of batches), not a .map per batch

    kwargs = reader.loader_kwargs(batch_size, shuffling_queue_capacity or 0)
    worker_type = "process" if reader.pool_type == "process" else "thread"
    loader = ReaderLoader(reader.dataset, ragged="uniform", worker_type=worker_type, **kwargs)
    if worker_type == "process":
        reader._workers.append(loader)  # the context manager's exit (reader.join) releases them
    dataset = loader.as_dataset()
    dataset = dataset.prefetch(tf.data.AUTOTUNE if prefetch is None else prefetch)
    return _v1(dataset)
