"""``TFLoader``: the bulk batch loader, fed to ``tf.data`` a whole batch at a time."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from petastream.errors import InvalidArgumentError, InvalidArgumentTypeError
from petastream.mds.sidecar import apply_logical
from petastream.pipeline import BatchLoader
from petastream.pipeline.arena import Strings, pack_strings
from petastream.pipeline.parking import ProcessExecutor
from petastream.pipeline.parts import ColumnParts, FlatParts
from petastream.pipeline.processes import processes_fit
from petastream.pipeline.work import BatchGroup
from petastream.tf._columns import (
    RAGGED,
    STRING,
    ColumnPlan,
    plan_from_encoding,
    plan_from_spec,
    plan_from_values,
)
from petastream.tf._source import batch_source, groupable, groups_supported

__all__ = ["TFLoader", "dataset"]

_GROUP_BYTES = 64 << 20  # at most about this much per hand-over: big rows (images) go few batches at a time

_RAGGED_MODES = ("ragged", "uniform")
_WORKER_TYPES = ("auto", "process", "thread")
log = logging.getLogger("petastream.tf")


class TFLoader(BatchLoader):
    """:class:`~petastream.pipeline.BatchLoader` whose :meth:`as_dataset` is a ``tf.data.Dataset``.

    (``loader.dataset`` stays the :class:`~petastream.mds.dataset.MDSDataset` read, as on
    every :class:`BatchLoader`.)

    Elements are ``dict[str, tf.Tensor | tf.RaggedTensor]`` of one batch each, in plan order
    (see :mod:`petastream.tf`). Arguments are :class:`BatchLoader`'s plus:

    * ``device``: ``"/gpu:0"``-style; batches are prefetched onto it
      (``tf.data.experimental.prefetch_to_device``, one batch ahead). None: stay on the host.
    * ``input_context``: a ``tf.distribute.InputContext`` (``distribute_datasets_from_function``):
      this input pipeline reads shard ``input_pipeline_id`` of ``num_input_pipelines``. Or pass
      ``rank``/``world_size`` yourself. ``batch_size`` is per pipeline
      (``input_context.get_per_replica_batch_size(global_batch_size)``).
    * ``output_signature``: ``{column: tf.TensorSpec | tf.RaggedTensorSpec}`` (batch dim first)
      instead of the types read from the column encodings. With a ``transform`` (and no
      ``output_signature``) the types are those of ``transform`` run once, here, on the first
      ``batch_size`` rows; it must return the same columns and types for every batch.
    * ``ragged``: ``"ragged"`` (variable-length arrays as ``tf.RaggedTensor``) or ``"uniform"``
      (dense ``(batch, length)``; a batch with unequal lengths raises, as Petastorm does).
    * ``batches_per_call``: up to this many consecutive batches (default 16, and at most about
      64 MB of stored rows) are decoded, converted and handed to TensorFlow at once, and cut
      apart inside the graph: no Python per batch on either side (1.7x the rows/s of one
      batch per call on 'tabular' rows). An epoch starts with groups of 1, 2, 4 and 8 batches
      (its first batch waits for one). Columns with a varying row shape (ragged) and a
      ``transform`` (called per batch) take one batch per hand-over. Plain ``state_dict()``
      counts every batch handed over, so it may stand up to ``batches_per_call - 1`` batches
      ahead of a loop that reads nothing ahead itself: checkpoint with
      ``state_dict(steps=k)``, exact in every case, or pass ``batches_per_call=1``.
    * ``worker_type``: ``"process"``: ``num_workers`` decode processes
      (:mod:`petastream.pipeline.processes`) that hand batches over in shared memory, which
      TensorFlow takes without a copy. TensorFlow's iterator runs Python per element and
      competes with decode threads for the GIL; in processes the decode runs beside it (see
      docs/benchmarks.md for the measured gain). The processes start at :meth:`as_dataset`
      and serve every epoch; between passes and after :meth:`close` they wait a minute for
      the next pass or loader, then stop. A ``transform`` must then be importable (module
      level, not ``__main__``). POSIX only. ``"thread"``: decode threads in this process.
      ``"auto"`` (default): processes where that changes nothing you can see (no
      ``transform``, ``num_workers >= 2``, POSIX), else threads; should the processes not
      start (no way to spawn, a dataset whose options do not pickle), threads, with a warning.

    Each iteration of the dataset is the next epoch (``num_epochs`` of them; None: forever),
    as for every petastream loader (:mod:`petastream.pipeline`); after ``load_state_dict`` the
    next one resumes the saved epoch. The dataset declares its cardinality (``len(loader)``
    batches, or infinite), so Keras needs no ``steps_per_epoch``. The loader holds one
    position, so one iteration runs at a time: a new one ends any earlier iteration still open.
    """

    superseded = "stop"  # tf.data may open the next epoch's iterator before finalizing the last

    def __init__(self, dataset: Any, batch_size: int = 32, *, device: str | None = None,
                 input_context: Any = None, rank: int | None = None, world_size: int | None = None,
                 output_signature: Mapping[str, Any] | None = None, ragged: str = "ragged",
                 batches_per_call: int = 16, worker_type: str = "auto", **kwargs: Any):
        if worker_type not in _WORKER_TYPES:
            raise InvalidArgumentError(f"worker_type must be one of {_WORKER_TYPES}, got {worker_type!r}")
        if isinstance(batches_per_call, bool) or not isinstance(batches_per_call, int) or batches_per_call < 1:
            raise InvalidArgumentError(
                f"batches_per_call must be an int >= 1 (batches handed to TensorFlow per Python call), "
                f"got {batches_per_call!r}")
        self.batches_per_call = batches_per_call
        if ragged not in _RAGGED_MODES:
            raise InvalidArgumentError(f"ragged must be one of {_RAGGED_MODES}, got {ragged!r}")
        rank, world_size = _rank_world(input_context, rank, world_size)
        super().__init__(dataset, batch_size, rank=rank, world_size=world_size, **kwargs)
        self.device = _check_device(device)
        self.ragged = ragged
        self.plans: list[ColumnPlan] = self._plan(output_signature)
        auto = worker_type == "auto"
        if auto:
            worker_type = "process" if processes_fit(self.transform, self.num_workers) else "thread"
        #: ``"thread"`` or ``"process"``: where this loader decodes (``"auto"`` resolved).
        self.worker_type = worker_type
        self._fallback = auto and worker_type == "process"  # threads should processes not start
        # Whether string columns come packed: from processes their values cross into shared
        # memory as bytes and offsets, and TensorFlow cuts them apart, instead of being pickled
        # and rebuilt one Python object per value here. Fixed now, as the graph's parts are,
        # even if the loader falls back to threads (which then pack their objects).
        self._packed = worker_type == "process" and any(p.kind == STRING for p in self.plans)
        # Processes persist across passes (each Keras epoch is a pass) and start early.
        self._processes = (ProcessExecutor(self.num_workers, slots=self.prefetch + 2, strings=self._packed)
                           if worker_type == "process" else None)
        # TensorFlow-free, so that worker processes convert without importing TensorFlow
        self._convert = FlatParts(tuple(ColumnParts(p.name, p.kind, p.dtype, p.shape) for p in self.plans))

    @property
    def _group(self) -> int:
        """Batches per hand-over: ``batches_per_call`` where every column has a fixed row shape
        and no transform runs (a transform is called per batch), else 1."""
        parts = self._part_specs()
        if (self.transform is not None or any(p.kind == RAGGED for p in self.plans) or not groupable(parts)
                or not groups_supported()):
            return 1
        batch_bytes = self.planner.batch_size * self._row_bytes
        return max(1, min(self.batches_per_call, _GROUP_BYTES // max(1, batch_bytes)))

    @functools.cached_property
    def _row_bytes(self) -> int:
        """Stored bytes per sample, on average: what sizes a hand-over of big rows."""
        ds = self.dataset
        n = len(ds)
        return int(sum(ds.sources.raw_bytes(i) for i in range(ds.num_shards)) // n) if n else 0

    def _work(self, plan: Any) -> Any:
        work = super()._work(plan)
        group = self._group
        if group == 1:  # one batch per hand-over: plain batches (as_dataset built for them)
            return work
        if work.max_chunk is not None:  # chunks fitted to a bounded cache: a group fits in one
            group = max(1, min(group, work.max_chunk // plan.batch_size))
        return dataclasses.replace(work, group=group)

    # -- execution ---------------------------------------------------------------------------
    def _execute(self, work: Any) -> Any:
        if self._processes is None:
            return super()._execute(work)
        if not self._fallback:
            return self._processes(work)
        try:
            return self._processes(work)
        except Exception as e:  # noqa: BLE001 - worker_type="auto": threads do the same work
            self._to_threads(e)
            return super()._execute(work)

    def _to_threads(self, error: Exception) -> None:
        log.warning("decode worker processes did not start (%s: %s); decoding in threads instead "
                    "(pass worker_type='process' to see the error, or 'thread' to silence this)",
                    type(error).__name__, error)
        self._processes.close()
        self._processes = None
        self.worker_type = "thread"

    def close(self) -> None:
        """Release the worker processes (``worker_type="process"``) now rather than when the
        loader is collected: the next loader with as many workers takes them over if it comes
        within a minute (a loader or compat context per epoch then starts no new processes),
        else they stop (``petastream.pipeline.parking.shutdown_idle()`` stops them at once).
        Iterating this loader again takes or starts workers anew."""
        if self._processes is not None:
            self._processes.close()

    def _part_specs(self) -> tuple[tf.TensorSpec, ...]:
        return tuple(s for p in self.plans for s in p.part_specs(self.batch_dim, self._packed))

    # -- types --------------------------------------------------------------------------------
    @property
    def batch_dim(self) -> int | None:
        """The static batch dimension: fixed when every batch is full (drop_last, or padding
        over several ranks), else None (the last batch of an epoch may be short)."""
        p = self.planner
        return p.batch_size if p.drop_last or p.world_size > 1 else None

    @property
    def element_spec(self) -> dict[str, Any]:
        """``{column: tf.TensorSpec | tf.RaggedTensorSpec}`` of the dataset's elements."""
        return {p.name: p.spec(self.batch_dim) for p in self.plans}

    def _plan(self, output_signature: Mapping[str, Any] | None) -> list[ColumnPlan]:
        if output_signature is not None:
            if not isinstance(output_signature, Mapping) or not output_signature:
                raise InvalidArgumentTypeError(
                    "output_signature must be a non-empty dict {column: tf.TensorSpec | "
                    f"tf.RaggedTensorSpec}}, got {output_signature!r}")
            return [plan_from_spec(str(n), s) for n, s in output_signature.items()]
        names = self.columns or list(self.dataset.columns)
        if self.transform is not None:  # its output types are only known from its output
            out = self.transform(self._probe(names))
            if not isinstance(out, Mapping):
                raise InvalidArgumentTypeError(
                    f"transform must return a dict of columns, got {type(out).__name__}")
            return [plan_from_values(str(n), c, self.ragged, " (from transform)") for n, c in out.items()]
        encodings = self.dataset.columns
        plans = {n: plan_from_encoding(n, encodings[n], self.ragged) for n in names}
        logical = self.dataset.logical_dtypes if self.logical_types else {}
        for n, dtype in logical.items():  # e.g. Spark booleans stored as uint8 -> tf.bool
            if plans.get(n) is not None:
                plans[n] = dataclasses.replace(plans[n], dtype=np.dtype(dtype))
        unknown = [n for n, p in plans.items() if p is None]
        if unknown:  # e.g. 'ndarray' without a dtype: the first rows tell
            probe = self._probe(unknown)
            for n in unknown:
                plans[n] = plan_from_values(n, probe[n], self.ragged, f" (encoding {encodings[n]!r})")
        return [p for p in plans.values() if p is not None]

    def _probe(self, names: list[str]) -> dict[str, Any]:
        k = min(len(self.dataset), self.planner.batch_size)
        if k == 0:
            raise InvalidArgumentError(
                f"the dataset is empty, so the TensorFlow types of {names} cannot be read from "
                "its rows; pass output_signature={column: tf.TensorSpec(...)}")
        probe = self.dataset.read(np.arange(k), names)
        return apply_logical(probe, self.dataset.logical_dtypes if self.logical_types else {})

    # -- checkpoints --------------------------------------------------------------------------
    def state_dict(self, steps: int | None = None) -> dict[str, Any]:
        """The position to resume from (:meth:`load_state_dict`, any ``num_workers``).

        ``steps=None``: after every batch handed to TensorFlow so far. With
        ``batches_per_call=1`` that is exactly what your loop took when nothing reads ahead of
        it: a plain loop (eager or ``tf.function``) over :meth:`as_dataset`; with more (the
        default, 16), up to ``batches_per_call - 1`` batches more. Stages that read ahead (``device=``, a ``.prefetch()``, a ``.map()``
        that tf.data parallelizes, Keras) hold batches your loop has not seen yet, and those
        count as consumed. ``steps=k``: after the first ``k`` batches of the current iteration
        of the dataset, whatever was read ahead: pass your loop's own count (in Keras,
        ``batch + 1`` in ``on_train_batch_end``).
        """
        return super().state_dict(steps)

    # -- the stream ---------------------------------------------------------------------------
    def _iteration(self, declared: int | None) -> Iterator[tuple[np.ndarray, ...]]:
        """One iteration of the dataset: the driver's next epoch(s), a batch's parts at a time."""
        if declared is not None and self.driver.next_iteration_len() != declared:
            raise InvalidArgumentError(
                f"this tf.data.Dataset declared {declared} batches per iteration, but the loader "
                f"now stands mid-epoch (after load_state_dict) and the next iteration has "
                f"{self.driver.next_iteration_len()}; call loader.as_dataset() again after "
                "load_state_dict")
        items = iter(self.driver)
        if not self._packed:
            return items
        flat = [(p.name, p.kind == STRING) for p in self.plans for _ in p.part_specs(None)]
        return _unpacking(items, [name if string else None for name, string in flat])

    @tf.autograph.experimental.do_not_convert
    def _assemble(self, *parts: tf.Tensor) -> Any:
        out, i = {}, 0
        for p in self.plans:
            n = len(p.part_specs(None, self._packed))
            out[p.name] = p.from_parts(parts[i:i + n])
            i += n
        return self._element(out)

    def _element(self, columns: dict[str, Any]) -> Any:
        """The element's structure around its columns (specs or tensors): the dict itself. A
        subclass may give another structure (compat: Petastorm's namedtuple); it is built once
        per hand-over inside the source, not by a ``.map`` per batch."""
        return columns

    def as_dataset(self) -> tf.data.Dataset:
        """A ``tf.data.Dataset`` of this loader's batches (see the class doc for epochs).

        Nothing in it reads ahead of your loop (tf.data's injected prefetch is off; the
        loader's decode threads already keep ``num_workers * prefetch`` batches ready), so
        :meth:`state_dict` counts exactly the batches a plain loop over it took. ``device``
        holds one batch in flight; see :meth:`state_dict` for pipelines that read ahead.
        """
        return self._pipeline(self._begin())

    def _begin(self) -> Callable[[], Iterator[tuple[np.ndarray, ...]]]:
        """Ready this loader to be iterated by a pipeline: what starts one pass of it."""
        self.driver.check_nonempty()  # here, not as an error from inside a tf.data op
        if self._processes is not None:
            try:
                self._processes.start()  # the workers import while TensorFlow builds the pipeline
            except Exception as e:
                if not self._fallback:
                    raise
                self._to_threads(e)
        return functools.partial(self._iteration, self._cardinality()[1])

    def _cardinality(self) -> tuple[int | None, int | None]:
        """``(upcoming, declared)``: the batches of the next iteration (None: forever), and the
        cardinality to declare. Declared where every iteration has the same length (Keras then
        needs no steps_per_epoch and does not warn that it ran out of data); a loader standing
        mid-epoch after load_state_dict will have a short first iteration, so none then."""
        upcoming = self.driver.next_iteration_len()
        return upcoming, (upcoming if upcoming is not None and upcoming == len(self) else None)

    def pipeline_key(self) -> tuple[Any, ...]:
        """What the graph of :meth:`as_dataset` depends on. Loaders with equal keys can share
        one graph, each pass started by whichever loader is bound to it (compat builds the
        graph once for a context manager per epoch: tracing it costs ~0.1 s a build)."""
        return (type(self), tuple(self.plans), self._packed, self._group, self._cardinality(),
                self.planner.world_size > 1, self.device)

    def _pipeline(self, start: Callable[[], Iterator[tuple[np.ndarray, ...]]]) -> tf.data.Dataset:
        """The ``tf.data`` graph over passes that ``start()`` begins (see :meth:`_begin`)."""
        upcoming, declared = self._cardinality()
        ds = batch_source(start, self._part_specs(), self._assemble, self._element(self.element_spec),
                          group=self._group)
        options = tf.data.Options()
        options.experimental_optimization.inject_prefetch = False
        if self.planner.world_size > 1:  # already this pipeline's shard: no second sharding
            options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
        ds = ds.with_options(options)
        if upcoming is None:
            ds = ds.apply(tf.data.experimental.assert_cardinality(tf.data.INFINITE_CARDINALITY))
        elif declared is not None:
            ds = ds.apply(tf.data.experimental.assert_cardinality(declared))
        if self.device is not None:
            ds = ds.apply(tf.data.experimental.prefetch_to_device(self.device, buffer_size=1))
        return ds

    def __iter__(self) -> Iterator[dict[str, Any]]:  # type: ignore[override]
        """Eager iteration over :meth:`as_dataset` (tensors, not numpy)."""
        return iter(self.as_dataset())


def _unpacking(items: Iterator[tuple[Any, ...]], strings: list[str | None]) -> Iterator[tuple[Any, ...]]:
    with contextlib.closing(items):  # closing this closes the driver's iteration (its workers)
        for item in items:
            yield _unpacked(item, strings)


def _unpacked(item: tuple[Any, ...], strings: list[str | None]) -> tuple[Any, ...]:
    """Packed string parts as TensorFlow takes them: the bytes as one scalar (one copy), the
    starts and lengths as they are. ``strings[i]``: the column name where part ``i`` is a
    string column's (a worker packs them all, or hands over what does not pack as it is)."""
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


def _rank_world(input_context: Any, rank: int | None, world_size: int | None) -> tuple[int, int]:
    if input_context is None:
        return (0 if rank is None else rank), (1 if world_size is None else world_size)
    if rank is not None or world_size is not None:
        raise InvalidArgumentError(
            "pass either input_context or rank/world_size, not both: the input context already "
            f"says this is pipeline {getattr(input_context, 'input_pipeline_id', '?')} of "
            f"{getattr(input_context, 'num_input_pipelines', '?')}")
    if not hasattr(input_context, "input_pipeline_id") or not hasattr(input_context, "num_input_pipelines"):
        raise InvalidArgumentTypeError(
            "input_context must be a tf.distribute.InputContext (what "
            "strategy.distribute_datasets_from_function passes to your dataset_fn), got "
            f"{type(input_context).__name__}")
    return int(input_context.input_pipeline_id), int(input_context.num_input_pipelines)


def _check_device(device: str | None) -> str | None:
    if device is None:
        return None
    if not isinstance(device, str):
        raise InvalidArgumentTypeError(f"device must be a string like '/gpu:0' or None, got {device!r}")
    try:
        spec = tf.DeviceSpec.from_string(device)
    except ValueError as e:
        raise InvalidArgumentError(f"device {device!r} is not a TensorFlow device name like '/gpu:0': {e}") from e
    if spec.job is None and spec.device_type is not None:  # a local device: it must exist
        local = tf.config.list_logical_devices(spec.device_type.upper())
        if len(local) <= (spec.device_index or 0):
            seen = [d.name for d in tf.config.list_logical_devices()]
            raise InvalidArgumentError(
                f"device {device!r} is not available; TensorFlow sees {seen}. Pass device=None to "
                "keep batches on the host")
    return device


def dataset(url_or_dataset: Any, batch_size: int = 32, **kwargs: Any) -> tf.data.Dataset:
    """``TFLoader(url_or_dataset, batch_size, **kwargs).as_dataset()``: see :class:`TFLoader`."""
    return TFLoader(url_or_dataset, batch_size, **kwargs).as_dataset()
