"""Petastorm's ``make_reader``: one namedtuple per row of a Unischema dataset written by
Petastorm (or by :mod:`petastream.compat.etl`), its codecs decoded; of a plain Parquet store, a
file or a list of files, rows typed by the Parquet schema, with Petastorm's warning
(:mod:`petastream.compat._row_source`).

It runs on the one pipeline (:mod:`petastream.pipeline`), as the native loaders do:

* which row groups are read is decided at open as Petastorm decides it
  (:mod:`petastream.compat._row_plan`: ``filters`` on partition keys, partition predicates,
  row-group selectors, ``cur_shard``/``shard_count`` by row group) and becomes the plan of a
  :class:`~petastream.parquet.ParquetSource`: the node's shard cache for remote files (one
  download per node, ``cache_limit``), read-ahead, pacing;
* a :class:`~petastream.pipeline.BatchLoader` orders it (seeded; ``shuffle_row_groups``: row
  groups permuted, each read in order; ``shuffle_row_drop_partitions``: in that many parts;
  ``shuffle_rows``: rows shuffled) and runs the codec decoding, the per-row ``predicate`` and
  the ``TransformSpec`` as its work stage (:mod:`petastream.compat._row_work`) in the
  executor ``reader_pool_type`` names: decode threads, petastream's worker processes
  (``"process"``), or the iterating thread (``"dummy"``), each reading the stored rows of one
  batch at a time (:func:`one_batch_chunks`);
* rows are made here from its batches, in its order, so a seeded read is reproducible
  (a batch's rows at once, when its first row is asked for; ``take_columns`` hands its rows
  out as columns instead, for the ``DataLoader``'s default collate: :mod:`._row_batches`);
  ``state_dict()``/``load_state_dict()`` resume exactly (the rows served are not served
  again); ``on_error`` is the loader's bad-sample policy; ``stats()`` its figures.

``schema_fields=NGram(...)`` (:mod:`petastream.compat.ngram`) yields windows of rows, as
Petastorm, never across two row groups. ``cache_type="local-disk"``: Petastorm's checks, then
each row group's decoded columns kept in a cache directory of the reader's own
(:class:`~petastream.compat._row_cache.ReaderDiskCache`) for its later epochs.
Refused with an error naming the argument: ``filesystem`` (use ``storage_options``),
``cache_extra_settings``, a filter on a column that is not a partition key (Petastorm ignored
it); accepted without effect, as they tune Petastorm's own pools: ``results_queue_size``,
``pyarrow_serialize``, ``zmq_copy_buffers``, ``hdfs_driver``, ``convert_early_to_numpy``.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import pickle
import secrets
import tempfile
import threading
import warnings
from collections.abc import Generator
from typing import Any

import numpy as np

from petastream.checks import positive_int
from petastream.compat._checks import check_num_epochs
from petastream.compat._row_cache import (
    NullCache,
    ReaderDiskCache,
    check_local_disk,
    cleanup_cache,
    pool_diagnostics,
)
from petastream.compat._row_ngram import NGramWindows
from petastream.compat._row_plan import plan_row_groups, row_source
from petastream.compat._row_source import SHARD_SEED_WARNING, normalize_urls, open_row_source
from petastream.compat._row_work import KEPT, RowWork, as_parts
from petastream.compat.errors import reset_early_error, stopped_error
from petastream.compat.ngram import NGram
from petastream.compat.transform import transform_schema
from petastream.compat.unischema import row_type
from petastream.errors import InvalidArgumentError
from petastream.pipeline import BatchLoader, ThreadExecutor
from petastream.pipeline.executor import Executor
from petastream.pipeline.inline import InlineExecutor
from petastream.pipeline.onerror import OnError
from petastream.pipeline.work import PassWork

__all__ = ["make_reader", "RowReader"]

#: Rows per batch of the loader under the reader: an item of work for a worker.
ROWS_PER_BATCH = 256
_WHOLE_SHARDS = 1 << 62  # a block never spans two row groups: the blocks are the row groups


class RowReader:
    """What :func:`make_reader` returns: an iterator of rows, safe to call from several threads
    (each row served once), with Petastorm's ``reset``/``stop``/``join``/``diagnostics``/
    ``cleanup_cache`` and context manager, and petastream's ``state_dict``/``load_state_dict``
    and ``stats``. ``loader``: the :class:`~petastream.pipeline.BatchLoader` read (None: no
    row group was selected)."""

    is_batched_reader = False
    batched_output = False

    def __init__(self, loader: BatchLoader | None, *, schema: Any, ngram: Any, num_epochs: int | None,
                 seed: int | None, pool_type: str = "thread", zmq_copy_buffers: bool = True,
                 cache: NullCache | None = None, shuffle_rows: bool = False):
        self.schema = schema
        self.ngram = ngram
        self.num_epochs = num_epochs
        self.seed = seed
        self.loader = loader
        self._pool_type = pool_type
        self._zmq_copy_buffers = zmq_copy_buffers
        self.cache = cache or NullCache()
        self.stopped = False
        self.last_row_consumed = False
        self._lock = threading.RLock()  # next() from several threads: one generator step at a time
        self._fields = list(schema.fields)
        #: The columns of the loader's items, in order (:func:`row_parts`).
        self._keys = row_parts(schema, ngram)
        self._row_type = row_type(schema)
        self._windows = (NGramWindows(ngram, schema, loader.dataset.shard_offsets, shuffle_rows, seed)
                         if ngram and loader else None)
        if loader is not None and self._windows is not None:
            loader.work_stages.append(self._note_plan)
        self._handed_out = 0  # batches taken from the loader, all iterations
        self._taken = 0  # batches taken in this iteration
        self._served = self._batch_rows = 0  # rows of the current batch served, and its rows
        #: The current batch: its columns (the schema's fields; None for n-gram windows) and
        #: its rows, made when a row of it is first asked for (:meth:`take_columns` needs none).
        self._columns: list[Any] | None = None
        self._batch: list[Any] | None = None
        self._resume_row = 0  # rows of the first batch already served (a loaded state)
        self._epochs_left = num_epochs  # of the read (a loaded state may have used some)
        self._rows: Generator[bool, None, None] = self._generate()

    # -- the rows of a read ---------------------------------------------------------------------
    def _note_plan(self, work: PassWork) -> PassWork:
        """A work stage (in the iterating thread, before each pass): the pass's plan, from which
        the n-gram windows learn each row's row group."""
        assert self._windows is not None
        self._windows.add_plan(work.plan)
        return work

    def _generate(self) -> Generator[bool, None, None]:
        """Makes each batch of the read the current one (see :meth:`_next_batch`)."""
        if self.loader is None or (self._epochs_left is not None and self._epochs_left <= 0):
            return
        skip, self._resume_row = self._resume_row, 0
        self._taken = 0
        self._served = self._batch_rows = 0
        width = len(self._fields)
        for parts in self.loader:  # (the loader's convert made a tuple: see as_parts)
            self._taken += 1
            self._handed_out += 1
            if self._windows is not None:
                self._set_batch(None, self._windows.take(dict(zip(self._keys, parts))), skip)
            else:
                self._set_batch(list(parts[:width]), None, skip)
            skip = 0
            yield True
        if self._windows is not None:
            self._set_batch(None, list(self._windows.flush()), 0)
            yield True

    def _set_batch(self, columns: list[Any] | None, rows: list[Any] | None, skip: int) -> None:
        n = len(rows) if rows is not None else len(columns[0]) if columns else 0
        self._columns, self._batch = columns, rows
        self._batch_rows, self._served = n, min(skip, n)

    def _next_batch(self) -> bool:
        """Whether a row is left: the current batch's, else the next batch with rows left."""
        while self._served >= self._batch_rows:
            if next(self._rows, False) is False:
                self.last_row_consumed = True
                return False
        return True

    def take_columns(self, n: int) -> dict[str, Any] | None:
        """The next rows, at most ``n`` and all of one loader batch, as the schema's columns
        (what ``n`` calls of ``next()`` would give, as columns: the rows are not made), or None
        when the read is over. For n-gram windows, which are not columns: use ``next()``."""
        with self._lock:
            if self._windows is not None:
                raise InvalidArgumentError("take_columns: a reader of NGram windows serves windows; iterate it")
            if self.stopped:
                raise stopped_error()
            if not self._next_batch():
                return None
            assert self._columns is not None
            start = self._served
            self._served = stop = min(start + n, self._batch_rows)
            return {name: column[start:stop] for name, column in zip(self._fields, self._columns)}

    # -- Petastorm's Reader interface -----------------------------------------------------------
    def __iter__(self) -> RowReader:
        return self

    def __next__(self) -> Any:
        with self._lock:
            if self.stopped:
                raise stopped_error()
            if not self._next_batch():
                raise StopIteration
            if self._batch is None:  # the batch's rows, made at once (zip: no Python per value)
                assert self._columns is not None
                self._batch = [self._row_type(*values) for values in zip(*self._columns)]
            j = self._served
            self._served = j + 1
            return self._batch[j]

    def next(self) -> Any:
        return self.__next__()

    @property
    def diagnostics(self) -> dict[str, Any]:
        """Petastorm's keys for the pool type, counting the loader's batches (see
        :func:`~petastream.compat._row_cache.pool_diagnostics`)."""
        return pool_diagnostics(self._pool_type, waiting=0, handed_out=self._handed_out, done=self._handed_out,
                                zmq_copy_buffers=self._zmq_copy_buffers)

    def stats(self) -> dict[str, Any]:
        """The loader's figures (:meth:`petastream.pipeline.BatchLoader.stats`): rows and batches,
        waits, decode time per worker, cache hits, bytes and GETs fetched, samples skipped."""
        return self.loader.stats() if self.loader is not None else {}

    def state_dict(self) -> dict[str, Any]:
        """The position after the rows served so far (JSON): ``load_state_dict`` on a reader of
        the same dataset and arguments serves the rest, none twice, and leaves out the samples
        ``on_error`` skipped."""
        with self._lock:
            if self._windows is not None:
                raise InvalidArgumentError("state_dict: a reader of NGram windows does not resume mid-epoch; "
                                           "read NGram windows from the start of an epoch")
            if self.loader is None:
                return {"loader": None, "row": 0}
            if self._taken == 0:
                return {"loader": self.loader.state_dict(), "row": self._resume_row}
            if self._served >= self._batch_rows:
                return {"loader": self.loader.state_dict(self._taken), "row": 0}
            return {"loader": self.loader.state_dict(self._taken - 1), "row": self._served}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume where ``state`` (from :meth:`state_dict`) stands: the next row is the first one
        not served then."""
        if not isinstance(state, dict) or "loader" not in state or "row" not in state:
            raise InvalidArgumentError(f"load_state_dict: expected a RowReader.state_dict(), got {state!r}")
        with self._lock:
            self._rows.close()
            if self.loader is not None and state["loader"] is not None:
                self.loader.load_state_dict(state["loader"])
                if self.num_epochs is not None:  # the read's epochs left, not num_epochs more
                    planner = self.loader.planner
                    self._epochs_left = self.num_epochs - planner.epoch - int(planner.epoch_complete)
                    self.loader.driver.num_epochs = max(1, self._epochs_left)
            self._resume_row = int(state["row"])
            self.last_row_consumed = False
            self._rows = self._generate()

    def reset(self) -> None:
        """Petastorm's: the read again from its first epoch, once the last row was consumed."""
        with self._lock:
            if not self.last_row_consumed:
                raise reset_early_error()
            self.last_row_consumed = False
            if self.loader is not None:
                self.loader.driver.num_epochs = self.num_epochs
                self._epochs_left = self.num_epochs
                self.loader.set_epoch(0)
            self._rows = self._generate()

    def stop(self) -> None:
        self.stopped = True

    def join(self) -> None:
        """Ends the read: the loader's workers stop (a process pool is parked for a later reader)."""
        with self._lock:
            self._rows.close()
        if self.loader is not None:
            self.loader.close()

    def cleanup_cache(self) -> None:
        """Petastorm's: removes the ``cache_type="local-disk"`` directory when it is empty (see
        :mod:`petastream.compat._row_cache`) and prints ``Cache cleanup complete.``."""
        cleanup_cache(self.cache, announce=True)

    def __enter__(self) -> RowReader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        self.join()
        cleanup_cache(self.cache, announce=False)


def row_parts(schema: Any, ngram: Any) -> tuple[str, ...]:
    """The columns of the loader's items (the work stage's, as a tuple: :func:`as_parts`)."""
    return (*schema.fields, *((KEPT,) if ngram is not None else ()))


def _schema_view(stored: Any, schema_fields: Any, dataset_url: Any) -> Any:
    if schema_fields is None:
        return stored
    if isinstance(schema_fields, NGram):
        schema_fields.resolve_regex_field_names(stored)
        return stored.create_schema_view(schema_fields.get_field_names_at_all_timesteps())
    if type(schema_fields).__name__ == "NGram":
        raise InvalidArgumentError(
            "schema_fields: a petastorm.ngram.NGram was given; use petastream.compat.ngram.NGram (same arguments)")
    if not isinstance(schema_fields, collections.abc.Iterable) or isinstance(schema_fields, str):
        raise ValueError("Fields must be either None, an iterable collection of Unischema fields or an NGram object.")
    view = stored.create_schema_view(list(schema_fields))
    if not view.fields:
        raise RuntimeError(f"No fields matching the criteria '{list(schema_fields)}' were found in the dataset "
                           f"{dataset_url}.")
    return view


def _refuse(name: str, value: Any, default: Any, instead: str) -> None:
    if value is not default and value != default:
        raise InvalidArgumentError(f"make_reader({name}={value!r}) is not supported by petastream.compat; {instead}")


def _cache(cache_type: str | None, cache_location: str | None, cache_size_limit: int | None,
           cache_row_size_estimate: int | None, cache_extra_settings: dict | None,
           drop_partitions: int) -> ReaderDiskCache | None:
    """Petastorm's ``cache_type`` checks. ``"local-disk"``: decoded row groups kept on disk for the
    reader's life (:class:`~petastream.compat._row_cache.ReaderDiskCache`), the arguments checked
    and the combinations refused as Petastorm's worker refuses them (there at the first read,
    here at once)."""
    if cache_type in (None, "null"):
        return None
    if cache_type != "local-disk":
        raise ValueError(f"Unknown cache_type: {cache_type}")
    directory = check_local_disk("make_reader", cache_location, cache_size_limit, cache_row_size_estimate,
                                 cache_extra_settings)
    if drop_partitions > 1:
        raise RuntimeError("Local cache is not supported together with shuffle_row_drop_partitions > 1")
    # Without a location Petastorm's diskcache made a temporary directory: so does this one.
    return ReaderDiskCache(directory or tempfile.mkdtemp(prefix="petastream-cache-"), cache_size_limit)


def _order(shuffle_row_groups: bool, shuffle_rows: bool, drop_partitions: int, ngram: Any,
           shard_sizes: np.ndarray) -> dict[str, Any]:
    """The loader's order, Petastorm's where it is observable: row groups permuted, each read in
    stored order (in ``drop_partitions`` parts, each its own block); ``shuffle_rows``: rows
    shuffled within the loader's window (Petastorm: within each row group; this mixes at least
    as much); n-grams: whole row groups, in order (windows are made within one)."""
    if ngram is not None:
        return dict(shuffle=bool(shuffle_row_groups), window=1, block_size=_WHOLE_SHARDS)
    if shuffle_rows:
        return dict(shuffle=True, window=None, block_size=None)
    if not shuffle_row_groups:
        return dict(shuffle=False, window=None, block_size=None)
    block = _WHOLE_SHARDS
    if drop_partitions > 1 and len(shard_sizes):
        block = max(1, int(np.median(shard_sizes)) // drop_partitions)
    return dict(shuffle=True, window=1, block_size=block)


def one_batch_chunks(work: PassWork) -> PassWork:
    """A work stage: each worker reads the stored rows of one batch at a time. A row's decode
    (an image's: about 0.1 ms) dwarfs its read, and a bulk read of many batches' rows (the
    pipeline's first chunk: up to 8,192 rows a worker) only holds back the first batch, which
    then waits for every row group those rows are in (a whole small epoch). Read-ahead still
    loads the row groups of the next chunks, now the next batches'."""
    limit = ROWS_PER_BATCH if work.max_chunk is None else min(work.max_chunk, ROWS_PER_BATCH)
    return dataclasses.replace(work, max_chunk=limit)


def _too_small(source: Any, limit: int | None) -> bool:
    """Whether a cache of ``limit`` bytes holds fewer than the 3 decoded row groups a shuffled
    read through it needs (:mod:`petastream.stream.budget`)."""
    largest = max((u.decoded for u in source.plan.units), default=0)
    return limit is not None and int(limit) < 3 * largest


def _executor(pool_type: str, workers: int, work: RowWork) -> Executor:
    """``reader_pool_type`` as an executor: decode threads, petastream's worker processes, or the
    iterating thread (``"dummy"``). Processes need the work to pickle (a ``TransformSpec`` of a
    lambda does not): otherwise threads, with a warning."""
    if pool_type == "dummy":
        return InlineExecutor()
    if pool_type == "process":
        try:
            pickle.dumps(work)
        except Exception as e:  # noqa: BLE001 - any pickling failure means: not in processes
            warnings.warn(f"make_reader(reader_pool_type='process'): the predicate or transform_spec does not "
                          f"pickle ({type(e).__name__}: {e}), so rows are decoded in threads; define its "
                          "functions at module level to decode in processes", UserWarning, stacklevel=3)
        else:
            from petastream.pipeline.procpool import ProcessExecutor

            return ProcessExecutor(workers, slots=4)
    return ThreadExecutor(workers, 2)


def make_reader(dataset_url: str | list[str], schema_fields: Any = None, reader_pool_type: str = "thread",
                workers_count: int | None = 10, pyarrow_serialize: bool = False, results_queue_size: int = 50,
                seed: int | None = None, shuffle_rows: bool = False, shuffle_row_groups: bool = True,
                shuffle_row_drop_partitions: int = 1, predicate: Any = None, rowgroup_selector: Any = None,
                num_epochs: int | None = 1, cur_shard: int | None = None, shard_count: int | None = None,
                shard_seed: int | None = None, cache_type: str | None = "null", cache_location: str | None = None,
                cache_size_limit: int | None = None, cache_row_size_estimate: int | None = None,
                cache_extra_settings: dict | None = None, hdfs_driver: str = "libhdfs3",
                transform_spec: Any = None, filters: Any = None, storage_options: dict | None = None,
                zmq_copy_buffers: bool = True, filesystem: Any = None,
                convert_early_to_numpy: bool = False, cache_limit: int | str | None = None,
                on_error: OnError = "raise") -> RowReader:
    """Petastorm's signature, defaults, checks and warnings (see the module doc), and
    petastream's: ``cache_limit`` (bytes or ``"50gb"``; default ``$PETASTREAM_CACHE_LIMIT``)
    bounds the node's shard cache of remote files (``$PETASTREAM_CACHE_DIR``), which the
    ranks of a node share (each file or row group downloaded once per node); ``on_error``:
    what a row that fails to decode, or in the ``transform_spec``, does (``"raise"``, default,
    naming the dataset, row and column; ``"skip"``; ``"warn"``; or ``fn(BadSample) -> bool``,
    see :mod:`petastream.pipeline.onerror`): skipped rows are counted in ``stats()`` and
    recorded in ``state_dict()``."""
    urls = normalize_urls(dataset_url)
    _refuse("filesystem", filesystem, None, "pass the URL with storage_options for its fsspec filesystem")
    shuffle_row_drop_partitions = positive_int("shuffle_row_drop_partitions", shuffle_row_drop_partitions,
                                               "parts each row group is read in")
    cache = _cache(cache_type, cache_location, cache_size_limit, cache_row_size_estimate, cache_extra_settings,
                   shuffle_row_drop_partitions)
    if reader_pool_type not in ("thread", "process", "dummy"):
        raise ValueError(f"Unknown reader_pool_type: {reader_pool_type}")
    if reader_pool_type == "process" and pyarrow_serialize:
        warnings.warn("pyarrow_serializer was deprecated and will be removed in future versions. "
                      "The argument no longer has any effect.", UserWarning, stacklevel=2)
    check_num_epochs("make_reader", num_epochs)
    num_epochs = None if num_epochs is None else int(num_epochs)
    options: dict[str, Any] = {"storage_options": storage_options, "cache_limit": cache_limit}
    if cache is not None:  # decoded row groups in the reader's own directory (removed with it)
        options.update(cache_decoded=True, cache_dir=cache.own,
                       cache_limit=cache_limit if cache_limit is not None else cache.size_limit)
    where = urls[0] if len(urls) == 1 else urls
    opened = open_row_source(urls, storage_options, lambda schema: list(_schema_view(schema, schema_fields, where).fields),
                             options)
    try:
        read_schema = _schema_view(opened.schema, schema_fields, where)
        out_schema = transform_schema(read_schema, transform_spec) if transform_spec else read_schema
        if shard_seed:
            warnings.warn(SHARD_SEED_WARNING, UserWarning, stacklevel=2)
        plan = plan_row_groups(opened.location, opened.pieces, opened.schema, predicate, rowgroup_selector,
                               cur_shard, shard_count, shard_seed if shard_seed else seed, filters)
        if cache is not None and plan.worker_predicate is not None:
            raise RuntimeError("Local cache is not supported together with predicates, unless the dataset is "
                               "partitioned by the column the predicate operates on.")
        if seed is None and (shuffle_row_groups or shuffle_rows):
            seed = secrets.randbits(31)
        workers = 1 if reader_pool_type == "dummy" else max(1, int(workers_count or 1))
        ngram = schema_fields if isinstance(schema_fields, NGram) else None
        if ngram is not None and not ngram.timestamp_overlap and shuffle_row_drop_partitions > 1:
            raise NotImplementedError("Using timestamp_overlap=False is not implemented with"
                                      " shuffle_options.shuffle_row_drop_partitions > 1")
        if ngram is not None and on_error != "raise":
            raise InvalidArgumentError("make_reader(on_error=...): NGram windows need every row of a row group; "
                                       "use on_error='raise' with an NGram")
    except BaseException:
        opened.source.close()
        raise
    source, types = row_source(opened, plan, options), opened.types
    if cache is not None and cache_limit is None and _too_small(source, cache.size_limit):
        # Petastorm's cache decodes the row groups past its limit at every read: so here, all of
        # them, when the limit holds too few for a shuffled read through the cache.
        from petastream.parquet import ParquetSource

        source.close()
        options.update(cache_decoded=None, cache_dir=None, cache_limit=None)
        source = ParquetSource(source.plan.root_urls, plan=source.plan, null_policy="rows", **options)
    loader = None
    if len(source):
        work = RowWork(read_schema, tuple(out_schema.fields), types, plan.worker_predicate, transform_spec,
                       ngram is not None)
        loader = BatchLoader(source, batch_size=ROWS_PER_BATCH, seed=seed or 0, num_epochs=num_epochs,
                             columns=list(read_schema.fields), num_workers=workers, transform=work,
                             convert=functools.partial(as_parts, row_parts(out_schema, ngram)),
                             executor=_executor(reader_pool_type, workers, work), on_error=on_error,
                             work_stages=[] if shuffle_rows else [one_batch_chunks],
                             **_order(bool(shuffle_row_groups), bool(shuffle_rows), shuffle_row_drop_partitions,
                                      ngram, source.shard_sizes))
    else:
        source.close()
    return RowReader(loader, schema=out_schema, ngram=ngram, num_epochs=num_epochs, seed=seed,
                     pool_type=reader_pool_type, zmq_copy_buffers=zmq_copy_buffers, cache=cache,
                     shuffle_rows=bool(shuffle_rows))
