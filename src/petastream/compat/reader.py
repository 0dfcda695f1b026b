"""Petastorm's ``make_batch_reader``: the MDS dataset a converter materialized, or any Parquet store.

On Parquet (:class:`~petastream.parquet.ParquetSource`), as Petastorm: ``filters`` are pyarrow's
(pushed down, exact sizes); ``predicate`` keeps rows (raw values, its fields read at open);
``rowgroup_selector`` uses the dataset's row-group index; ``cur_shard``/``shard_count`` keep
the row groups at positions ``i % shard_count == cur_shard`` (so shards may differ in rows,
as in Petastorm); see :mod:`petastream.compat._parquet_select`. Codec columns of a Unischema
dataset come back undecoded (bytes), as Petastorm's batch reader gives them: use
:func:`~petastream.compat.make_reader` to decode them.

The returned :class:`Reader` holds the reading plan (columns, order, shard, epochs, transform)
and hands it to the loaders (``petastream.compat.pytorch``, the TF context manager), which run
petastream's bulk loader with it. Iterating a Reader directly yields namedtuples of numpy
columns, a batch of rows at a time, as Petastorm's batch reader does.

Accepted as Petastorm does but with no effect on MDS: ``results_queue_size``,
``shuffle_row_drop_partitions`` (on Parquet, with ``shuffle_row_groups``: row groups read as
that many permuted parts, as Petastorm's), ``shard_seed``, the ``cache_*`` arguments, ``hdfs_driver``,
``zmq_copy_buffers``, ``convert_early_to_numpy``, ``filesystem``. ``workers_count`` is the number
of decode workers: threads for ``reader_pool_type="thread"``; for ``"process"`` the PyTorch
loaders decode in DataLoader worker processes and ``make_tf_dataset`` in petastream's own
(:mod:`petastream.pipeline.procpool.pool`), as it also does for ``"thread"`` without a
``TransformSpec`` (see :func:`petastream.compat._tf._worker_type`); iterating a Reader directly
uses threads.
On MDS, ``predicate``, ``rowgroup_selector`` and ``filters`` are refused with a clear error:
filter the DataFrame before converting it.
"""

from __future__ import annotations

import functools
import os
import secrets
import threading
import warnings
from collections import namedtuple
from collections.abc import Callable, Generator
from typing import Any

import numpy as np

from petastream.compat import _source_reuse as source_reuse
from petastream.compat._batch_open import (
    dataset_root,
    open_batch_source,
    select_columns,
    source_cache_options,
)
from petastream.compat._batch_values import as_petastorm_column, petastorm_batch, temporal_units
from petastream.compat._checks import check_num_epochs
from petastream.compat._row_cache import (
    LocalDiskCache,
    NullCache,
    check_local_disk,
    cleanup_cache,
    pool_diagnostics,
)
from petastream.compat._row_source import SHARD_SEED_WARNING
from petastream.compat._urls import normalize_dir_url
from petastream.compat.errors import reset_early_error, stopped_error
from petastream.compat.row_reader import make_reader  # petastorm.reader has both readers
from petastream.compat.transform import TransformSpec, transform_batch
from petastream.errors import InvalidArgumentError
from petastream.mds.dataset import MDSDataset
from petastream.pipeline.onerror import ErrorPolicy, OnError
from petastream.source import is_source

__all__ = ["make_batch_reader", "make_reader", "Reader", "dataset_root", "stopped_error"]


ROWS_PER_ITEM = 1024


@functools.lru_cache(maxsize=256)
def _row_type(name: str, fields: tuple[str, ...]) -> type:
    """One namedtuple class per name and fields, so that readers of the same columns give
    elements of the same type (and a later context can take over an earlier one's TF graph)."""
    return namedtuple(name, fields)


class Reader:
    """The plan of a read: see :func:`make_batch_reader`."""

    is_batched_reader = True
    batched_output = True
    ngram = None

    def __init__(self, dataset: MDSDataset, *, columns: list[str], shuffle: bool, shuffle_rows: bool,
                 seed: int, num_epochs: int | None, rank: int, world_size: int, workers: int,
                 transform_spec: TransformSpec | None, pool_type: str = "thread", zmq_copy_buffers: bool = True,
                 cache: NullCache | None = None, drop_partitions: int = 1,
                 pending_error: ValueError | None = None, on_error: OnError = "raise",
                 casts: dict[str, str] | None = None):
        self.dataset = dataset
        #: ``{column: numpy dtype}`` cast in each batch before the TransformSpec (see make_batch_reader).
        self.casts = dict(casts or {})
        #: What a row that fails to decode or transform does (see :func:`make_batch_reader`).
        self.on_error = ErrorPolicy(on_error).on_error
        self._loader: Any = None  # the BatchLoader of this reader's own pass (its stats)
        #: Raised at the first read (a predicate's bad fields, as Petastorm raises them).
        self.pending_error = pending_error
        self.drop_partitions = int(drop_partitions or 1)
        self.columns = columns
        self.shuffle = shuffle
        self.shuffle_rows = shuffle_rows
        self.seed = seed
        self.num_epochs = num_epochs
        self.rank, self.world_size = rank, world_size
        self.workers = workers
        self.pool_type = pool_type
        self.transform_spec = transform_spec
        out = transform_spec.output_columns(columns) if transform_spec else columns
        self.schema_fields = out
        self.Row = _row_type("inferred_schema_view" if not transform_spec else "inferred_schema_transformed_view",
                             tuple(out))
        self.stopped = False
        self.last_row_consumed = False
        self.zmq_copy_buffers = zmq_copy_buffers
        self._lock = threading.RLock()  # next() from several threads: each batch served once
        self._pass: Generator[Any, None, None] | None = None  # this reader's own pass (iterating it directly)
        self._peeked: list[Any] = []
        self._handed_out = 0
        self.cache = cache or NullCache()
        #: Loaders reading this plan in worker processes: join() releases their workers.
        self.worker_loaders: list[Any] = []
        self._on_join: list[Callable[[], None]] = []  # then these (a TF context keeps its graph)

    def loader_kwargs(self, batch_size: int, shuffling_queue_capacity: int = 0,
                      own_arrays: bool = False) -> dict[str, Any]:
        """Keyword arguments for a :class:`~petastream.pipeline.BatchLoader` reading this plan.

        ``own_arrays``: for a loader that serves variable-length arrays as Petastorm does
        itself and casts columns given ``dtypes`` (:class:`petastream.tf.TFLoader` with
        ``ragged="uniform"``): without a ``TransformSpec``, no transform runs on Parquet
        batches (a transform is Python per batch, and keeps a TensorFlow loader from handing
        batches over in groups); the casts come as ``dtypes``.

        The order is Petastorm's where Petastorm's is observable:

        * ``shuffle_row_groups`` (the default) and no shuffling queue: shards (Petastorm's row
          groups: the converter's shard size is its ``parquet_row_group_size_bytes``, and a
          Parquet store's shards are its row groups) come in a permuted order, the rows of each
          in their stored order, as Petastorm's batch reader hands out whole row groups. So a
          one-partition DataFrame comes back in ``df.collect()`` order, as under Petastorm.
        * a shuffling queue (``shuffling_queue_capacity`` > 0): Petastorm's takes a whole row
          group at a time (its buffer grows past its capacity to hold one) and carries
          ``capacity`` rows into the next, so its rows mix across about a row group plus the
          capacity. With ``shuffle_row_groups`` (or ``shuffle_rows``) blocks of samples are
          permuted and shuffled within the native loader's window (or the capacity, if
          larger): at least Petastorm's mixing, at the native loader's speed; without, the
          window is the largest shard plus the capacity, shards kept whole.
        * ``shuffle_rows`` alone: rows shuffled within the native window (Petastorm: within
          each row group), which is at least Petastorm's mixing.
        * none of them: the stored order.

        The native window is left to the loader (``window=None``), so that a ``cache_limit``
        smaller than the dataset gets the loader's cache-fitted shuffle (each shard downloaded
        once per epoch) instead of a window that would re-download.
        """
        from petastream.stream import DEFAULT_WINDOW

        if self.pending_error is not None:
            raise self.pending_error
        capacity = int(shuffling_queue_capacity or 0)
        whole_shards = 1 << 62  # a block never spans two shards: blocks are the shards
        shuffle, window, block_size = self.shuffle, None, None
        if self.shuffle and (self.shuffle_rows or capacity > 0):
            window = capacity if capacity > DEFAULT_WINDOW else None  # None: the loader's default
        elif self.shuffle:  # whole shards permuted, each read in order (a window of one sample)
            window, block_size = 1, whole_shards
            if self.drop_partitions > 1 and not isinstance(self.dataset, MDSDataset):
                # Petastorm reads each row group as that many parts, each its own work item, so the
                # parts of all row groups come permuted: blocks of a part's size (the median shard's).
                median = int(np.median(self.dataset.shard_sizes)) if len(self.dataset.shard_sizes) else 1
                block_size = max(1, median // self.drop_partitions)
        elif capacity > 0:
            largest = int(max(self.dataset.shard_sizes, default=0))
            shuffle, window, block_size = True, largest + capacity, whole_shards
        kwargs: dict[str, Any] = dict(
            batch_size=batch_size, shuffle=shuffle, seed=self.seed, num_epochs=self.num_epochs,
            columns=self.columns, num_workers=self.workers, rank=self.rank,
            world_size=self.world_size, window=window, block_size=block_size,
            transform=self._transform(), on_error=self.on_error,
        )
        if own_arrays and self.transform_spec is None and not isinstance(self.dataset, MDSDataset):
            kwargs.update(transform=None, dtypes=dict(self.casts), widths=self._first_widths(batch_size))
        return kwargs

    def _first_widths(self, rows: int) -> dict[str, int]:
        """``{column: k}`` for the variable-length array columns whose first ``rows`` rows all
        hold ``k`` values: declared ``(batch, k)`` to TensorFlow, as Petastorm's transform path
        (and this one before batches went over in groups) typed them from its first batch."""
        from petastream.columns.ragged import Ragged

        wanted = set(self.columns) if self.columns is not None else None
        names = [n for n, enc in self.dataset.columns.items()
                 if enc.startswith("ndarray:") and enc.count(":") == 1 and (wanted is None or n in wanted)]
        k = min(len(self.dataset), rows)
        if not names or k == 0:
            return {}
        probe = self.dataset.read(np.arange(k), names)
        widths = {}
        for n in names:
            col = probe[n]
            lengths = col.lengths() if isinstance(col, Ragged) else None
            if lengths is not None and (lengths == lengths[0]).all():
                widths[n] = int(lengths[0])
        return widths

    def _transform(self) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
        """What the loader's workers run on each batch (picklable): on Parquet, list columns
        as Petastorm gives them (:func:`~petastream.compat._batch_values.as_petastorm_column`: equal lengths -> one 2-D array,
        so a torch batch is one tensor, not a list of rows); then the TransformSpec."""
        spec = self.transform_spec
        if isinstance(self.dataset, MDSDataset):  # as the converter always read it
            return functools.partial(transform_batch, spec) if spec else None
        return functools.partial(petastorm_batch, spec, casts=self.casts or None)

    # -- Petastorm's Reader interface: an iterator of batches, safe to call from several threads --
    def __iter__(self) -> Reader:
        return self

    def __next__(self) -> Any:
        with self._lock:
            if self.stopped:
                raise stopped_error()
            if self.pending_error is not None:
                raise self.pending_error
            if self._peeked:
                return self._peeked.pop()
            if self._pass is None:
                self._pass = self._batches()
            try:
                batch = next(self._pass)
            except StopIteration:
                self.last_row_consumed = True
                raise
            self._handed_out += 1
            return batch

    def next(self) -> Any:
        return self.__next__()

    def peek(self) -> Any:
        """The next batch, left for the next ``next()`` (petastream's: how a consumer learns the
        batch type without taking a batch from the reader's one pass)."""
        with self._lock:
            if not self._peeked:
                self._peeked.append(self.__next__())
            return self._peeked[-1]

    def _batches(self) -> Generator[Any, None, None]:
        from petastream.pipeline import BatchLoader

        kwargs = self.loader_kwargs(ROWS_PER_ITEM)
        units = temporal_units(self.dataset)
        if units:  # Parquet dates and timestamps as Petastorm's batch reader yields them
            kwargs["transform"] = functools.partial(petastorm_batch, self.transform_spec, temporal=units,
                                                    casts=self.casts or None)
        self._loader = BatchLoader(self.dataset, **kwargs)
        for batch in self._loader:
            yield self.Row(**{k: as_petastorm_column(v) for k, v in batch.items()})

    def stats(self) -> dict[str, Any]:
        """The figures of this reader's own reads (iterating it), as
        :meth:`petastream.pipeline.BatchLoader.stats` gives them: rows, batches, ``skipped``
        (rows ``on_error`` left out), ...; empty before the first read. The loaders reading this
        plan (``petastream.compat.pytorch``, ``make_tf_dataset``) count their own."""
        return self._loader.stats() if self._loader is not None else {}

    @property
    def diagnostics(self) -> dict[str, Any]:
        """Petastorm's keys for the pool type, counting this reader's own batches (see
        :func:`~petastream.compat._row_cache.pool_diagnostics`)."""
        return pool_diagnostics(self.pool_type, waiting=len(self._peeked), handed_out=self._handed_out,
                                done=self._handed_out, zmq_copy_buffers=self.zmq_copy_buffers)

    def reset(self) -> None:
        """Petastorm's: a new pass once the last one was read to its end (the loaders of this plan
        run their own passes, so a reader they read is always ready for one)."""
        with self._lock:
            if self._pass is not None and not self.last_row_consumed:
                raise reset_early_error()
            self._close_pass()
            self.last_row_consumed = False

    def _close_pass(self) -> None:
        if self._pass is not None:
            self._pass.close()  # ends the pass's BatchLoader (its threads) now, not at garbage collection
        self._pass = None
        self._peeked.clear()

    def stop(self) -> None:
        self.stopped = True

    def cleanup_cache(self) -> None:
        """Petastorm's: removes a ``cache_type="local-disk"`` cache (see :func:`make_batch_reader`)
        and prints ``Cache cleanup complete.``, as Petastorm does when called."""
        cleanup_cache(self.cache, announce=True)

    def on_join(self, release: Callable[[], None]) -> None:
        """Call ``release`` at :meth:`join`, after those given before it."""
        self._on_join.append(release)

    def join(self) -> None:
        """Petastorm's join waits for its worker pool; here it ends this reader's own pass and
        releases the worker processes of the loaders reading this plan (:attr:`worker_loaders`),
        which the next context's loader takes over, else they stop after a minute; then what
        :meth:`on_join` was given (a TF graph, kept for the next context)."""
        with self._lock:
            self._close_pass()
        for loader in self.worker_loaders:
            loader.close()
        self.worker_loaders.clear()
        for release in self._on_join:
            release()
        self._on_join.clear()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        self.join()
        cleanup_cache(self.cache, announce=False)


def make_batch_reader(dataset_url_or_urls: str | list[Any], schema_fields: list[Any] | None = None,
                      reader_pool_type: str = "thread", workers_count: int | None = 10,
                      results_queue_size: int = 50, seed: int | None = None, shuffle_rows: bool = False,
                      shuffle_row_groups: bool = True, shuffle_row_drop_partitions: int = 1,
                      predicate: Any = None, rowgroup_selector: Any = None, num_epochs: int | None = 1,
                      cur_shard: int | None = None, shard_count: int | None = None,
                      shard_seed: int | None = None, cache_type: str | None = "null",
                      cache_location: str | None = None, cache_size_limit: int | None = None,
                      cache_row_size_estimate: int | None = None, cache_extra_settings: dict | None = None,
                      hdfs_driver: str = "libhdfs3", transform_spec: TransformSpec | None = None,
                      filters: Any = None, storage_options: dict | None = None, zmq_copy_buffers: bool = True,
                      filesystem: Any = None, convert_early_to_numpy: bool = False,
                      cache_limit: int | str | None = None, null_policy: str = "petastorm",
                      on_error: OnError = "raise", casts: dict[str, str] | None = None) -> Reader:
    """Petastorm's signature and defaults; reads the MDS dataset at (or behind) the URLs, or
    their Parquet files, or a mixture: a list of ``petastream.Stream`` (each epoch the streams'
    shares exactly once, ``cur_shard``/``shard_count`` splitting it as ranks; see
    docs/native-api.md, Mixtures).

    ``cache_type="local-disk"`` keeps decoded row groups of Parquet files in the node's shard
    cache (``cache_location``, default petastream's cache directory), so later epochs and
    readers map them instead of decoding again (see :mod:`petastream.parquet.decoded`).
    ``cache_limit`` (petastream's, bytes or ``"50gb"``; default ``cache_size_limit`` with
    ``"local-disk"``, else ``$PETASTREAM_CACHE_LIMIT``)
    bounds the node's shard cache for remote or compressed datasets; the converter's
    ``make_torch_dataloader(cache_limit=...)`` / ``make_tf_dataset(...)`` pass it through.
    ``null_policy`` (petastream's, Parquet only): ``"petastorm"`` (default: nulls as Petastorm's
    batch reader gives them through pandas: NaN, integer columns holding nulls as float64,
    None, ``'None'`` for strings, NaT; see :mod:`petastream.parquet.convert`), ``"error"`` (a
    column with nulls is an error naming it) or ``"fill"`` (0, NaN, '', b'').

    ``on_error`` (petastream's): what a row that fails to decode or whose ``transform_spec``
    raises does, as the native loaders' (:mod:`petastream.pipeline.onerror`): ``"raise"``
    (default: the error, its type kept, with a note naming the dataset, row group, row and
    column), ``"skip"`` (left out, counted in :meth:`Reader.stats` / the loader's ``stats()``,
    logged), ``"warn"`` (and each error logged), or ``fn(BadSample) -> bool`` (True: skip).
    The converter's ``make_torch_dataloader`` / ``make_tf_dataset`` pass it through
    (``on_error=`` among their Petastorm reader arguments).

    An open :class:`petastream.source.Source` (the converter's direct read of a table) is read as
    given, sharded as an MDS dataset; ``casts`` (``{column: numpy dtype}``) casts those columns
    in each batch before the ``TransformSpec`` (the converter's ``dtype`` there)."""
    policy = ErrorPolicy(on_error)  # checked before anything is opened
    if not is_source(dataset_url_or_urls) and not isinstance(dataset_url_or_urls, (os.PathLike, list, tuple)):
        normalize_dir_url(dataset_url_or_urls)  # Petastorm's ValueError (IndexError for '')
    if reader_pool_type not in ("thread", "process", "dummy"):
        raise ValueError(f"Unknown reader_pool_type: {reader_pool_type}")
    if cache_type not in (None, "null", "local-disk"):
        raise ValueError(f"Unknown cache_type: {cache_type}")
    if filesystem is not None:
        raise InvalidArgumentError("make_batch_reader(filesystem=...) is not supported by petastream.compat; pass "
                                   "the URL with storage_options for its fsspec filesystem")
    if (cur_shard is None) != (shard_count is None) or (
        cur_shard is not None and not (isinstance(cur_shard, int) and isinstance(shard_count, int))
    ):
        raise ValueError("partition and num_partitions must be ints and both specified to use partitioning")
    check_num_epochs("make_batch_reader", num_epochs)
    if shard_seed:
        warnings.warn(SHARD_SEED_WARNING, UserWarning, stacklevel=2)
    num_epochs = None if num_epochs is None else int(num_epochs)
    disk_cache = None
    if cache_type == "local-disk":
        directory = check_local_disk("make_batch_reader", cache_location, cache_size_limit,
                                     cache_row_size_estimate, cache_extra_settings)
        disk_cache = LocalDiskCache(directory) if directory is not None else NullCache()
    cache = source_cache_options(cache_type, cache_location, cache_size_limit, cache_limit)
    dataset, pending, sharded = open_batch_source(
        dataset_url_or_urls, storage_options=storage_options, cache=cache, filters=filters, predicate=predicate,
        rowgroup_selector=rowgroup_selector, cur_shard=cur_shard, shard_count=shard_count, null_policy=null_policy,
        schema_fields=schema_fields)
    if sharded:
        cur_shard = shard_count = None  # the shard's row groups are the source's
    columns = select_columns(list(dataset.columns), schema_fields)
    # 'dummy' is Petastorm's single-threaded debugging pool; otherwise threads, at most the cores.
    workers = 1 if reader_pool_type == "dummy" else max(1, min(int(workers_count or 1), os.cpu_count() or 1))
    if seed is None:
        # Ranks must agree on the order to split it: with sharding, derive the seed from the
        # dataset (every rank computes the same one); alone, draw one as Petastorm does.
        seed = int(dataset.fingerprint[:8], 16) & 0x7FFFFFFF if shard_count else secrets.randbits(31)
    reader = Reader(
        dataset, columns=columns, shuffle=bool(shuffle_row_groups or shuffle_rows), shuffle_rows=bool(shuffle_rows),
        seed=int(seed), num_epochs=num_epochs,
        rank=cur_shard or 0, world_size=shard_count or 1, workers=workers, transform_spec=transform_spec,
        pool_type=reader_pool_type, zmq_copy_buffers=zmq_copy_buffers, cache=disk_cache,
        drop_partitions=shuffle_row_drop_partitions, pending_error=pending, on_error=policy.on_error, casts=casts,
    )
    reader.on_join(functools.partial(_give_back_source, reader))
    return reader


def _give_back_source(reader: Reader) -> None:
    """At a stopped reader's join: its Parquet source, kept for the next reader of the same
    files (see :mod:`petastream.compat._source_reuse`)."""
    if reader.stopped:
        source_reuse.give_back(reader.dataset)
