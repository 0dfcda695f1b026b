"""``TFLoader``: the bulk batch loader, typed for TensorFlow (its graph: :mod:`petastream.tf._graph`)."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import tensorflow as tf

from petastream.capabilities import reading_strings
from petastream.columns.strings import jagged_columns
from petastream.errors import InvalidArgumentError, InvalidArgumentTypeError
from petastream.mix.source import open_source
from petastream.pipeline import BatchLoader, PassWork
from petastream.pipeline.executor import Executor
from petastream.pipeline.loader import checked_columns, checked_workers
from petastream.pipeline.onerror import ErrorPolicy, OnError
from petastream.pipeline.parts import RAGGED, STRING, UNIFORM, ColumnParts, FlatParts
from petastream.pipeline.procpool import AutoExecutor, ProcessExecutor, processes_fit
from petastream.pipeline.threads import ThreadExecutor
from petastream.source import Source
from petastream.tf._columns import ColumnPlan, jagged_read, plan_columns
from petastream.tf._source import groupable, groups_supported

__all__ = ["TFLoader", "dataset"]

_GROUP_BYTES = 64 << 20  # at most about this much per hand-over: big rows (images) go few batches at a time
_RAGGED_MODES = ("ragged", "uniform")
_WORKER_TYPES = ("auto", "process", "thread")
log = logging.getLogger("petastream.tf")


class TFLoader(BatchLoader):
    """A :class:`~petastream.pipeline.BatchLoader` whose :meth:`as_dataset` is a ``tf.data.Dataset``.

    Elements are ``dict[str, tf.Tensor | tf.RaggedTensor]`` of one batch each, in plan order
    (see :mod:`petastream.tf`). Reading, as :class:`~petastream.pipeline.BatchLoader`:
    ``dataset`` (a :class:`~petastream.source.Source` or an MDS URL opened with
    ``dataset_options``), ``batch_size`` (per pipeline), ``shuffle``, ``seed``, ``block_size``,
    ``window``, ``num_epochs`` (None: forever), ``drop_last``, ``columns``, ``transform`` (in
    the workers, on numpy columns), ``logical_types``, ``num_workers``, ``prefetch``,
    ``readahead``, ``rank``/``world_size``. And:

    * ``input_context``: a ``tf.distribute.InputContext`` (``distribute_datasets_from_function``):
      this input pipeline reads shard ``input_pipeline_id`` of ``num_input_pipelines`` (instead
      of ``rank``/``world_size``); ``batch_size`` is per pipeline.
    * ``device``: ``"/gpu:0"``-style; batches are prefetched onto it
      (``tf.data.experimental.prefetch_to_device``, one batch ahead). None: stay on the host.
    * ``output_signature``: ``{column: tf.TensorSpec | tf.RaggedTensorSpec}`` (batch dim first)
      instead of the types read from the column encodings. With a ``transform`` (and no
      ``output_signature``) the types are those of ``transform`` run once, here, on the first
      ``batch_size`` rows; it must return the same columns and types for every batch.
    * ``ragged``: ``"ragged"`` (variable-length arrays as ``tf.RaggedTensor``) or ``"uniform"``
      (dense ``(batch, length)``; a batch with unequal lengths raises, as Petastorm does).
    * ``strings``: ``"objects"`` (default: ``str``/``bytes`` columns as ``tf.string``) or
      ``"jagged"`` (a uint8 ``tf.RaggedTensor`` of their bytes, built from row splits, no
      Python object per value); or ``{column: form}``. See docs/native-api.md.
    * ``batches_per_call``: up to this many consecutive batches (default 16, and at most about
      64 MB of stored rows) are decoded, converted and handed to TensorFlow at once, and cut
      apart inside the graph (1.7x the rows/s of one batch per call on 'tabular' rows). An
      epoch starts with groups of 1, 2, 4 and 8 batches. Ragged columns and a ``transform``
      take one batch per hand-over. Plain ``state_dict()`` counts every batch handed over, so
      it may stand up to ``batches_per_call - 1`` batches ahead of a loop that reads nothing
      ahead itself: checkpoint with ``state_dict(steps=k)``, or pass ``batches_per_call=1``.
    * ``worker_type``: ``"process"``: ``num_workers`` decode processes
      (:mod:`petastream.pipeline.procpool`) that hand batches over in shared memory, which
      TensorFlow takes without a copy, out of the way of its per-element Python; they serve
      every epoch and, after :meth:`close`, wait a minute for the next loader. A ``transform``
      must then be importable (module level, not ``__main__``). POSIX only. ``"thread"``:
      decode threads. ``"auto"`` (default): processes where that changes nothing you can see
      (no ``transform``, POSIX; one worker too, see :func:`_processes_fit`), once they are ready: a pass that would
      wait for them to start runs in threads while they start
      (:class:`~petastream.pipeline.procpool.AutoExecutor`); should they not start, threads.
    * ``dtypes``: ``{column: numpy dtype}``: these numeric columns (or their arrays' values)
      come cast to it, in the conversion the decode workers run anyway (no ``transform``,
      so batches still go over in groups); a cast numpy would not call ``same_kind`` (float
      to int) raises. Not with ``transform`` or ``output_signature``, which declare types.
    * ``widths``: ``{column: k}``: variable-length array columns read dense (``ragged="uniform"``)
      declared ``(batch, k)`` instead of ``(batch, None)`` (Keras layers want a known last
      dimension); a batch of another length raises. Same restrictions as ``dtypes``.
    * ``element``: the structure of each element around its columns: None, the dict; or a
      callable taking the columns as keywords (compat: Petastorm's namedtuple), built once
      per hand-over, not by a ``.map`` per batch.
    * ``on_error``, ``log_every``, ``log_summary``: bad samples and ``loader.stats()``, as
      :class:`~petastream.pipeline.BatchLoader`'s. A loader that may skip (anything but
      ``"raise"``) declares no static batch dimension and hands batches over one at a time:
      a batch that lost a sample is that much shorter.

    Checkpoints: ``state_dict()`` counts every batch handed to TensorFlow; stages that read
    ahead of your loop (``device=``, ``.prefetch()``, a parallel ``.map()``, Keras) hold batches
    it has not seen, and so may hand-overs of several batches: ``state_dict(steps=k)`` is the
    position after the first ``k`` batches of the current iteration, exact whatever was read
    ahead (in Keras, ``batch + 1`` in ``on_train_batch_end``).

    Each iteration of the dataset is the next epoch, as for every petastream loader
    (:mod:`petastream.pipeline`). The dataset declares its cardinality (``len(loader)``
    batches, or infinite), so Keras needs no ``steps_per_epoch``. One iteration runs at a time:
    a new one ends any earlier iteration still open.
    """

    def __init__(self, dataset: Source | str, batch_size: int = 32, *, shuffle: bool = False,
                 seed: int = 0, num_epochs: int | None = 1, drop_last: bool = False,
                 columns: Sequence[str] | None = None, num_workers: int = 2, prefetch: int = 2,
                 rank: int | None = None, world_size: int | None = None, block_size: int | None = None,
                 window: int | None = None, transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                 dataset_options: dict[str, Any] | None = None, logical_types: bool = True,
                 readahead: int = 2, device: str | None = None, input_context: Any = None,
                 output_signature: Mapping[str, Any] | None = None, ragged: str = "ragged",
                 batches_per_call: int = 16, worker_type: str = "auto",
                 element: Callable[..., Any] | None = None, on_error: OnError = "raise",
                 log_every: float | None = None, log_summary: bool = False,
                 strings: str | Mapping[str, str] = "objects", dtypes: Mapping[str, Any] | None = None,
                 widths: Mapping[str, int] | None = None):
        if worker_type not in _WORKER_TYPES:
            raise InvalidArgumentError(f"worker_type must be one of {_WORKER_TYPES}, got {worker_type!r}")
        if isinstance(batches_per_call, bool) or not isinstance(batches_per_call, int) or batches_per_call < 1:
            raise InvalidArgumentError(
                f"batches_per_call must be an int >= 1 (batches handed to TensorFlow per Python call), "
                f"got {batches_per_call!r}")
        if ragged not in _RAGGED_MODES:
            raise InvalidArgumentError(f"ragged must be one of {_RAGGED_MODES}, got {ragged!r}")
        if element is not None and not callable(element):
            raise InvalidArgumentTypeError(f"element must be a callable (columns as keywords), got {element!r}")
        rank, world_size = _rank_world(input_context, rank, world_size)
        checked_workers(num_workers, prefetch, readahead)
        source = open_source(dataset, dataset_options)
        names = checked_columns(source, columns, transform)
        jagged = jagged_columns(strings, source.columns, names, getattr(source, "null_policy", None))
        plans = plan_columns(source, names, ragged=ragged, logical_types=logical_types,
                             probe_rows=_batch_size(batch_size), transform=transform,
                             output_signature=output_signature, jagged=jagged, dtypes=dtypes,
                             widths=widths)
        processes = worker_type == "process" or (worker_type == "auto" and _processes_fit(transform, num_workers)
                                                 and not callable(on_error))  # (your code: as a transform)
        # Whether string columns come packed: from processes their values cross into shared
        # memory as bytes and offsets, and TensorFlow cuts them apart, instead of being pickled
        # and rebuilt one Python object per value here. Fixed now, as the graph's parts are,
        # even where a pass runs in threads (which then pack their objects).
        packed = processes and any(p.kind == STRING for p in plans)
        # A loader that may skip samples makes short batches, and hands them over one by one.
        skips = ErrorPolicy(on_error).may_skip
        group = 1 if skips else _group(source, plans, batch_size, batches_per_call, transform)
        super().__init__(
            source, batch_size, shuffle=shuffle, seed=seed, num_epochs=num_epochs, drop_last=drop_last,
            columns=columns, num_workers=num_workers, prefetch=prefetch, rank=rank, world_size=world_size,
            block_size=block_size, window=window, transform=transform, logical_types=logical_types,
            readahead=readahead,
            # TensorFlow-free, so that worker processes convert without importing TensorFlow
            convert=FlatParts(tuple(ColumnParts(p.name, p.kind, p.dtype, p.shape) for p in plans), group > 1),
            executor=_executor(worker_type, processes, num_workers, prefetch, packed),
            work_stages=([functools.partial(_grouped, group)] if group > 1 else [])
            + ([jagged_read] if jagged and transform is None and not any(p.kind == STRING for p in plans) else []),
            superseded="stop", on_error=on_error, log_every=log_every, log_summary=log_summary)  # tf.data may open the next epoch's iterator before closing the last
        self.batches_per_call, self.group = batches_per_call, group
        self.device = _check_device(device)
        self.ragged, self.element, self.plans, self.packed = ragged, element, plans, packed
        if jagged_read in self.work_stages:
            reading_strings(source, "ragged")  # now: the source's read-ahead may load before a pass starts

    @property
    def worker_type(self) -> str:
        """``"thread"`` or ``"process"``: where this loader's passes decode (``"auto"`` resolved)."""
        return self.executor.worker_type

    # -- types --------------------------------------------------------------------------------
    @property
    def batch_dim(self) -> int | None:
        """The static batch dimension: fixed when every batch is full (drop_last, or padding
        over several ranks), else None (the last batch of an epoch may be short)."""
        p = self.planner
        return p.batch_size if (p.drop_last or p.world_size > 1) and not self.on_error.may_skip else None

    @property
    def element_spec(self) -> dict[str, Any]:
        """``{column: tf.TensorSpec | tf.RaggedTensorSpec}`` of the dataset's elements."""
        return {p.name: p.spec(self.batch_dim) for p in self.plans}

    def part_specs(self) -> tuple[tf.TensorSpec, ...]:
        """The flat parts a hand-over carries, in order."""
        return tuple(s for p in self.plans for s in p.part_specs(self.batch_dim, self.packed))

    # -- the dataset ---------------------------------------------------------------------------
    def as_dataset(self) -> tf.data.Dataset:
        """A ``tf.data.Dataset`` of this loader's batches (see the class doc for epochs).

        Nothing in it reads ahead of your loop (tf.data's injected prefetch is off; the
        loader's decode workers already keep ``num_workers * prefetch`` batches ready), so
        :meth:`state_dict` counts exactly the batches a plain loop over it took. ``device``
        holds one batch in flight; see :meth:`state_dict` for pipelines that read ahead.
        """
        from petastream.tf._graph import as_dataset

        return as_dataset(self)

    def __iter__(self) -> Iterator[Any]:
        """Eager iteration over :meth:`as_dataset` (tensors, not numpy)."""
        return iter(self.as_dataset())


def _processes_fit(transform: Any, num_workers: int) -> bool:
    """Whether ``worker_type="auto"`` decodes in processes: where :func:`processes_fit` says so,
    and with one worker too. Beside TensorFlow's eager iterator (Python per element, holding the
    GIL) one decode thread serializes with it: on 1M 'tabular' rows the thread's consumer spent
    0.50 CPU-s where one worker process left it 0.22 (the worker's own 0.20 on the other core),
    and the thread's decode alone costs 0.19 in the same process; so one process, not one thread,
    where a torch loader (no Python per batch in between) keeps its thread."""
    return processes_fit(transform, max(num_workers, 2))


def _batch_size(batch_size: int) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidArgumentError(f"batch_size must be an int >= 1 (rows per batch), got {batch_size!r}")
    return batch_size


def _executor(worker_type: str, processes: bool, num_workers: int, prefetch: int, packed: bool) -> Executor:
    threads = ThreadExecutor(num_workers, prefetch)
    if not processes:
        return threads
    pool = ProcessExecutor(num_workers, slots=prefetch + 2, strings=packed)
    return pool if worker_type == "process" else AutoExecutor(pool, threads)


def _group(source: Source, plans: list[ColumnPlan], batch_size: int,
           batches_per_call: int, transform: Any) -> int:
    """Batches per hand-over: ``batches_per_call`` where every column has a fixed row shape or
    is ``uniform`` (cut into batches of one length each as they reach TensorFlow:
    :func:`petastream.tf._graph.uniform_cut`) and no transform runs (a transform is called per
    batch), at most about ``_GROUP_BYTES``; else 1."""
    fixed = tuple(s for p in plans if p.kind != UNIFORM for s in p.part_specs(None))
    if transform is not None or any(p.kind == RAGGED for p in plans) or not groupable(fixed) \
            or not groups_supported():
        return 1
    n = len(source)
    batch_bytes = batch_size * (source.stored_bytes // n if n else 0)
    return max(1, min(batches_per_call, _GROUP_BYTES // max(1, batch_bytes)))


def _grouped(group: int, work: PassWork) -> PassWork:
    """A work stage: hand-overs of ``group`` batches (fewer where chunks were fitted to a
    bounded cache: a group fits in one chunk)."""
    if work.may_skip:  # a resumed state's skipped samples: batches of unequal lengths
        return work
    if work.max_chunk is not None:
        group = max(1, min(group, work.max_chunk // work.plan.batch_size))
    return dataclasses.replace(work, group=group)


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


def dataset(url_or_dataset: Source | str, batch_size: int = 32, **kwargs: Any) -> tf.data.Dataset:
    """``TFLoader(url_or_dataset, batch_size, **kwargs).as_dataset()``: see :class:`TFLoader`
    for every argument (editors and ``help()`` show them: the signature is TFLoader's)."""
    return TFLoader(url_or_dataset, batch_size, **kwargs).as_dataset()


dataset.__signature__ = inspect.signature(TFLoader).replace(return_annotation="tf.data.Dataset")  # type: ignore[attr-defined]
