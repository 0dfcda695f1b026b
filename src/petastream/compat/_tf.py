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

Scripts open a context per epoch (``with converter.make_tf_dataset(...) as ds: model.fit(ds,
...)``), and tracing a ``tf.data`` graph costs ~0.1 s: a fifth of an epoch of 1M 'tabular'
rows. So a context's graph is parked when it exits and the next context whose loader has the
same :meth:`~petastream.tf.TFLoader.pipeline_key` (same columns, types, batch grouping and
cardinality), ``prefetch`` and graph (eager, or the same ``tf.Graph``) takes it over, its passes then started by the new context's
loader. A parked graph holds no loader, dataset or worker; while parked, iterating it raises
the stopped-reader error as before.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from petastream.pipeline.processes import processes_fit

__all__ = ["make_tf_dataset"]

_PARKED_MAX = 8  # graphs kept for later contexts (each a few hundred KB of traced functions)
_parked: OrderedDict[tuple[Any, ...], list[tuple[_Bound, Any]]] = OrderedDict()
_parked_lock = threading.Lock()


def _v1(dataset: Any) -> Any:
    try:
        from tensorflow.python.data.ops.dataset_ops import DatasetV1Adapter
    except ImportError:  # pragma: no cover - depends on the TensorFlow version
        return dataset
    return DatasetV1Adapter(dataset)


class _Bound:
    """What a graph's passes start from: the loader of the context holding the graph, or,
    parked, the stopped-reader error."""

    def __init__(self) -> None:
        self.start: Any = None

    def __call__(self) -> Any:
        if self.start is None:
            from petastream.compat.reader import _STOPPED

            raise RuntimeError(_STOPPED)
        return self.start()


def _take(key: tuple[Any, ...]) -> tuple[_Bound, Any] | None:
    with _parked_lock:
        graphs = _parked.get(key)
        if not graphs:
            return None
        entry = graphs.pop()
        if not graphs:
            del _parked[key]
        return entry


def _park(key: tuple[Any, ...], bound: _Bound, dataset: Any) -> None:
    bound.start = None
    with _parked_lock:
        _parked.setdefault(key, []).append((bound, dataset))
        _parked.move_to_end(key)
        while sum(len(g) for g in _parked.values()) > _PARKED_MAX:
            oldest = next(iter(_parked))
            _parked[oldest].pop(0)
            if not _parked[oldest]:
                del _parked[oldest]


def _worker_type(reader: Any) -> str:
    """Where the reader's workers decode: in worker processes for ``"process"``, and for
    ``"thread"`` (Petastorm's default) too where that changes nothing a script can see: no
    ``TransformSpec`` (no user code runs in the workers), two workers or more, a POSIX system.
    The batches are the same; decoded beside TensorFlow's per-element Python instead of
    competing with it for the interpreter lock, they come faster (1.2-1.8x on numeric rows, up
    to 1.3x with str/bytes columns: docs/benchmarks.md).
    A ``TransformSpec`` keeps threads, so its function runs in this process as under
    Petastorm's thread pool; ``"dummy"`` is one thread."""
    if reader.pool_type == "process":
        return "process"
    if reader.pool_type == "thread" and processes_fit(reader.transform_spec, reader.workers):
        return "process"
    return "thread"


def make_tf_dataset(reader: Any, *, batch_size: int, prefetch: Any, shuffling_queue_capacity: Any) -> Any:
    import tensorflow as tf

    from petastream.compat._tf_loader import ReaderLoader

    kwargs = reader.loader_kwargs(batch_size, shuffling_queue_capacity or 0)
    worker_type = _worker_type(reader)
    loader = ReaderLoader(reader, ragged="uniform", worker_type=worker_type, **kwargs)
    if worker_type == "process":
        reader._workers.append(loader)  # the context manager's exit (reader.join) releases them
    start = loader._begin()
    # A dataset belongs to the graph it was built in: eager code and each tf.Graph keep their own.
    scope = None if tf.executing_eagerly() else tf.compat.v1.get_default_graph()
    key = (loader.pipeline_key(), reader.Row, prefetch, scope)
    entry = _take(key)
    if entry is None:
        bound = _Bound()
        dataset = loader._pipeline(bound)
        entry = bound, _v1(dataset.prefetch(tf.data.AUTOTUNE if prefetch is None else prefetch))
    bound, dataset = entry
    bound.start = start
    reader._on_join.append(lambda: _park(key, bound, dataset))
    return dataset
