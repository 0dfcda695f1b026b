"""``petastorm.tf_utils``: ``make_petastorm_dataset`` and ``tf_tensors`` over compat's readers.

``make_petastorm_dataset(reader)`` is a ``tf.data.Dataset`` of the reader's namedtuples: one row
per element for :func:`~petastream.compat.make_reader` (shapes and dtypes from its Unischema,
variable dimensions as None), one batch per element for
:func:`~petastream.compat.make_batch_reader` (the reader's own batches; dtypes and shapes
from its first batch, read once more to learn them). Values TensorFlow has no type for are
cast as Petastorm casts them: ``Decimal`` -> its normalized string, a ``datetime64`` value ->
its int64 count (days for a date, microseconds for a timestamp, as Petastorm's pass-through
gives TensorFlow), arrays of them and of dates -> int64 nanoseconds since the epoch, uint16/uint32 -> int32/int64, strings -> ``tf.string``; a None
is Petastorm's ``RuntimeError`` (filter such rows with a predicate).

``tf_tensors(reader)`` is the next element of that dataset as tensors (a graph's one-shot
iterator, or eagerly the next element); its shuffling queue is refused (shuffle the dataset:
``make_petastorm_dataset(reader).shuffle(n)``).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import numpy as np

from petastream.errors import InvalidArgumentError

__all__ = ["make_petastorm_dataset", "tf_tensors"]

_EPOCH = np.datetime64("1970-01-01T00:00:00", "ns")


def _sanitize(name: str, value: Any) -> Any:
    if value is None:
        raise RuntimeError(f'Encountered "{name}"=None. Tensorflow does not support None values as a tensor.'
                           "Consider filtering out these rows using a predicate.")
    if isinstance(value, Decimal):
        return str(value.normalize())
    if isinstance(value, np.datetime64):
        return value.astype(np.int64)  # Petastorm passes a scalar through: TF takes its count (days, us)
    if isinstance(value, np.ndarray) and np.issubdtype(value.dtype, np.datetime64):
        return (value.astype("datetime64[ns]") - _EPOCH).astype(np.int64)
    if isinstance(value, np.ndarray):
        if value.dtype == np.uint16:
            return value.astype(np.int32)
        if value.dtype == np.uint32:
            return value.astype(np.int64)
        if value.dtype == object and value.size:
            first = value.flat[0]
            if isinstance(first, bool) or (first is None and any(isinstance(v, bool) for v in value.flat)):
                return value.astype(bool)  # booleans holding nulls: Petastorm's tf.bool makes None False
            if isinstance(first, Decimal):
                return np.array([str(v.normalize()) for v in value.flat], dtype=object).reshape(value.shape)
            if isinstance(first, datetime.date):
                return np.array([np.datetime64(v, "ns") for v in value.flat]).astype(np.int64) - _EPOCH.astype(np.int64)
            if isinstance(first, np.ndarray):
                from petastream.pipeline.parts import NonUniformArrayError

                raise NonUniformArrayError(f'"{name}" holds arrays of different shapes in one batch, which a '
                                           "tensor cannot hold; read it with make_reader (one row per element) "
                                           "or leave it out")
    return value


def _tf_dtype(value: Any) -> Any:
    import tensorflow as tf

    array = np.asarray(value)
    if array.dtype.kind in "USO":
        return tf.string
    return tf.as_dtype(array.dtype)


def _row_signature(schema: Any) -> tuple[Any, ...]:
    import tensorflow as tf

    specs = []
    for field in schema.fields.values():
        t = field.numpy_dtype
        if t is Decimal or (isinstance(t, type) and issubclass(t, (np.str_, np.bytes_, str, bytes))):
            dtype = tf.string
        elif t is np.datetime64:
            dtype = tf.int64
        elif t in (np.uint16,):
            dtype = tf.int32
        elif t in (np.uint32,):
            dtype = tf.int64
        else:
            dtype = tf.as_dtype(np.dtype(t))
        specs.append(tf.TensorSpec(shape=tuple(field.shape or ()), dtype=dtype))
    return tuple(specs)


def _sanitized(rows: Iterator[Any]) -> Iterator[tuple[Any, ...]]:
    for row in rows:
        yield tuple(_sanitize(k, v) for k, v in zip(row._fields, row))


def make_petastorm_dataset(reader: Any) -> Any:
    """A ``tf.data.Dataset`` of the reader's namedtuples (see the module doc)."""
    import tensorflow as tf

    if getattr(reader, "ngram", None) is not None:
        raise InvalidArgumentError("make_petastorm_dataset: NGram readers are not supported by petastream.compat; read the windows from the reader (for window in reader) and build tensors from them")
    if getattr(reader, "is_batched_reader", True) is False:
        row_type = reader.schema._get_namedtuple()
        signature = _row_signature(reader.schema)
    else:
        probe = iter(reader)
        first = next(probe)
        probe.close()
        row_type = type(first)
        signature = tuple(tf.TensorSpec(shape=(None, *np.asarray(v).shape[1:]), dtype=_tf_dtype(_sanitize(k, v)))
                          for k, v in zip(first._fields, first))
    dataset = tf.data.Dataset.from_generator(lambda: _sanitized(iter(reader)), output_signature=signature)
    return dataset.map(lambda *values: row_type(*values))


def tf_tensors(reader: Any, shuffling_queue_capacity: int = 0, min_after_dequeue: int = 0) -> Any:
    """The reader's next element as tensors (see the module doc)."""
    import tensorflow as tf

    if shuffling_queue_capacity:
        raise InvalidArgumentError(
            f"tf_tensors(shuffling_queue_capacity={shuffling_queue_capacity}) is not supported by petastream.compat; "
            "shuffle the dataset instead: make_petastorm_dataset(reader).shuffle(n)")
    dataset = make_petastorm_dataset(reader)
    if tf.executing_eagerly():
        return next(iter(dataset))
    return tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()
