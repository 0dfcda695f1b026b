"""What ``make_batch_reader`` opens: the MDS dataset a converter materialized (found from its
directory or a shard file's URL), Parquet files with Petastorm's row-group choices applied
(:mod:`petastream.compat._parquet_select`), a Delta table's snapshot, or a mixture of
``petastream.Stream``; the cache options Petastorm's ``cache_*`` arguments map to; the columns
``schema_fields`` selects. :mod:`petastream.compat.reader` checks the arguments and plans the read.
"""

from __future__ import annotations

import functools
import os
import re
from typing import Any

from petastream.compat import _source_reuse as source_reuse
from petastream.compat._checks import refuse_row_selection
from petastream.compat._row_cache import local_path
from petastream.compat._row_source import warn_if_petastorm_dataset
from petastream.compat.predicates import PredicateBase
from petastream.errors import InvalidArgumentError
from petastream.mds.dataset import MDSDataset
from petastream.source import is_source
from petastream.storage.location import resolve

__all__ = ["dataset_root", "open_batch_source", "select_columns", "source_cache_options"]


def dataset_root(dataset_url_or_urls: Any, storage_options: dict | None = None) -> str:
    """The MDS dataset directory behind a directory URL or a list of its shard file URLs."""
    urls = [dataset_url_or_urls] if isinstance(dataset_url_or_urls, str) else list(dataset_url_or_urls)
    if not urls:
        raise ValueError("dataset url list must be non-empty.")
    url = urls[0].rstrip("/")
    candidates = [url]
    for _ in range(2):  # a shard file sits in the dataset dir or one sub-directory below it
        url = url.rsplit("/", 1)[0]
        if not url or url.endswith(":/"):  # above the filesystem's root ("/tmp/x", "s3://bucket")
            break
        candidates.append(url)
    # Outermost first: a merged dataset's task sub-directories hold partial index.json files.
    for candidate in reversed(candidates):
        if resolve(candidate, storage_options).exists("index.json"):
            return candidate
    raise InvalidArgumentError(f"{urls[0]} is not an MDS dataset directory or one of its shard "
                               "files (no index.json found beside it)")


def _mds_root(dataset_url_or_urls: Any, storage_options: dict | None) -> str | None:
    """The MDS dataset behind the URLs, or None when they are Parquet."""
    try:
        return dataset_root(dataset_url_or_urls, storage_options)
    except ValueError:
        if isinstance(dataset_url_or_urls, (list, tuple)) and not dataset_url_or_urls:
            raise
        return None


def _open_parquet(url_or_urls: Any, *, storage_options: dict | None, cache: dict[str, Any], filters: Any,
                  predicate: Any, rowgroup_selector: Any, cur_shard: int | None, shard_count: int | None,
                  null_policy: str, schema_fields: Any = None) -> Any:
    """A :class:`~petastream.parquet.ParquetSource` of the rows Petastorm's batch reader reads
    (see :mod:`petastream.compat._parquet_select`)."""
    from petastream.compat._arrow_fields import batch_reader_columns
    from petastream.compat._parquet_select import narrow_plan
    from petastream.parquet import ParquetSource

    options = dict(storage_options=storage_options, null_policy=null_policy, **cache)
    also = predicate.get_fields() if predicate is not None and hasattr(predicate, "get_fields") else ()
    columns = functools.partial(batch_reader_columns, schema_fields=schema_fields, also=also)
    source = _open_files(url_or_urls, filters, dict(options, columns=columns))
    first = url_or_urls if isinstance(url_or_urls, (str, os.PathLike)) else list(url_or_urls)[0]
    plan = narrow_plan(source.plan, predicate=predicate, rowgroup_selector=rowgroup_selector, cur_shard=cur_shard,
                       shard_count=shard_count, dataset_url=os.fspath(first), storage_options=storage_options)
    if plan is not source.plan:
        source.close()
        source = ParquetSource(plan.root_urls, plan=plan, **options)
    # The last reader's source of the same files, with the row groups it decoded (a reader per epoch).
    return source_reuse.take(source, options)


def _open_files(url_or_urls: Any, filters: Any, options: dict[str, Any]) -> Any:
    """A Delta table's snapshot where one URL names a table (never its files as plain
    Parquet: see docs/delta.md), else the Parquet files."""
    from petastream.parquet import ParquetSource
    from petastream.sources import detect_format

    if isinstance(url_or_urls, (str, os.PathLike)) and detect_format(
            url_or_urls, options.get("storage_options")) == "delta":
        from petastream.delta import DeltaSource

        return DeltaSource(url_or_urls, filters=filters, **options)
    return ParquetSource(url_or_urls, filters=filters, **options)


def _is_mixture(dataset_url_or_urls: Any) -> bool:
    from petastream.mix import Stream

    return isinstance(dataset_url_or_urls, (list, tuple)) and any(isinstance(u, Stream) for u in dataset_url_or_urls)


def _open_mixture(streams: Any, *, storage_options: dict | None, cache: dict[str, Any], filters: Any,
                  predicate: Any, rowgroup_selector: Any) -> Any:
    """A :class:`~petastream.mix.MixtureSource` of ``streams`` (``petastream.Stream``, every item):
    each epoch the streams' shares, exactly once, split over ``cur_shard``/``shard_count`` as
    ranks (see docs/native-api.md, Mixtures)."""
    from petastream.mix import Stream, mixture

    if not all(isinstance(s, Stream) for s in streams):
        raise InvalidArgumentError("dataset_url_or_urls mixes petastream.Stream items with plain URLs; wrap each "
                                   "URL in a petastream.Stream(url, weight=...)")
    for name, value in (("predicate", predicate), ("rowgroup_selector", rowgroup_selector), ("filters", filters)):
        if value is not None:
            raise InvalidArgumentError(
                f"{name} applies to one dataset, not to a mixture of Streams; give the Stream a filtered "
                "source instead: petastream.Stream(petastream.parquet.open_parquet(url, filters=...), weight=...)")
    if cache.get("cache_decoded"):
        raise InvalidArgumentError(
            "cache_type='local-disk' applies to Parquet datasets, and a mixture may hold MDS ones; give each "
            "Parquet Stream an open source instead: petastream.Stream(open_parquet(url, cache_decoded=True), ...)")
    options = {"storage_options": storage_options, "cache_limit": cache.get("cache_limit")}
    return mixture(list(streams), dataset_options={k: v for k, v in options.items() if v is not None})


def source_cache_options(cache_type: str | None, cache_location: str | None, cache_size_limit: int | None,
                cache_limit: Any) -> dict[str, Any]:
    """The source options that honour Petastorm's cache arguments. ``"local-disk"``: decoded
    row groups kept in the node's shard cache (Petastorm keeps decoded Arrow tables in a
    ``diskcache`` directory), at ``cache_location``, bounded by ``cache_size_limit`` unless
    petastream's own ``cache_limit`` is given; ``cache_row_size_estimate`` only sized
    Petastorm's ``diskcache`` shards (checked as Petastorm does, :mod:`._row_cache`)."""
    if cache_type in (None, "null"):
        return {"cache_limit": cache_limit}
    return {"cache_decoded": True, "cache_dir": local_path(cache_location),
            "cache_limit": cache_limit if cache_limit is not None else cache_size_limit}


def select_columns(columns: list[str], schema_fields: Any) -> list[str]:
    """The columns ``schema_fields`` (fields or regular expressions) match, in stored order."""
    if schema_fields is None:
        return columns
    patterns = [getattr(f, "name", f) for f in schema_fields]
    chosen = [c for c in columns if any(re.fullmatch(p, c) for p in patterns)]
    if not chosen:
        raise RuntimeError(f"No fields matching the criteria '{patterns}' were found in the dataset {columns}.")
    return chosen


def open_batch_source(dataset_url_or_urls: Any, *, storage_options: dict | None, cache: dict[str, Any],
                      filters: Any, predicate: Any, rowgroup_selector: Any, cur_shard: int | None,
                      shard_count: int | None, null_policy: str,
                      schema_fields: Any) -> tuple[Any, ValueError | None, bool]:
    """``(source, pending, sharded)``: the source ``make_batch_reader`` reads (``cache``: its
    :func:`source_cache_options`); the predicate's error to raise at the first read, as
    Petastorm raises it (or None); and whether the source already holds only this shard's
    row groups (Parquet: ``cur_shard``/``shard_count`` are spent; else they split it as ranks)."""
    dataset: Any
    pending: ValueError | None = None
    if is_source(dataset_url_or_urls):  # the converter's direct read of a table, opened by it
        refuse_row_selection("an open source", "pass them when opening it", predicate=predicate,
                             rowgroup_selector=rowgroup_selector, filters=filters)
        return dataset_url_or_urls, None, False
    root = None if _is_mixture(dataset_url_or_urls) else _mds_root(dataset_url_or_urls, storage_options)
    if _is_mixture(dataset_url_or_urls):
        dataset = _open_mixture(dataset_url_or_urls, storage_options=storage_options, cache=cache, filters=filters,
                                predicate=predicate, rowgroup_selector=rowgroup_selector)
    elif root is not None:
        refuse_row_selection("an MDS dataset (what make_spark_converter writes)",
                             "filter the DataFrame before make_spark_converter (df.filter(...)) instead",
                             predicate=predicate, rowgroup_selector=rowgroup_selector, filters=filters)
        # An MDS dataset needs no decoding cache: its shards are read in place, or cached as they are.
        dataset = MDSDataset(root, storage_options=storage_options, cache_dir=cache.get("cache_dir"),
                             cache_limit=cache["cache_limit"])
    else:
        warn_if_petastorm_dataset(dataset_url_or_urls, storage_options)
        opening = functools.partial(_open_parquet, dataset_url_or_urls, storage_options=storage_options, cache=cache,
                                    filters=filters, rowgroup_selector=rowgroup_selector, cur_shard=cur_shard,
                                    shard_count=shard_count, null_policy=null_policy, schema_fields=schema_fields)
        try:
            dataset = opening(predicate=predicate)
        except ValueError as error:
            if not isinstance(predicate, PredicateBase):
                raise
            # A predicate naming no field, or fields the files lack: Petastorm's ValueError comes
            # at the first read (its workers apply predicates), so the reader is made and raises it then.
            dataset, pending = opening(predicate=None), error
        return dataset, pending, True
    return dataset, pending, False
