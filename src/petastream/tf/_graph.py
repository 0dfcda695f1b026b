"""A :class:`~petastream.tf.TFLoader`'s ``tf.data`` graph: the passes it starts, the elements it
assembles, its cardinality, and graphs kept for later loaders of the same shape.

:func:`as_dataset` builds a graph over a loader's passes. Tracing a ``tf.data`` graph costs
~0.1 s, a fifth of an epoch of 1M 'tabular' rows, and scripts build a loader per epoch
(compat's ``with converter.make_tf_dataset(...)`` per epoch): a :class:`GraphCache` keeps a
graph when its loader is done with it and binds it to the next loader with the same
:func:`graph_key` (columns, types, batch grouping, cardinality, device), whose passes it then
starts. A kept graph holds no loader, source or worker.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Any

import numpy as np
import tensorflow as tf

from petastream.errors import InvalidArgumentError, InvalidArgumentTypeError
from petastream.pipeline.parts import STRING, UNIFORM, ColumnParts
from petastream.pipeline.procpool.arena import Strings, pack_strings
from petastream.pipeline.work import BatchGroup
from petastream.tf._loader import TFLoader
from petastream.tf._source import batch_source

__all__ = ["GraphCache", "as_dataset", "begin", "build", "graph_key", "uniform_cut"]

Start = Callable[[], Iterator[tuple[Any, ...]]]


def as_dataset(loader: TFLoader) -> tf.data.Dataset:
    """The ``tf.data.Dataset`` of ``loader``'s batches (see :meth:`TFLoader.as_dataset`)."""
    return build(loader, begin(loader))


def begin(loader: TFLoader) -> Start:
    """Ready ``loader`` to be iterated by a graph: what starts one pass of it."""
    loader.driver.check_nonempty()  # here, not as an error from inside a tf.data op
    prestart = getattr(loader.executor, "prestart", None)
    if prestart is not None:
        prestart()  # worker processes start while TensorFlow builds the graph
    declared = _cardinality(loader)[1]
    return lambda: _iteration(loader, declared)


def _cardinality(loader: TFLoader) -> tuple[int | None, int | None]:
    """``(upcoming, declared)``: the batches of the next iteration (None: forever), and the
    cardinality to declare. Declared where every iteration has the same length (Keras then
    needs no steps_per_epoch and does not warn that it ran out of data); a loader standing
    mid-epoch after load_state_dict will have a short first iteration, so none then."""
    upcoming = loader.driver.next_iteration_len()
    return upcoming, (upcoming if upcoming is not None and upcoming == len(loader) else None)


def graph_key(loader: TFLoader) -> tuple[Any, ...]:
    """What :func:`build`'s graph depends on: loaders with equal keys can share one graph."""
    return (tuple(loader.plans), loader.packed, loader.group, _cardinality(loader),
            loader.planner.world_size > 1, loader.device, loader.element)


def _iteration(loader: TFLoader, declared: int | None) -> Iterator[tuple[Any, ...]]:
    """One iteration of the dataset: the driver's next epoch(s), a hand-over's parts at a time."""
    if declared is not None and loader.driver.next_iteration_len() != declared:
        raise InvalidArgumentError(
            f"this tf.data.Dataset declared {declared} batches per iteration, but the loader "
            f"now stands mid-epoch (after load_state_dict) and the next iteration has "
            f"{loader.driver.next_iteration_len()}; call loader.as_dataset() again after "
            "load_state_dict")
    items: Iterator[Any] = iter(loader.driver)
    cuts = _uniform_columns(loader)
    if cuts:
        items = uniform_cut(items, cuts)
    if not loader.packed:
        return items
    flat = [(p.name, p.kind == STRING) for p in loader.plans for _ in p.part_specs(None)]
    return _unpacking(items, [name if string else None for name, string in flat])


def _uniform_columns(loader: TFLoader) -> list[tuple[int, ColumnParts]]:
    """Where a grouped loader's uniform columns' rows are among the parts its workers hand over
    (each followed by their lengths: :meth:`ColumnParts.to_group_parts`)."""
    if loader.group <= 1:
        return []
    cuts: list[tuple[int, ColumnParts]] = []
    i = 0
    for p in loader.plans:
        if p.kind == UNIFORM:
            cuts.append((i, p))
            i += 1  # the lengths part
        i += len(p.part_specs(None))
    return cuts


def uniform_cut(items: Iterator[Any], cuts: list[tuple[int, ColumnParts]]) -> Iterator[Any]:
    """Hand-overs as TensorFlow takes them from a grouped loader with uniform columns (each
    ``cuts`` entry: the position of a column's rows among an item's parts, and the column):
    the lengths parts dropped where they are empty (every row of the item has one length, as
    fixed-length lists do: no copy, no Python per batch); else the item cut into its batches,
    each checked to be of one length (Petastorm's error otherwise) and its rows cut to it."""
    lengths_at = {i + 1 for i, _ in cuts}
    with contextlib.closing(items):  # type: ignore[type-var]  # closing this closes the driver's iteration
        for item in items:
            if all(item[i + 1].size == 0 for i, _ in cuts):
                kept = tuple(p for j, p in enumerate(item) if j not in lengths_at)
                yield BatchGroup.of(kept, item.num_batches) if isinstance(item, BatchGroup) else kept
            else:
                yield from _batches_of(item, cuts, lengths_at)


def _batches_of(item: Any, cuts: list[tuple[int, ColumnParts]], lengths_at: set[int]) -> Iterator[Any]:
    """An item whose uniform columns' rows differ in length, one batch at a time."""
    grouped = isinstance(item, BatchGroup)
    widths = {i: p for i, p in cuts}
    for b in range(item.num_batches if grouped else 1):
        parts = []
        for j, p in enumerate(item):
            if j in lengths_at:
                continue
            rows = _batch(p, b) if grouped else p
            if j in widths:
                lengths = _batch(item[j + 1], b) if grouped else item[j + 1]
                lengths = lengths.reshape(-1) if lengths.size else np.full(rows.shape[-2], rows.shape[-1])
                rows = np.ascontiguousarray(rows[..., :widths[j].check_uniform(lengths)])
            parts.append(rows)
        yield BatchGroup.of(tuple(parts), 1) if grouped else tuple(parts)


def _batch(part: Any, b: int) -> Any:
    """Batch ``b`` of a group's part (shaped ``[batches, rows, ...]``), as a group of one."""
    if isinstance(part, Strings):
        return Strings(part.data, part.starts[b:b + 1], part.lengths[b:b + 1])
    return part[b:b + 1]


def _unpacking(items: Iterator[tuple[Any, ...]], strings: list[str | None]) -> Iterator[tuple[Any, ...]]:
    with contextlib.closing(items):  # type: ignore[type-var]  # closing this closes the driver's iteration
        for item in items:
            yield _unpacked(item, strings)


def _unpacked(item: tuple[Any, ...], strings: list[str | None]) -> tuple[Any, ...]:
    """Packed string parts as TensorFlow takes them: the bytes as one scalar (one copy), the
    starts and lengths as they are. ``strings[i]``: the column name where part ``i`` is a
    string column's (a worker packs them all; threads hand over what they have: packed here)."""
    parts: list[Any] = []
    for p, name in zip(item, strings):
        if name is None:
            parts.append(p)
            continue
        packed = p if isinstance(p, Strings) else pack_strings(np.asarray(p))
        if packed is None:
            raise InvalidArgumentTypeError(
                f"column {name!r}: holds values that are neither all str nor all bytes (None, or "
                "both kinds); TensorFlow strings need one or the other: convert them in transform")
        parts += (np.array(packed.data.tobytes(), dtype=object), packed.starts, packed.lengths)
    return BatchGroup.of(tuple(parts), item.num_batches) if isinstance(item, BatchGroup) else tuple(parts)


def build(loader: TFLoader, start: Start) -> tf.data.Dataset:
    """The ``tf.data`` graph over the passes ``start()`` begins (see :func:`begin`)."""
    upcoming, declared = _cardinality(loader)
    plans, packed, element = loader.plans, loader.packed, loader.element
    sizes = [len(p.part_specs(None, packed)) for p in plans]

    @tf.autograph.experimental.do_not_convert
    def assemble(*parts: tf.Tensor) -> Any:
        out, i = {}, 0
        for p, n in zip(plans, sizes):
            out[p.name] = p.from_parts(parts[i:i + n])
            i += n
        return out if element is None else element(**out)  # once per hand-over, not a .map per batch

    spec = loader.element_spec
    ds = batch_source(start, loader.part_specs(), assemble, spec if element is None else element(**spec),
                      group=loader.group)
    options = tf.data.Options()
    options.experimental_optimization.inject_prefetch = False
    if loader.planner.world_size > 1:  # already this pipeline's shard: no second sharding
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    ds = ds.with_options(options)
    if upcoming is None:
        ds = ds.apply(tf.data.experimental.assert_cardinality(tf.data.INFINITE_CARDINALITY))
    elif declared is not None:
        ds = ds.apply(tf.data.experimental.assert_cardinality(declared))
    if loader.device is not None:
        ds = ds.apply(tf.data.experimental.prefetch_to_device(loader.device, buffer_size=1))
    return ds


class _Bound:
    """What a kept graph's passes start from: the loader bound to it now, or, unbound,
    ``unbound()``'s error."""

    def __init__(self, unbound: Callable[[], Exception]):
        self.start: Start | None = None
        self.unbound = unbound

    def __call__(self) -> Iterator[tuple[Any, ...]]:
        if self.start is None:
            raise self.unbound()
        return self.start()


class GraphCache:
    """Up to ``max_graphs`` graphs kept for later loaders (each a few hundred KB of traced
    functions), the oldest dropped first."""

    def __init__(self, max_graphs: int = 8):
        self.max_graphs = max_graphs
        self._kept: OrderedDict[Hashable, list[tuple[_Bound, Any]]] = OrderedDict()
        self._lock = threading.Lock()

    def bind(self, loader: TFLoader, scope: Hashable, finish: Callable[[tf.data.Dataset], Any],
             unbound: Callable[[], Exception]) -> tuple[Any, Callable[[], None]]:
        """``(dataset, release)``: a graph over ``loader``'s passes, taken from the kept ones
        whose key (:func:`graph_key` and ``scope``: what else the graph depends on, e.g. the
        ``tf.Graph`` it belongs to) is the same, else built and passed through ``finish``.
        ``release()`` unbinds it from the loader and keeps it; iterating it unbound raises
        ``unbound()``."""
        start = begin(loader)
        key = (graph_key(loader), scope)
        entry = self._take(key)
        if entry is None:
            bound = _Bound(unbound)
            entry = bound, finish(build(loader, bound))
        bound, dataset = entry
        bound.start = start
        return dataset, lambda: self._keep(key, bound, dataset)

    def _take(self, key: Hashable) -> tuple[_Bound, Any] | None:
        with self._lock:
            graphs = self._kept.get(key)
            if not graphs:
                return None
            entry = graphs.pop()
            if not graphs:
                del self._kept[key]
            return entry

    def _keep(self, key: Hashable, bound: _Bound, dataset: Any) -> None:
        bound.start = None
        with self._lock:
            self._kept.setdefault(key, []).append((bound, dataset))
            self._kept.move_to_end(key)
            while sum(len(g) for g in self._kept.values()) > self.max_graphs:
                oldest = next(iter(self._kept))
                self._kept[oldest].pop(0)
                if not self._kept[oldest]:
                    del self._kept[oldest]
