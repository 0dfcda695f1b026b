"""Petastorm's ``make_reader``: one namedtuple per row of a Unischema dataset written by
Petastorm (or by :mod:`petastream.compat.etl`), its codecs decoded.

The schema comes from the dataset's metadata (``_common_metadata``); which row groups are read
is decided at open (:mod:`petastream.compat._row_plan`: partition predicates, row-group
selectors, ``cur_shard``/``shard_count`` by row group, as Petastorm); each epoch visits them
(permuted by ``seed`` when ``shuffle_row_groups``), each split into
``shuffle_row_drop_partitions`` items, loaded by ``workers_count`` threads
(:mod:`petastream.compat._row_load`: read, predicate, decode, transform) and yielded in the
order they were handed out, so a seeded read is reproducible (Petastorm yields them as workers
finish). ``reader_pool_type="process"`` loads in threads too (pyarrow's reads and numpy's
decoding release the GIL); ``"dummy"`` loads in the iterating thread.

``schema_fields=NGram(...)`` (:mod:`petastream.compat.ngram`) yields windows of rows, as Petastorm.
Refused with an error naming the argument: ``cache_type="local-disk"``,
``filters`` (Petastorm applies them to partitions only; use ``predicate``), ``filesystem``
(use ``storage_options``); accepted without effect, as they tune Petastorm's own pools:
``results_queue_size``, ``pyarrow_serialize``, ``zmq_copy_buffers``, ``hdfs_driver``,
``convert_early_to_numpy``.
"""

from __future__ import annotations

import collections.abc
import secrets
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from petastream.checks import positive_int
from petastream.compat._checks import check_num_epochs
from petastream.compat._row_load import LoadSpec, load_piece
from petastream.compat._row_plan import plan_row_groups
from petastream.compat.errors import stopped_error
from petastream.compat.etl import _store, dataset_metadata
from petastream.compat.ngram import NGram
from petastream.compat.transform import transform_schema
from petastream.errors import InvalidArgumentError

__all__ = ["make_reader", "RowReader"]

_RESET_EARLY = ("Currently do not support resetting a reader while in the middle of iteration. "
                "You can call reset only after all samples were consumed.")


class RowReader:
    """What :func:`make_reader` returns: iterate it for rows (``next(reader)`` too)."""

    is_batched_reader = False
    batched_output = False

    def __init__(self, spec: LoadSpec, selected: list[int], *, shuffle_row_groups: bool, drop_partitions: int,
                 num_epochs: int | None, seed: int | None, workers: int):
        self._spec = spec
        self.schema = spec.out_schema
        self.ngram = spec.ngram
        self._selected = selected
        self._shuffle = shuffle_row_groups
        self._drop = drop_partitions
        self.num_epochs = num_epochs
        self.seed = seed
        self._workers = workers
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="petastream-make-reader") if workers > 1 else None
        self.stopped = False
        self.last_row_consumed = False
        self._rows: Iterator[Any] = self._generate()

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

    def _generate(self) -> Iterator[Any]:
        items = self._items()
        if self._pool is None:
            for index, drop, row_seed in items:
                yield from load_piece(self._spec, index, drop, row_seed)
            return
        pending: deque[Future] = deque()
        ahead = 2 * self._workers
        for item in items:
            pending.append(self._pool.submit(load_piece, self._spec, *item))
            if len(pending) >= ahead:
                yield from pending.popleft().result()
        while pending:
            yield from pending.popleft().result()

    # -- Petastorm's Reader interface -----------------------------------------------------------
    def __iter__(self) -> RowReader:
        return self

    def __next__(self) -> Any:
        if self.stopped:
            raise stopped_error()
        try:
            return next(self._rows)
        except StopIteration:
            self.last_row_consumed = True
            raise

    def next(self) -> Any:
        return self.__next__()

    def reset(self) -> None:
        if not self.last_row_consumed:
            raise NotImplementedError(_RESET_EARLY)
        self.last_row_consumed = False
        self._rows = self._generate()

    def stop(self) -> None:
        self.stopped = True

    def join(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> RowReader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        self.join()


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


def make_reader(dataset_url: str, schema_fields: Any = None, reader_pool_type: str = "thread",
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
    """Petastorm's signature and defaults (see the module doc for what is refused)."""
    if reader_pool_type not in ("thread", "process", "dummy"):
        raise ValueError(f"Unknown reader_pool_type: {reader_pool_type}")
    if cache_type not in (None, "null"):
        if cache_type == "local-disk":
            _refuse("cache_type", cache_type, "null", "remote files are read through fsspec; decoded rows are "
                    "not cached (convert the dataset with make_spark_converter for a cached read)")
        raise ValueError(f"Unknown cache_type: {cache_type}")
    _refuse("filters", filters, None, "pass a predicate (petastream.compat.predicates) instead")
    _refuse("filesystem", filesystem, None, "pass the URL with storage_options for its fsspec filesystem")
    check_num_epochs("make_reader", num_epochs)
    num_epochs = None if num_epochs is None else int(num_epochs)
    shuffle_row_drop_partitions = positive_int("shuffle_row_drop_partitions", shuffle_row_drop_partitions,
                                               "parts each row group is read in")
    urls = [dataset_url] if isinstance(dataset_url, str) else list(dataset_url)
    if len(urls) != 1:
        raise InvalidArgumentError("make_reader(dataset_url=[...]): one dataset URL is read by make_reader; "
                                   "pass the dataset's directory")
    location = _store.locate(urls[0], storage_options)
    try:
        stored = dataset_metadata.get_schema_from_dataset_url(urls[0], storage_options=storage_options)
    except dataset_metadata.PetastormMetadataError as e:
        raise RuntimeError("make_reader has failed. If you were trying to open a Parquet store that was not created "
                           "using Petastorm materialize_dataset and it contains only scalar columns, you may use "
                           f"make_batch_reader to read it.\nInner exception: {e}") from e
    read_schema = _schema_view(stored, schema_fields, urls[0])
    out_schema = transform_schema(read_schema, transform_spec) if transform_spec else read_schema
    plan = plan_row_groups(location, stored, predicate, rowgroup_selector, cur_shard, shard_count,
                           shard_seed if shard_seed else seed)
    if seed is None and (shuffle_row_groups or shuffle_rows):
        seed = secrets.randbits(31)
    workers = 1 if reader_pool_type == "dummy" else max(1, int(workers_count or 1))
    ngram = schema_fields if isinstance(schema_fields, NGram) else None
    if ngram is not None and not ngram.timestamp_overlap and shuffle_row_drop_partitions > 1:
        raise NotImplementedError("Using timestamp_overlap=False is not implemented with"
                                  " shuffle_options.shuffle_row_drop_partitions > 1")
    spec = LoadSpec(location, plan.pieces, read_schema, out_schema, plan.worker_predicate, transform_spec,
                    bool(shuffle_rows), seed, ngram)
    return RowReader(spec, plan.selected, shuffle_row_groups=bool(shuffle_row_groups),
                     drop_partitions=shuffle_row_drop_partitions, num_epochs=num_epochs, seed=seed, workers=workers)
