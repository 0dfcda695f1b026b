"""The ``tf.data.Dataset`` behind ``make_tf_dataset``: whole batches from the bulk loader.

Elements are namedtuples of batched tensors (``inferred_schema_view``), as Petastorm. Batches
come from petastream's loader at ``batch_size`` (not a per-row generator); the shuffling queue
becomes the loader's shuffle window. Built with ``tensorflow.compat.v1`` so the dataset also has
``make_one_shot_iterator()`` for graph-mode code; it iterates eagerly in TF2.
Dtypes: strings, binary and decimals -> ``tf.string``; uint16 -> int32, uint32 -> int64;
dates and timestamps are already int64 nanoseconds in the dataset.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from petastream.mds.columns import widen_unsigned
from petastream.mds.ndarray import Ragged

__all__ = ["make_tf_dataset"]


def _tf_column(col: Any) -> Any:
    if isinstance(col, Ragged):
        raise TypeError("variable-length array columns cannot be batched into dense TF tensors; "
                        "make the arrays one length (array_lengths) or drop the column")
    if col.dtype == object:
        return np.array([v if isinstance(v, bytes) else str(v).encode() for v in col], dtype=object)
    return np.ascontiguousarray(col, dtype=widen_unsigned(col.dtype))


def _spec(tf: Any, name: str, encoding: str) -> Any:
    from petastream.mds.encodings import get_encoding

    enc = get_encoding(encoding)
    if enc.dtype is not None:
        base, shape = enc.dtype.base, enc.dtype.shape
        return tf.TensorSpec(shape=(None, *shape), dtype=tf.as_dtype(widen_unsigned(base)), name=name)
    if encoding.startswith("ndarray:"):
        dtype = np.dtype(encoding.split(":")[1])
        return tf.TensorSpec(shape=(None, None), dtype=tf.as_dtype(widen_unsigned(dtype)), name=name)
    return tf.TensorSpec(shape=(None,), dtype=tf.string, name=name)


def make_tf_dataset(reader: Any, *, batch_size: int, prefetch: Any, shuffling_queue_capacity: Any) -> Any:
    import tensorflow.compat.v1 as tf

    from petastream.loader import BatchLoader

    columns = reader.schema_fields
    encodings = reader.dataset.columns
    signature = reader.Row(*(_spec(tf, c, encodings.get(c, "str")) for c in columns))
    kwargs = reader.loader_kwargs(batch_size, shuffling_queue_capacity or 0)

    def batches():
        for batch in BatchLoader(reader.dataset, **kwargs):
            if reader.stopped:
                raise RuntimeError("Trying to read a sample after a reader created by "
                                   "make_reader/make_batch_reader has stopped.")
            yield reader.Row(*(_tf_column(batch[c]) for c in columns))

    dataset = tf.data.Dataset.from_generator(batches, output_signature=signature)
    return dataset.prefetch(tf.data.experimental.AUTOTUNE if prefetch is None else prefetch)
