"""Petastorm's ``make_reader``: one namedtuple per row of a Unischema dataset written by
Petastorm (or by :mod:`petastream.compat.etl`), its codecs decoded; of a plain Parquet store, a
file or a list of files, rows typed by the Parquet schema, with Petastorm's warning
(:mod:`petastream.compat._row_source`).

Which row groups are read is decided at open (:mod:`petastream.compat._row_plan`: ``filters``
on partition keys, partition predicates, row-group selectors, ``cur_shard``/``shard_count`` by
row group, as Petastorm); each epoch visits them (permuted by ``seed`` when
``shuffle_row_groups``), each split into ``shuffle_row_drop_partitions`` items, loaded by
``workers_count`` threads (:mod:`petastream.compat._row_load`: read, predicate, decode,
transform) and yielded in the order they were handed out, so a seeded read is reproducible
(Petastorm yields them as workers finish). ``reader_pool_type="process"`` loads in threads too
(pyarrow's reads and numpy's decoding release the GIL); ``"dummy"`` loads in the iterating thread.

``schema_fields=NGram(...)`` (:mod:`petastream.compat.ngram`) yields windows of rows, as Petastorm.
``cache_type="local-disk"``: Petastorm's checks, then each row group's decoded columns kept on
disk for the reader's later epochs (:mod:`._row_cache`).
Refused with an error naming the argument: ``filesystem`` (use ``storage_options``),
``cache_extra_settings``, a filter on a column that is not a partition key (Petastorm ignored
it); accepted without effect, as they tune Petastorm's own pools: ``results_queue_size``,
``pyarrow_serialize``, ``zmq_copy_buffers``, ``hdfs_driver``, ``convert_early_to_numpy``.
"""

from __future__ import annotations

import collections.abc
import secrets
import tempfile
import threading
import warnings
from collections import deque
from collections.abc import Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from petastream.checks import positive_int
from petastream.compat._checks import check_num_epochs
from petastream.compat._row_cache import (
    NullCache,
    RowGroupDiskCache,
    check_local_disk,
    cleanup_cache,
    pool_diagnostics,
)
from petastream.compat._row_load import LoadSpec, load_piece
from petastream.compat._row_plan import plan_row_groups
from petastream.compat._row_source import SHARD_SEED_WARNING, normalize_urls, open_row_source
from petastream.compat.errors import reset_early_error, stopped_error
from petastream.compat.ngram import NGram
from petastream.compat.transform import transform_schema
from petastream.errors import InvalidArgumentError

__all__ = ["make_reader", "RowReader"]

class RowReader:
    """What :func:`make_reader` returns: an iterator of rows, safe to call from several threads
    (each row served once), with Petastorm's ``reset``/``stop``/``join``/``diagnostics``/
    ``cleanup_cache`` and context manager."""

    is_batched_reader = False
    batched_output = False

    def __init__(self, spec: LoadSpec, selected: list[int], *, shuffle_row_groups: bool, drop_partitions: int,
                 num_epochs: int | None, seed: int | None, workers: int, pool_type: str = "thread",
                 zmq_copy_buffers: bool = True, cache: NullCache | None = None):
        self._spec = spec
        self.schema = spec.out_schema
        self.ngram = spec.ngram
        self._selected = selected
        self._shuffle = shuffle_row_groups
        self._drop = drop_partitions
        self.num_epochs = num_epochs
        self.seed = seed
        self._workers = workers
        self._pool_type = pool_type
        self._zmq_copy_buffers = zmq_copy_buffers
        self.cache = cache or NullCache()
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="petastream-make-reader") if workers > 1 else None
        self.stopped = False
        self.last_row_consumed = False
        self._lock = threading.Lock()  # next() from several threads: one generator step at a time
        self._pending: deque[Future] = deque()
        self._handed_out = 0
        self._rows: Generator[Any, None, None] = self._generate()

    # -- the items of a read --------------------------------------------------------------------
    def _items(self) -> Iterator[tuple[int, tuple[int, int], int | None]]:
        rng = np.random.default_rng(self.seed)
        epoch = 0
        while self.num_epochs is None or epoch < self.num_epochs:
            items = [(i, (k, self._drop)) for i in self._selected for k in range(self._drop)]
            if self._shuffle:
                items = [items[j] for j in rng.permutation(len(items))]
            row_seed = None if self.seed is None else self.seed + epoch
            for index, drop in items:
                yield index, drop, row_seed
            epoch += 1
            if not items:
                return

    def _generate(self) -> Generator[Any, None, None]:
        items = self._items()
        if self._pool is None:
            for index, drop, row_seed in items:
                self._handed_out += 1
                yield from load_piece(self._spec, index, drop, row_seed)
            return
        pending = self._pending = deque()
        ahead = 2 * self._workers
        for item in items:
            pending.append(self._pool.submit(load_piece, self._spec, *item))
            self._handed_out += 1
            if len(pending) >= ahead:
                yield from pending.popleft().result()
        while pending:
            yield from pending.popleft().result()

    # -- Petastorm's Reader interface -----------------------------------------------------------
    def __iter__(self) -> RowReader:
        return self

    def __next__(self) -> Any:
        with self._lock:
            if self.stopped:
                raise stopped_error()
            try:
                return next(self._rows)
            except StopIteration:
                self.last_row_consumed = True
                raise

    def next(self) -> Any:
        return self.__next__()

    @property
    def diagnostics(self) -> dict[str, Any]:
        """Petastorm's keys for the pool type, counting row-group loads (see
        :func:`~petastream.compat._row_cache.pool_diagnostics`)."""
        pending = list(self._pending)
        done = sum(f.done() for f in pending)
        return pool_diagnostics(self._pool_type, waiting=done, handed_out=self._handed_out,
                                done=self._handed_out - len(pending) + done, zmq_copy_buffers=self._zmq_copy_buffers)

    def reset(self) -> None:
        with self._lock:
            if not self.last_row_consumed:
                raise reset_early_error()
            self.last_row_consumed = False
            self._rows = self._generate()

    def stop(self) -> None:
        self.stopped = True

    def join(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            self._rows.close()  # its loads are cancelled or done: nothing left in flight

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
           drop_partitions: int) -> NullCache | None:
    """Petastorm's ``cache_type`` checks. ``"local-disk"``: decoded row groups kept on disk for the
    reader's life (:class:`~petastream.compat._row_cache.RowGroupDiskCache`), the arguments checked
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
    return RowGroupDiskCache(directory or tempfile.mkdtemp(prefix="petastream-cache-"), cache_size_limit)


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
                convert_early_to_numpy: bool = False) -> RowReader:
    """Petastorm's signature, defaults, checks and warnings (see the module doc)."""
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
    source = open_row_source(urls, storage_options)
    read_schema = _schema_view(source.schema, schema_fields, urls[0] if len(urls) == 1 else urls)
    out_schema = transform_schema(read_schema, transform_spec) if transform_spec else read_schema
    if shard_seed:
        warnings.warn(SHARD_SEED_WARNING, UserWarning, stacklevel=2)
    plan = plan_row_groups(source.location, source.pieces, source.schema, predicate, rowgroup_selector, cur_shard,
                           shard_count, shard_seed if shard_seed else seed, filters)
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
    spec = LoadSpec(source.location, plan.pieces, read_schema, out_schema, plan.worker_predicate, transform_spec,
                    bool(shuffle_rows), seed, ngram, cache if isinstance(cache, RowGroupDiskCache) else None)
    return RowReader(spec, plan.selected, shuffle_row_groups=bool(shuffle_row_groups),
                     drop_partitions=shuffle_row_drop_partitions, num_epochs=num_epochs, seed=seed, workers=workers,
                     pool_type=reader_pool_type, zmq_copy_buffers=zmq_copy_buffers, cache=cache)
