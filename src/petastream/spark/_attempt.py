"""One write attempt of :func:`petastream.spark.materializer.materialize`: the ``mapInArrow``
job into a fresh attempt directory (its progress reported), the tasks' partial indexes merged
into ``index.json`` (the types sidecar first), leftovers of failed task attempts swept, and the
attempt published under its content key; a failed attempt is discarded, and a failure explained
(:mod:`petastream.spark._outcome`). The materializer decides what to write and retries.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from petastream.mds.index import commit_index, dump_index
from petastream.mds.sidecar import SIDECAR, dump_sidecar
from petastream.spark import cache, claims, leases
from petastream.spark._file_scan import (
    SCAN_MARKER,
    ScanFallback,
    ScanJob,
    ScanTask,
    source_frame,
    write_on_driver,
)
from petastream.spark._interpreter import tasks_on_driver_python
from petastream.spark._outcome import Retry, check_agreement, check_task_errors, job_failure
from petastream.spark._task import RESULT_SCHEMA, TaskWriter
from petastream.spark.schema import ColumnPlan, apply_fill, with_length
from petastream.storage.location import resolve

__all__ = ["sweep", "write_attempt"]

log = logging.getLogger("petastream.spark")


def write_attempt(prepared: Any, plans: list[ColumnPlan], parent: str, key: str,
             codec: tuple[str | None, float], hashes: list[str] | None, size_limit: Any,
             null_policy: str, storage_options: dict | None, progress_interval: float,
             keep: bool, scan: ScanJob | None = None
             ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str, bool]:
    """One write job into a fresh attempt directory, merged and published. The lease is
    taken on the attempt before it is published, so no moment exists where the published
    dataset is unleased by its writer. With ``scan``, the tasks read the DataFrame's Parquet
    files themselves (:mod:`petastream.spark._file_scan`); a file they cannot read as Spark
    would raises :class:`~petastream.spark._file_scan.ScanFallback` (the attempt discarded)."""
    attempt = cache.attempt_url(parent, key)
    compression, min_saving = codec
    writer = TaskWriter(attempt, plans, compression=compression, min_compression_saving=min_saving,
                        hashes=hashes, size_limit=size_limit, fill=null_policy == "fill",
                        storage_options=storage_options)
    task: Any = writer
    if scan is not None:
        source, task = source_frame(prepared, scan), ScanTask(scan, writer)
    else:
        source = apply_fill(prepared, plans) if null_policy == "fill" else prepared
        # Positional names: mapInArrow resolves each column by name, which breaks on names
        # with dots; the tasks take columns by position anyway.
        source = source.toDF(*[f"_c{i}" for i in range(len(plans))])
    try:
        if scan is not None and scan.threads:
            rows = write_on_driver(scan, writer)
        else:
            with tasks_on_driver_python(source):  # local mode, no PYSPARK_PYTHON: see _interpreter
                job = source.mapInArrow(task, RESULT_SCHEMA)
            rows = _run_job(job, key, progress_interval)
        rows = sorted(rows, key=lambda r: r["partition"])
        unread = [r["failure"] for r in rows if SCAN_MARKER in r["failure"]]
        if unread:
            raise ScanFallback(plans, unread[0])
        check_task_errors(rows)  # data errors are results, not failed tasks: see _task
        check_agreement(plans, rows)
        subs = [r["sub"] for r in rows if r["sub"]]
        if not subs:
            empty = [with_length(p, None) if p.kind == "list_auto" else p for p in plans]
            subs = [_write_empty(attempt, empty, compression, hashes, size_limit, storage_options)]
        # Before index.json (the commit point): a published dataset always has its types.
        resolve(attempt, storage_options).write_bytes_atomic(SIDECAR, dump_sidecar(_column_info(plans)))
        shards = _merge(resolve(attempt, storage_options), subs, storage_options)
        sweep(attempt, subs, storage_options)
        leases.acquire(attempt, storage_options, keep=keep, check=False,
                       waiters=lambda: claims.waiters(parent, key, storage_options))
        url, won = cache.publish(parent, key, attempt, storage_options)
        if won:
            leases.rebind(attempt, url)
        else:
            leases.forget(attempt)  # publish deleted the attempt, lease included
    except BaseException as e:
        leases.forget(attempt)
        _discard(attempt, storage_options)
        if isinstance(e, Retry):
            raise
        outcome = job_failure(e, prepared, plans, null_policy, attempt)
        if outcome is None:
            raise
        raise outcome from outcome.__cause__
    return rows, shards, url, won


def sweep(attempt: str, subs: list[str], storage_options: dict | None) -> None:
    """Delete what failed or speculative task attempts left beside the reported sub-dirs
    (not in the index, so only wasted space)."""
    root = resolve(attempt, storage_options)
    keep = set(subs) | {"index.json", SIDECAR}
    for name in root.listdir():
        if name not in keep and not name.startswith("index.json"):
            try:
                root.child(name).delete_tree()
            except OSError as e:
                log.debug("could not delete leftover %s: %r", root.child_url(name), e)


def _column_info(plans: list[ColumnPlan]) -> dict[str, dict[str, str]]:
    """The Spark type of every column, and ``dtype: bool`` where uint8 stands for boolean."""
    info = {}
    for p in plans:
        entry = {"source_type": p.spark_type}
        if p.spark_type in ("boolean", "array<boolean>"):
            entry["dtype"] = "bool"
        info[p.name] = entry
    return info


def _merge(root: Any, subs: list[str], storage_options: dict | None) -> list[dict[str, Any]]:
    from petastream.mds.index import merge_index

    return merge_index([root.child_url(s) for s in subs], root.url,
                       storage_options=storage_options)


def _write_empty(attempt: str, plans: list[ColumnPlan], compression: str | None,
                 hashes: list[str] | None, size_limit: Any, storage_options: dict | None) -> str:
    """A DataFrame with no rows: one empty shard, so the dataset still records its columns."""
    from petastream.mds.writer import MDSWriter

    sub = "00000-empty"
    w = MDSWriter(columns={p.name: p.encoding for p in plans}, out=f"{attempt}/{sub}",
                  compression=compression, hashes=hashes, size_limit=size_limit,
                  write_index=False, storage_options=storage_options)
    w.flush()
    w.finish()
    commit_index(w.location, dump_index(w.shards))
    return sub


def _discard(attempt: str, storage_options: dict | None) -> None:
    """Delete a failed attempt now and again at exit: tasks of an aborted job may still be
    running and write after the first deletion (what they leave has no index.json and is
    never read, so this is housekeeping only)."""
    try:
        resolve(attempt, storage_options).delete_tree()
    except Exception as e:
        log.warning("could not delete the failed attempt %s: %r", attempt, e)
    cache.register_atexit(attempt, storage_options)


def _run_job(out_df: Any, key: str, interval: float) -> list[dict[str, Any]]:
    """Collect the per-task rows, reporting progress (classic and Connect, see ``_progress``)."""
    from petastream.spark._progress import track

    sc = None
    if not type(out_df).__module__.startswith("pyspark.sql.connect"):
        try:
            sc = out_df.sparkSession.sparkContext
        except Exception:
            sc = None
    group = f"petastream-{key[:12]}-{time.monotonic_ns()}"
    old: dict[str, Any] = {}
    if sc is not None:
        for prop, value in (("spark.jobGroup.id", group),
                            ("spark.job.description", f"petastream: materialize {key[:12]}")):
            old[prop] = sc.getLocalProperty(prop)
            sc.setLocalProperty(prop, value)
    try:
        with track(out_df, sc, group, "materializing", log, interval):
            return [row.asDict() for row in out_df.collect()]
    finally:
        for prop, value in old.items():
            sc.setLocalProperty(prop, value)  # type: ignore[union-attr]
