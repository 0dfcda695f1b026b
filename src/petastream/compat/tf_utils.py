"""``petastorm.tf_utils``: ``make_petastorm_dataset`` and ``tf_tensors`` over compat's readers.

An element is what the reader yields, as tensors: a namedtuple per row for
:func:`~petastream.compat.make_reader` (shapes and dtypes from its Unischema, variable
dimensions as None); with ``schema_fields=NGram(...)``, a dict ``{offset: namedtuple}`` for
every offset from the n-gram's first to its last (an offset without fields is an empty
namedtuple), each namedtuple the one of :meth:`NGram.get_schema_at_timestep`; a batch per
element for :func:`~petastream.compat.make_batch_reader` (dtypes from its first batch, read
once more to learn them; every dimension None, as Petastorm's inferred schema gives them).
Values TensorFlow has no type for are cast as Petastorm casts them: ``Decimal`` -> its
normalized string, a ``datetime64`` value -> its int64 count (days for a date, microseconds for
a timestamp, as Petastorm's pass-through gives TensorFlow), arrays of them and of dates -> int64
nanoseconds since the epoch, uint16/uint32 -> int32/int64, strings -> ``tf.string`` (with
Petastorm's ``UnicodeWarning``); a None is Petastorm's ``RuntimeError`` (filter such rows with
a predicate).

``make_petastorm_dataset(reader)`` is a ``tf.compat.v1`` dataset, as Petastorm's: graph code
calls ``dataset.make_one_shot_iterator()`` and reads ``output_shapes``; eager code iterates it.
A second pass over it (``repeat()``, or iterating again) warns as Petastorm does and resets the
reader (``num_epochs``, or ``cache()`` before ``repeat()``, avoid the re-read). A batch reader's
batches reach TensorFlow through :func:`petastream.tf.batch_source`, up to :data:`GROUP`
consecutive batches of one shape per Python call (so the dataset reads up to that many batches
ahead of its consumer), cut apart by ``unbatch``: still one element per batch, in order, without
``from_generator``'s per-element Python (0.6-0.7x its CPU per row in this process, measured).

``tf_tensors(reader)`` is Petastorm's queue-era bridge: each evaluation of its tensors
(``sess.run``) takes the reader's next element; an exhausted reader is
``tf.errors.OutOfRangeError``. Eagerly it returns the next element as tensors. With
``shuffling_queue_capacity`` the elements pass through a ``tf.RandomShuffleQueue`` filled by a
queue runner (start it with ``tf.train.start_queue_runners``; its size op is named
:data:`RANDOM_SHUFFLING_QUEUE_SIZE`); eagerly that is TensorFlow's own ``RuntimeError`` (queue
runners need a graph), and on a batch reader Petastorm's ``ValueError``.
"""

from __future__ import annotations

import datetime
import warnings
import weakref
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import numpy as np

from petastream.errors import InvalidArgumentError, UnsupportedColumnError

__all__ = ["make_petastorm_dataset", "tf_tensors", "RANDOM_SHUFFLING_QUEUE_SIZE"]

#: The name of the shuffling queue's size op in the graph (diagnostics read the queue's fill by it).
RANDOM_SHUFFLING_QUEUE_SIZE = "random_shuffling_queue_size"

_EPOCH = np.datetime64("1970-01-01T00:00:00", "ns")
# Petastorm's texts, which scripts and tests match on.
_RESET_WARNING = ("Running multiple iterations over make_petastorm_dataset is not recommend for performance issue. "
                  "Use Reader's num_epochs contructor arguments to set number of iterations,"
                  "or use tf.data.Dataset's cache() function to cache data of first iteration before"
                  "calling 'repeat' method of Datset class.")
_UNICODE_WARNING = "Tensorflow will convert all unicode strings back to bytes type. You may need to decode values."


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
                return value.astype("datetime64[ns]").astype(np.int64)  # numpy's cast: no per-row Python
            if isinstance(first, np.ndarray):
                from petastream.pipeline.parts import NonUniformArrayError

                raise NonUniformArrayError(f'"{name}" holds arrays of different shapes in one batch, which a '
                                           "tensor cannot hold; read it with make_reader (one row per element) "
                                           "or leave it out")
    return value


def _field_dtype(numpy_dtype: Any) -> Any:
    import tensorflow as tf

    t = numpy_dtype
    if t is Decimal or (isinstance(t, type) and issubclass(t, (np.str_, np.bytes_, str, bytes))):
        return tf.string
    if t is np.datetime64:
        return tf.int64
    if t is np.uint16:
        return tf.int32
    if t is np.uint32:
        return tf.int64
    return tf.as_dtype(np.dtype(t))


def _value_dtype(value: Any) -> Any:
    import tensorflow as tf

    array = np.asarray(value)
    return tf.string if array.dtype.kind in "USO" else tf.as_dtype(array.dtype)


def _holds_text(value: Any) -> bool:
    array = np.asarray(value)
    return array.dtype.kind == "U" or (array.dtype == object and array.size > 0 and isinstance(array.flat[0], str))


class _Part:
    """One namedtuple of an element: how to make it from its values in order, its field names
    and TensorSpecs."""

    def __init__(self, make: Callable[..., Any], names: list[str], specs: list[Any]):
        self.make, self.names, self.specs = make, names, specs


class _Layout:
    """An element's structure: a namedtuple (``key`` None) or ``{offset: namedtuple}``. Elements
    cross TensorFlow's Python boundary as a flat tuple of values (:meth:`flatten`) and are put
    back together from the flat tensors (:meth:`build`)."""

    def __init__(self, parts: dict[int | None, _Part], text: bool, batched: bool = False):
        self.parts = parts
        self.text = text  # some field holds unicode text: Petastorm's UnicodeWarning
        self.batched = batched  # a batch reader's: specs from its first batch

    @property
    def specs_names(self) -> list[str]:
        return [name for part in self.parts.values() for name in part.names]

    @property
    def specs(self) -> list[Any]:
        return [s for part in self.parts.values() for s in part.specs]

    def flatten(self, element: Any) -> tuple[Any, ...]:
        rows = {None: element} if None in self.parts else element
        return tuple(_sanitize(name, getattr(rows[key], name))
                     for key, part in self.parts.items() for name in part.names)

    def build(self, flat: Any) -> Any:
        flat, out, at = list(flat), {}, 0
        for key, part in self.parts.items():
            out[key] = part.make(*flat[at:at + len(part.names)])
            at += len(part.names)
        return out[None] if None in self.parts else out


def _schema_part(schema: Any) -> _Part:
    import tensorflow as tf

    fields = list(schema.fields.values())
    specs = [tf.TensorSpec(shape=tuple(f.shape or ()), dtype=_field_dtype(f.numpy_dtype)) for f in fields]
    return _Part(schema.make_namedtuple_tf, [f.name for f in fields], specs)


def _is_text_field(field: Any) -> bool:
    return isinstance(field.numpy_dtype, type) and issubclass(field.numpy_dtype, (np.str_, str))


def _layout(reader: Any) -> _Layout:
    import tensorflow as tf

    ngram = getattr(reader, "ngram", None)
    if ngram is not None:
        offsets = range(min(ngram.fields), max(ngram.fields) + 1)
        schemas = {t: ngram.get_schema_at_timestep(reader.schema, t) for t in offsets}
        text = any(_is_text_field(f) for s in schemas.values() for f in s.fields.values())
        return _Layout({t: _schema_part(s) for t, s in schemas.items()}, text)
    if not getattr(reader, "batched_output", True):
        return _Layout({None: _schema_part(reader.schema)}, any(map(_is_text_field, reader.schema.fields.values())))
    # a batch reader: learn the columns from its first batch, left for the dataset's first
    # element (compat's reader is one pass: peek); other readers start a new pass per iter()
    peek = getattr(reader, "peek", None)
    if peek is not None:
        first = peek()
    else:
        probe = iter(reader)
        first = next(probe)
        close = getattr(probe, "close", None)
        if close is not None:
            close()
    names = list(first._fields)
    values = [_sanitize(k, getattr(first, k)) for k in names]
    specs = [tf.TensorSpec(shape=(None,) * max(np.ndim(v), 1), dtype=_value_dtype(v)) for v in values]
    return _Layout({None: _Part(type(first), names, specs)}, any(_holds_text(getattr(first, k)) for k in names),
                   batched=True)


def _warn_text(layout: _Layout) -> None:
    if layout.text:
        warnings.warn(_UNICODE_WARNING, UnicodeWarning, stacklevel=3)


def _passes(reader: Any, layout: _Layout) -> Iterator[tuple[Any, ...]]:
    """One pass over the reader as flat tuples; a pass after a finished one resets the reader,
    with Petastorm's warning (tf.data calls this again for ``repeat()``)."""
    if reader.last_row_consumed:
        warnings.warn(_RESET_WARNING, UserWarning, stacklevel=2)
        reader.reset()
    for element in reader:
        yield layout.flatten(element)


def _checked_passes(reader: Any, layout: _Layout, specs: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
    """:func:`_passes` for :func:`petastream.tf.batch_source`, which re-checks nothing: each
    column as an array of its spec's dtype and rank (from the first batch). A later batch of
    another numeric width is cast (``same_kind``, as ``from_generator``'s conversion did); one of
    another kind or rank is an error naming the column. Per column, not per row."""
    wanted = [(name, spec.dtype.as_numpy_dtype, spec.shape.rank) for name, spec in zip(layout.specs_names, specs)]
    for flat in _passes(reader, layout):
        out = []
        for (name, dtype, rank), value in zip(wanted, flat):
            array = np.asarray(value)
            if array.ndim != rank:
                raise UnsupportedColumnError(
                    f'"{name}" is {array.ndim}-D in a batch of this reader but {rank}-D in its first batch, and a '
                    "dataset's element has one shape; read it with make_reader (one row per element) or leave it out")
            if array.dtype.kind in "USO" and dtype is object:
                out.append(array)  # str/bytes: numpy_function encodes str as UTF-8, as tf.string does
            elif array.dtype == dtype:
                out.append(array)
            elif array.dtype.kind not in "USO" and np.can_cast(array.dtype, dtype, "same_kind"):
                out.append(array.astype(dtype))
            else:
                raise UnsupportedColumnError(
                    f'"{name}" is {array.dtype} in a batch of this reader but {np.dtype(dtype)} in its first batch; '
                    "cast it with a TransformSpec or leave it out")
        yield tuple(out)


#: Consecutive batches of one shape handed to TensorFlow per Python call (``unbatch`` cuts them apart).
GROUP = 8


def _groups(batches: Iterator[tuple[np.ndarray, ...]], size: int) -> Iterator[tuple[np.ndarray, ...]]:
    """Runs of up to ``size`` consecutive batches whose columns have the same shapes, each column
    stacked ``[batches, rows, ...]``. Each batch stays one element, in order; a batch of another
    length starts a new run. An error from the reader comes after the batches read before it."""
    run: list[tuple[np.ndarray, ...]] = []

    def stacked() -> tuple[np.ndarray, ...]:
        out = tuple(np.stack(columns) for columns in zip(*run))
        run.clear()
        return out
    try:
        for batch in batches:
            if run and [a.shape for a in batch] != [a.shape for a in run[0]]:
                yield stacked()
            run.append(batch)
            if len(run) == size:
                yield stacked()
    except Exception:
        if run:
            yield stacked()
        raise
    if run:
        yield stacked()


def _batch_dataset(reader: Any, layout: _Layout) -> Any:
    """A batch reader's dataset through :func:`petastream.tf.batch_source`: one bare
    ``numpy_function`` per batch, without ``from_generator``'s per-element Python (its
    structure normalization and TensorSpec checks in eager tensors: ~100-400 us a batch)."""
    import tensorflow as tf
    from tensorflow.python.data.ops.dataset_ops import DatasetV1Adapter

    from petastream.tf import batch_source, groups_supported

    part = layout.parts[None]
    specs = tuple(part.specs)
    assemble = tf.autograph.experimental.do_not_convert(part.make)
    element = part.make(*specs)
    if GROUP > 1 and groups_supported():
        source = batch_source(lambda: _groups(_checked_passes(reader, layout, specs), GROUP), specs, assemble,
                              element, group=GROUP)
    else:
        source = batch_source(lambda: _checked_passes(reader, layout, specs), specs, assemble, element)
    return DatasetV1Adapter(source)  # Petastorm's is a tf.compat.v1 dataset (make_one_shot_iterator)


def make_petastorm_dataset(reader: Any) -> Any:
    """A ``tf.compat.v1`` ``tf.data.Dataset`` of the reader's elements (see the module doc)."""
    import tensorflow as tf

    layout = _layout(reader)
    _warn_text(layout)
    if layout.batched:
        return _batch_dataset(reader, layout)
    flat = tf.compat.v1.data.Dataset.from_generator(lambda: _passes(reader, layout),
                                                    output_signature=tuple(layout.specs))

    def build(*values: Any) -> Any:
        return layout.build(values)

    # Plain Python that builds a structure: nothing for AutoGraph to convert (nor to warn about).
    return flat.map(tf.autograph.experimental.do_not_convert(build))


# tf_tensors on a batch reader, whose iter() starts a new pass: the pass its tensors read from.
_passes_of: weakref.WeakKeyDictionary[Any, Iterator[Any]] = weakref.WeakKeyDictionary()


def _next_of(reader: Any) -> Callable[[], Any]:
    if hasattr(type(reader), "__next__"):
        return lambda: next(reader)

    def take() -> Any:
        if reader not in _passes_of:
            _passes_of[reader] = iter(reader)
        return next(_passes_of[reader])
    return take


def tf_tensors(reader: Any, shuffling_queue_capacity: int = 0, min_after_dequeue: int = 0) -> Any:
    """Tensors of the reader's next element (see the module doc)."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    if getattr(reader, "batched_output", True) and shuffling_queue_capacity > 0:
        raise InvalidArgumentError(
            "shuffling_queue_capacity can not be used with a reader that produces batched_output, since each batch "
            "is a parquet read rowgroup. Extra shuffling of the batches does not further decrease correlation.")
    layout = _layout(reader)
    _warn_text(layout)
    take = _next_of(reader)
    dtypes = [s.dtype for s in layout.specs]
    # Each run of the graph calls this: StopIteration from an exhausted reader is OutOfRangeError.
    tensors = list(tf1.py_func(lambda _: list(layout.flatten(take())), [tf.constant(1)], dtypes))
    if shuffling_queue_capacity > 0:
        tensors = _through_shuffling_queue(tensors, dtypes, shuffling_queue_capacity, min_after_dequeue)
    if not tf.executing_eagerly():
        for tensor, spec in zip(tensors, layout.specs):
            tensor.set_shape(spec.shape)  # py_func and the queue lose the static shapes
    return layout.build(tensors)


def _through_shuffling_queue(tensors: list[Any], dtypes: list[Any], capacity: int, min_after_dequeue: int) -> list[Any]:
    """The tensors through a RandomShuffleQueue that one queue runner fills by evaluating them."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    queue = tf1.RandomShuffleQueue(capacity, min_after_dequeue, dtypes)
    queue.size(name=RANDOM_SHUFFLING_QUEUE_SIZE)
    # Eagerly, QueueRunner raises TensorFlow's RuntimeError: queue runners need a graph.
    tf1.train.add_queue_runner(tf1.train.QueueRunner(queue, [queue.enqueue(tensors)]))
    out = queue.dequeue()
    return list(out) if isinstance(out, (list, tuple)) else [out]
