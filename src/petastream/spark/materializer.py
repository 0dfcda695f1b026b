"""``materialize``: a Spark DataFrame (classic or Connect) -> a complete MDS dataset.

One Spark job: ``df.mapInArrow(TaskWriter)``; every task writes its shards and its partial
``index.json`` into its own sub-directory of an attempt directory and returns one small row.
The driver merges the partial indexes of the attempts Spark reported (in partition order;
leftovers of failed or speculative attempts are ignored) into ``index.json``, written last,
then publishes the attempt (see :mod:`petastream.spark.cache`; one attempt, from the job to
its publication, is :mod:`petastream.spark._attempt`'s: this module decides what to write,
reuses and retries). Only the DataFrame API is used (``mapInArrow``, ``agg``, ``inputFiles``,
``sameSemantics``), so Connect DataFrames work.

A DataFrame that is a plain scan of Parquet files is written by the same job without Spark
converting its rows: the tasks read the files themselves (:mod:`petastream.spark._file_scan`),
falling back to ``mapInArrow`` over the rows wherever that could differ from Spark's reading.

Sharing a parent directory between processes: a DataFrame's content key is written once (the
first process claims it, the others wait and reuse: :mod:`petastream.spark.claims`), and every
process that uses a dataset holds a lease on it, so that no process deletes at exit a dataset
that another live process is using (:mod:`petastream.spark.leases`).

Array columns are decided in the same pass by default (``array_lengths='optimistic'``): each
task picks fixed or variable length from its first batch, and the driver checks that the tasks
agree before it merges anything; a column they disagree on (or whose length changed within a
task) is written again as variable-length, and the first attempt is discarded unpublished, so
a dataset never reads as complete with a wrong layout. ``array_lengths='infer'`` adds one
aggregate job before the write instead (see :mod:`petastream.spark.schema`). A null met by a
task under ``null_policy='error'`` ends the job (the task reports it in its result row and the
other tasks stop: no Spark task fails, see :mod:`petastream.spark._task`); the driver then
counts nulls with one aggregate job to name the columns.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from petastream.checks import one_of
from petastream.errors import ConfigurationError, FormatError, InvalidArgumentError
from petastream.mds.compression import parse_compression
from petastream.mds.hashing import DEFAULT_HASHES
from petastream.mds.index import read_index
from petastream.mds.writer import check_compression_saving
from petastream.spark import cache, claims, leases
from petastream.spark._attempt import write_attempt
from petastream.spark._errors import MaterializationError
from petastream.spark._file_scan import ScanFallback, plan_scan
from petastream.spark._outcome import Retry
from petastream.spark.schema import (
    check_dtype,
    infer_columns,
    infer_lengths,
    null_error,
    prepare,
)
from petastream.storage.location import is_remote_mount, local_path, resolve

__all__ = ["materialize", "MaterializedDataset", "default_compression", "forget_conversion", "parent_cache_dir"]

log = logging.getLogger("petastream.spark")

_REGISTRY = cache.Registry()


def forget_conversion(url: str) -> None:
    """Forget the dataset at ``url`` in this process's de-dup of DataFrames: converting the
    same DataFrame again materializes it again (after its dataset was deleted)."""
    _REGISTRY.forget(url)


@dataclass
class MaterializedDataset:
    """A complete MDS dataset made from a DataFrame (or found again). Picklable: plain data.

    ``reused`` is True when no write ran (in-process de-dup, a complete dataset found under the
    content key, possibly after waiting for another process writing it, or an existing MDS
    directory given as ``df``). ``created`` is True when this call published the dataset.
    Either way this process holds a lease on a dataset it materialized (not on an MDS
    directory given as ``df``): see :mod:`petastream.spark.leases`.
    """

    url: str
    num_samples: int
    num_shards: int
    num_bytes: int
    columns: dict[str, str]
    key: str | None = None
    reused: bool = False
    created: bool = False
    seconds: float = 0.0
    storage_options: dict | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return self.num_samples

    def __str__(self) -> str:
        return self.url

    def open(self, **kwargs: Any) -> Any:
        """``petastream.open(self.url)``."""
        from petastream.mds.dataset import open as open_mds

        kwargs.setdefault("storage_options", self.storage_options)
        return open_mds(self.url, **kwargs)

    def delete(self, force: bool = False) -> bool:
        """Forget it in the in-process de-dup, give up this process's lease and delete the
        directory, with this node's cached copies of its shards, unless another live process
        holds a lease on it (``force``: delete anyway). Returns True when it was deleted."""
        _REGISTRY.forget(self.url)
        return leases.release(self.url, self.storage_options, explicit=True, force=force,
                              delete=self._delete_now)

    def _delete_now(self, url: str) -> None:
        from petastream.mds.cache_admin import forget_dataset

        forget_dataset(url, storage_options=self.storage_options)  # before: index.json names them
        cache.delete_dataset(url, self.storage_options)


def materialize(
    df: Any,
    parent_url: str | None = None,
    *,
    compression: str | None = "auto",
    min_compression_saving: float = 0.1,
    hashes: list[str] | None = None,
    size_limit: int | str | None = 1 << 26,
    dtype: str | None = "float32",
    null_policy: str = "error",
    array_lengths: str | Mapping[str, int | None] = "optimistic",
    nested: str = "error",
    reuse: bool = True,
    keep_at_exit: bool | None = None,
    storage_options: dict | None = None,
    spark: Any = None,
    progress_interval: float = 10.0,
) -> MaterializedDataset:
    """Materialize ``df`` as an MDS dataset under ``parent_url`` and return it.

    ``df``: a DataFrame (classic or Connect), or a path: an MDS directory (``index.json``
    present) is used as is; anything else is read with ``spark.read.parquet``.
    ``parent_url``: the cache directory (path or fsspec URL); default: the Spark conf
    ``petastream.spark.parentCacheDirUrl``, then Petastorm's
    ``petastorm.spark.converter.parentCacheDirUrl``.
    ``compression``/``hashes``/``size_limit``: the MDS writer's (per shard). ``'auto'`` (the
    default) picks by destination (:func:`default_compression`): none on a local disk, where
    compressing costs more time than the bytes it saves (writes 5.6x faster, first epoch 1.6x
    faster: docs/remote.md), and ``'zstd:1'`` on object stores and remote FUSE mounts
    (``/dbfs``, ``/Volumes``), where bytes moved bound every first epoch. Level 1 because the
    write is CPU-bound in the tasks, and on float and binary columns zstd level 3 compresses
    2-2.6x slower for no gain (tabular 1.280 vs 1.275, 256-byte random payloads 1.061 vs
    1.063); ``'zstd'`` (level 3) or higher levels pay off on text. ``hashes=None``
    records :data:`~petastream.mds.hashing.DEFAULT_HASHES` (xxh3-64: readers check every shard
    as it enters their cache, ``petastream verify`` checks contents), ``[]`` none.
    ``dtype``: ``'float32'`` (Petastorm's default), ``'float64'`` or None; ``null_policy``:
    ``'error'`` or ``'fill'``; ``array_lengths``: ``'optimistic'`` (default: one pass, the
    tasks choose fixed or variable length and must agree, else the column is written again as
    variable-length), ``'infer'`` (one aggregate job first), ``'dynamic'`` (always variable) or
    ``{col: n}`` (``None`` = variable; the other array columns as ``'optimistic'``);
    ``nested``: ``'error'`` or ``'json'`` (see :mod:`petastream.spark.schema`).
    ``reuse``: look the dataset up first (in-process, then by content key).
    ``keep_at_exit``: keep the dataset when the interpreter exits. Default (None): keep it when
    ``parent_url`` is given (you named the destination: materialize in one job, train in
    another), delete it when the location came from the Spark conf (a cache directory, deleted
    at exit as Petastorm does, once no other live process holds a lease on it: see
    :mod:`petastream.spark.leases`). ``MaterializedDataset.delete()`` deletes it at any time
    (unless another live process uses it).
    ``progress_interval``: seconds between progress lines while the write job runs, classic
    Spark or Spark Connect (pyspark >= 4), or while waiting for another process writing the
    same DataFrame; shown only with the logger ``petastream.spark`` at INFO, as a tqdm bar on a
    terminal (see :mod:`petastream.spark._progress`); 0 disables.
    """
    start = time.perf_counter()
    check_dtype(dtype)
    check_compression_saving(min_compression_saving)
    one_of("null_policy", null_policy, ("error", "fill"))
    one_of("nested", nested, ("error", "json"))
    if isinstance(df, (str, os.PathLike)):
        path = os.fspath(df)
        if resolve(path, storage_options).exists("index.json"):
            log.info("using the existing MDS dataset %s", path)
            return describe(path, storage_options, reused=True, seconds=time.perf_counter() - start)
        spark = spark or _active_session()
        df = spark.read.parquet(path)
    if keep_at_exit is None:
        keep_at_exit = parent_url is not None
    parent = (parent_url or parent_cache_dir(df.sparkSession)).rstrip("/") or "/"
    compression = resolve_compression(compression, parent)
    hashes = list(DEFAULT_HASHES) if hashes is None else sorted(hashes)
    options = {"compression": compression, "hashes": hashes,
               # part of the content key only where it can change the shards
               "min_compression_saving": min_compression_saving if compression else None,
               "size_limit": size_limit, "dtype": dtype, "null_policy": null_policy,
               "array_lengths": dict(array_lengths) if isinstance(array_lengths, Mapping)
               else array_lengths, "nested": nested}
    write = dict(compression=compression, min_saving=min_compression_saving, hashes=hashes,
                 size_limit=size_limit, dtype=dtype, null_policy=null_policy,
                 array_lengths=array_lengths, nested=nested, storage_options=storage_options,
                 progress_interval=progress_interval, start=start, keep=keep_at_exit)
    with _REGISTRY.lock:
        if reuse:
            url = _REGISTRY.lookup(df, parent, options)
            if url is not None and leases.acquire(url, storage_options, keep=keep_at_exit):
                log.info("reusing %s (same DataFrame plan and options in this process)", url)
                return describe(url, storage_options, reused=True,
                                seconds=time.perf_counter() - start)
        key, pinned = cache.content_key(df, options, storage_options=storage_options)
        shared = reuse and pinned  # other processes may convert the same DataFrame
        result = None
        for _ in range(3):  # again only if a dataset was deleted between publish and lease
            result = _reuse_or_write(df, parent, key, shared, write)
            if result is not None:
                break
        if result is None:
            raise MaterializationError(
                f"the dataset for content key {key} under {parent} was deleted three times "
                "while this process was about to use it; convert again, or pass reuse=False")
        _REGISTRY.add(df, parent, options, result.url)
        return result


def _find_and_lease(parent: str, key: str, storage_options: dict | None, keep: bool
                    ) -> str | None:
    """The complete dataset for ``key``, leased by this process, or None. A dataset being
    deleted right now is waited for (briefly) and then reported missing."""
    deadline = time.monotonic() + 30
    while True:
        url = cache.find_complete(parent, key, storage_options)
        if url is None:
            log.debug("no complete dataset for content key %s under %s", key, parent)
            return None
        if leases.acquire(url, storage_options, keep=keep,
                          waiters=lambda: claims.waiters(parent, key, storage_options)):
            return url
        if time.monotonic() > deadline:
            return None
        time.sleep(0.2)


def _reuse_or_write(df: Any, parent: str, key: str, shared: bool, write: dict[str, Any]
                    ) -> MaterializedDataset | None:
    """Reuse the dataset under ``key``, waiting for another process writing it, or write it."""
    storage_options, keep, start = write["storage_options"], write["keep"], write["start"]
    if shared:
        url = _find_and_lease(parent, key, storage_options, keep)
        if url is not None:
            log.info("reusing the complete dataset %s (same content key)", url)
            return describe(url, storage_options, key=key, reused=True,
                            seconds=time.perf_counter() - start)
    with (claims.claim(parent, key, storage_options,
                       progress_interval=write["progress_interval"])
          if shared else contextlib.nullcontext(False)):
        if shared:  # the previous holder of the claim may have published it
            url = _find_and_lease(parent, key, storage_options, keep)
            if url is not None:
                log.info("reusing %s, written by another process meanwhile", url)
                return describe(url, storage_options, key=key, reused=True,
                                seconds=time.perf_counter() - start)
        return _write(df, parent, key, **write)


def default_compression(parent_url: str) -> str | None:
    """``compression='auto'``: None (uncompressed) under a local directory, ``'zstd:1'`` on
    an object store (``s3://``, ``abfs://``, ...) or a FUSE mount of one (``/dbfs``,
    ``/Volumes``, ``$PETASTREAM_REMOTE_MOUNTS``). Mosaic and LitData write uncompressed by
    default; Spark compresses Parquet with snappy, whose size (tabular: 14% under raw MDS)
    zstd level 1 beats (22%)."""
    path = local_path(parent_url)
    return None if path is not None and not is_remote_mount(path) else "zstd:1"


def resolve_compression(compression: Any, parent_url: str) -> str | None:
    """``compression`` with ``'auto'`` resolved for ``parent_url``, checked before any job runs."""
    if compression == "auto":
        return default_compression(parent_url)
    try:
        parse_compression(compression)
    except FormatError as e:
        raise InvalidArgumentError(
            f"compression={compression!r}: {e}; or 'auto' (the default: none on a local "
            "disk, zstd:1 on remote storage) or None (uncompressed)") from None
    return compression


def parent_cache_dir(session: Any) -> str:
    conf = session.conf
    for name in (cache.PARENT_CONF, cache.PETASTORM_PARENT_CONF):
        value = conf.get(name, None)
        if value:
            return str(value)
    raise ConfigurationError(
        f"no cache directory: pass parent_url=... or set the Spark conf {cache.PARENT_CONF} "
        f"(or Petastorm's {cache.PETASTORM_PARENT_CONF})"
    )


def _active_session() -> Any:
    from petastream._extras import require

    SparkSession = require("pyspark.sql", "petastream.spark.materialize").SparkSession
    return SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()


def describe(url: str, storage_options: dict | None = None, **kwargs: Any) -> MaterializedDataset:
    """A :class:`MaterializedDataset` for the complete dataset at ``url`` (reads index.json)."""
    shards = read_index(url, storage_options=storage_options)
    columns = dict(zip(shards[0]["column_names"], shards[0]["column_encodings"])) if shards else {}
    return MaterializedDataset(
        url=url, num_samples=sum(s["samples"] for s in shards), num_shards=len(shards),
        num_bytes=sum((s["zip_data"] or s["raw_data"])["bytes"] for s in shards),
        columns=columns, storage_options=storage_options, **kwargs)


def _write(df: Any, parent: str, key: str, *, compression: str | None, min_saving: float,
           hashes: list[str] | None, size_limit: int | str | None, dtype: str | None, null_policy: str,
           array_lengths: Any, nested: str, storage_options: dict | None,
           progress_interval: float, start: float, keep: bool) -> MaterializedDataset | None:
    """Write ``df`` and publish it under ``key`` (leased by this process); None if another
    conversion published first and its dataset was deleted before this process leased it."""
    prepared, plans = prepare(df, dtype=dtype, nested=nested)
    t0 = time.perf_counter()
    plans, nulls = infer_lengths(prepared, plans, array_lengths,
                                 count_nulls=null_policy == "error")
    if nulls is not None:
        log.info("array lengths inferred in %.2f s: %s", time.perf_counter() - t0,
                 {p.name: p.encoding for p in plans if p.kind.startswith("list")})
    if nulls and any(nulls.values()):
        raise null_error(nulls)
    scan, why = plan_scan(df, plans, null_policy=null_policy)
    log.info("%s: %s", "reading the DataFrame's files in the tasks" if scan else
             "converting the rows in Spark", why)
    job_start = time.perf_counter()
    for _ in range(len(plans) + 2):
        try:
            rows, shards, url, won = write_attempt(prepared, plans, parent, key, (compression, min_saving),
                                              hashes, size_limit, null_policy, storage_options,
                                              progress_interval, keep, scan=scan)
            break
        except ScanFallback as fallback:
            log.info("%s; writing through Spark instead", fallback)
            scan = None
        except Retry as retry:
            if retry.infer:
                log.info("%s; deciding its array length with an aggregate job and writing again",
                         retry)
                plans = infer_columns(prepared, retry.plans, list(retry.infer))
            else:
                log.info("%s; writing again with variable-length arrays there", retry)
                plans = retry.plans
    seconds = time.perf_counter() - start
    samples = sum(r["samples"] for r in rows)
    nbytes = sum(r["bytes"] for r in rows)
    job = time.perf_counter() - job_start
    if won:
        log.info("materialized %d rows in %d shards (%.1f MB) to %s in %.2f s (write job "
                 "%.2f s, %.0f rows/s, %d tasks, slowest task %.2f s)", samples, len(shards),
                 nbytes / 1e6, url, seconds, job, samples / job if job else 0.0, len(rows),
                 max((r["seconds"] for r in rows), default=0.0))
        return describe(url, storage_options, key=key, created=True, seconds=seconds)
    log.info("another conversion published %s first; using it (this attempt was discarded)", url)
    if not leases.acquire(url, storage_options, keep=keep,
                          waiters=lambda: claims.waiters(parent, key, storage_options)):
        return None
    return describe(url, storage_options, key=key, reused=True, seconds=seconds)
