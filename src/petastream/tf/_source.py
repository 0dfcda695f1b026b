"""A ``tf.data`` source that takes one whole batch per Python call.

``tf.data.Dataset.from_generator`` does what is needed (one Python iterator per pass over the
dataset, closed when TensorFlow's iterator goes away) but re-checks every element in Python
(``nest`` flattening, a conversion and a dtype/shape check per component): about 100 us per
call. Our batches are already flat numpy arrays of exactly the declared dtypes and shapes
(:meth:`ColumnPlan.to_parts` guarantees it), so :func:`batch_source` builds the same pipeline
from the same op, ``GeneratorDataset``, with a bare ``numpy_function`` per batch: init starts a
pass, next returns its next batch (``StopIteration`` ends the pass), finalize closes it. Measured
1.2-1.3x the rows/s of ``from_generator`` on the same batches. Where the op's Python wrapper is
not importable (a TensorFlow that moved it), it falls back to ``from_generator``.

Even bare, the call costs 100-200 us a batch. With ``group > 1`` one call hands over a
:class:`~petastream.pipeline.work.BatchGroup`: the rows of several consecutive batches of one
length, decoded and converted at once (no per-batch Python in the decode threads either),
each part shaped ``[batches, rows, ...]``. The element's structure (dict or namedtuple) is
assembled once per group and ``unbatch`` (C++) cuts the batches apart: no function runs per
batch inside tf.data either. Measured on an in-memory source of 300k rows in groups of 16,
eager iteration: 165-173 us a batch, against 294-334 us for the slices + ``flat_map`` +
per-batch ``map`` this replaced (the floor, ``tf.convert_to_tensor`` in a loop: 185 us). That
needs every part to have a fixed row shape (:func:`groupable`: dense and string columns).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import tensorflow as tf

try:  # the op behind from_generator; private, hence the fallback
    from tensorflow.python.data.ops.from_generator_op import _GeneratorDataset
except ImportError:  # pragma: no cover - depends on the TensorFlow version
    _GeneratorDataset = None

__all__ = ["batch_source"]


class _Passes:
    """Live Python iterators, one per TensorFlow iterator over the dataset."""

    def __init__(self, start: Callable[[], Iterator[tuple[np.ndarray, ...]]]):
        self.start = start
        self.live: dict[int, Iterator[tuple[np.ndarray, ...]]] = {}
        self.ids = itertools.count()
        self.lock = threading.Lock()

    def open(self) -> np.int64:
        with self.lock:
            key = next(self.ids)
            self.live[key] = self.start()
        return np.int64(key)

    def next(self, key: np.int64) -> tuple[np.ndarray, ...]:
        return next(self.live[int(key)])  # StopIteration -> OutOfRange -> end of the pass

    def close(self, key: np.int64) -> np.int64:
        with self.lock:
            it = self.live.pop(int(key), None)
        close = getattr(it, "close", None)
        if close is not None:
            close()  # a generator's finally: stops the loader's decode threads
        return np.int64(0)


def groups_supported() -> bool:
    """Whether this TensorFlow has the op the batch-group path is built from (else one batch
    per call through ``from_generator``)."""
    return _GeneratorDataset is not None


def groupable(parts: tuple[tf.TensorSpec, ...]) -> bool:
    """Whether batches of these parts can be concatenated row-wise (fixed row shapes; the
    caller rules out parts that are not one entry per row, such as ragged row splits). A
    scalar part is one per hand-over (packed strings' bytes), not per batch."""
    return all(s.shape.rank == 0 or s.shape.rank is not None and s.shape[1:].is_fully_defined()
               for s in parts)


def batch_source(start: Callable[[], Iterator[tuple[np.ndarray, ...]]], parts: tuple[tf.TensorSpec, ...],
                 assemble: Callable[..., Any], element_spec: Any, group: int = 1) -> tf.data.Dataset:
    """Elements ``assemble(*batch)`` for each tuple ``batch`` that ``start()`` yields.

    ``start`` is called once per pass over the dataset (each ``iter(ds)``); the tuples must
    match ``parts`` (dtype and shape) exactly: nothing re-checks them on this path. ``group >
    1``: ``start()`` yields :class:`~petastream.pipeline.work.BatchGroup` items instead (each
    part holding the rows of several batches of one length, then ``[batches, rows]``), which
    the graph cuts apart.
    """
    if _GeneratorDataset is None:  # pragma: no cover
        return tf.data.Dataset.from_generator(start, output_signature=parts).map(assemble)
    passes = _Passes(start)
    dtypes = [s.dtype for s in parts]
    if group > 1:
        return _grouped(passes, parts, assemble, element_spec)

    def fetch(key: tf.Tensor) -> Any:
        return tf.numpy_function(passes.next, [key], dtypes, stateful=True)

    return _per_pass(passes, fetch, parts, assemble, element_spec)


def _per_pass(passes: _Passes, fetch: Callable[[tf.Tensor], Any], specs: tuple[tf.TensorSpec, ...],
              finish: Callable[..., Any], element_spec: Any) -> tf.data.Dataset:
    """A ``GeneratorDataset`` per pass: init opens a pass, next runs ``fetch(key)`` (a
    ``numpy_function``), gives its tensors the shapes of ``specs`` and returns ``finish`` of
    them; finalize closes the pass."""

    @tf.autograph.experimental.do_not_convert
    def init_fn(_: Any) -> tf.Tensor:
        return tf.numpy_function(passes.open, [], tf.int64, stateful=True)

    @tf.autograph.experimental.do_not_convert
    def next_fn(key: tf.Tensor) -> Any:
        flat = fetch(key)
        for tensor, spec in zip(flat, specs):
            tensor.set_shape(spec.shape)
        return finish(*flat)

    @tf.autograph.experimental.do_not_convert
    def finalize_fn(key: tf.Tensor) -> tf.Tensor:
        return tf.numpy_function(passes.close, [key], tf.int64, stateful=True)

    @tf.autograph.experimental.do_not_convert
    def one_pass(dummy: tf.Tensor) -> tf.data.Dataset:
        return _GeneratorDataset(dummy, init_fn, next_fn, finalize_fn, element_spec)

    # As from_generator: the flat_map gives every iterator (and every repetition) a new pass.
    return tf.data.Dataset.from_tensors(np.int64(0)).flat_map(one_pass)


def _grouped(passes: _Passes, parts: tuple[tf.TensorSpec, ...], assemble: Callable[..., Any],
             element_spec: Any) -> tf.data.Dataset:
    # Each part comes as [batches, rows, ...] (a scalar part as it is): assemble the elements'
    # structure once per group (set_shape, dicts: no per-batch function call) and let unbatch
    # (C++) cut the batches.
    groups = tuple(s if s.shape.rank == 0 else tf.TensorSpec([None, *s.shape], s.dtype) for s in parts)
    dtypes = [s.dtype for s in parts]

    def fetch(key: tf.Tensor) -> Any:
        return tf.numpy_function(passes.next, [key], dtypes, stateful=True)

    group_spec = tf.nest.map_structure(lambda s: tf.TensorSpec([None, *s.shape], s.dtype), element_spec)
    return _per_pass(passes, fetch, groups, assemble, group_spec).unbatch()
