"""Materializing a plain scan of Parquet files without Spark's row -> Arrow conversion.

For ``df.mapInArrow`` the JVM decodes the Parquet files into rows and converts the rows back to
Arrow for the Python tasks; on 2 cores that conversion cost as much as the whole of Petastorm's
``df.write.parquet``. When ``df`` is a plain scan of Parquet files
(:func:`petastream.spark.scan_plan.recognise`: the files, the columns in order, a filter Arrow
evaluates exactly as Spark does), the write tasks read the files' row groups with pyarrow
instead and hand the same Arrow columns to the same :class:`~petastream.spark._task.TaskWriter`:
same encodings, same conversions, same markers, same attempt directory, index.json last.

What Spark would deliver is honoured exactly or not at all (:func:`plan_scan` says why not,
and the caller runs the ``mapInArrow`` job as before):

* only columns whose Spark type reads back from Parquet as the same values in pyarrow:
  booleans, integers, floats, strings, binary and arrays of numbers or booleans (not decimals,
  dates, timestamps: rebasing and time zones; not vectors, structs, maps);
* ``dtype`` narrowing or widening (double <-> float) is cast here as Spark casts (IEEE round to
  nearest);
* ``null_policy='fill'`` stays on the Spark path (its scalar fills are Spark expressions);
* every file is checked in its task: each column read must exist under its exact name, with
  the Arrow type the Spark type reads as, and no other column of the file may differ from it
  by case only (Spark matches names case-insensitively). A file that fails the check, or that
  cannot be opened or read here (another filesystem's credentials, say), stops the job with
  :data:`SCAN_MARKER`, and the driver writes again through Spark (:class:`ScanFallback`).

The work is split without reading footers on the driver: each file is cut into ``parts`` slices
of its row groups (enough for Spark's parallelism when the files are fewer than the cores); a
slice with no row groups writes nothing. Who writes the slices:

* a classic session in local mode (``local[*]``: its executors are this machine's cores
  anyway): threads of this process, as many as Spark's default parallelism. A Spark job would
  first start Python workers, which import pyspark, pyarrow and petastream in every worker of a
  fresh session: measured on the 2-core machine with 1M rows, a fresh session's job took 11 s
  wall and ~7 CPU-s before its tasks had written anything, against 1.3 s for the whole write
  once the workers were warm; Petastorm's ``df.write.parquet`` starts no Python worker;
* anything else (a cluster, Spark Connect, or the conf ``tasks``): one Spark task per slice
  over ``spark.range``, on the executors that can see the files and the cache dir.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from petastream.errors import EncodingError
from petastream.spark._outcome import Retry

__all__ = ["SCAN_MARKER", "CONF", "ScanJob", "ScanFallback", "ScanTask", "plan_scan", "source_frame",
           "write_on_driver"]

#: In a task's reported failure: a file did not read as Spark would read it; write through Spark.
SCAN_MARKER = "petastream-scan-mismatch"
#: Spark conf: ``auto`` (default) reads a plain Parquet scan's files (in this process's threads in
#: local mode, else in Spark tasks); ``tasks``: always in Spark tasks; ``off``: never.
CONF = "petastream.spark.materialize.readFiles"

#: Spark type (``simpleString``) -> the Arrow type names pyarrow reads a Parquet column as.
_SCALARS = {"boolean": ("bool",), "tinyint": ("int8",), "smallint": ("int16",), "int": ("int32",),
            "bigint": ("int64",), "float": ("float",), "double": ("double",),
            "string": ("string", "large_string"), "binary": ("binary", "large_binary")}
_ELEMENTS = ("boolean", "tinyint", "smallint", "int", "bigint", "float", "double")
_SLICES_PER_CORE = 4  # with more files than this per core, a slice reads several
_ROWS_PER_BATCH = 65536  # what the writer takes at once: fewer per-batch costs than Spark's 10k


class ScanFallback(Retry):
    """A task found a file it could not read as Spark would: write again through Spark."""


@dataclass(frozen=True)
class ScanJob:
    """What the tasks read: ``files`` cut into ``parts`` slices each, ``columns`` (in the
    DataFrame's order) with their Spark types before ``dtype``'s cast (``source_types``) and
    after it (``target_types``), the rows ``filter`` keeps (a ``pyarrow.compute`` Expression)."""

    files: tuple[str, ...]
    columns: tuple[str, ...]
    source_types: tuple[str, ...]
    target_types: tuple[str, ...]
    filter: Any = None
    parts: int = 1
    threads: int = 0  # > 0: written by this many threads of the driver, not by Spark tasks
    group: int = 1  # > 1 (then parts == 1): consecutive files per slice

    @property
    def pieces(self) -> int:
        return -(-len(self.files) // self.group) * self.parts

    def slices(self, piece: int) -> list[tuple[str, int]]:
        """The (file, part) pairs slice ``piece`` reads, in order."""
        if self.group > 1:
            return [(f, 0) for f in self.files[piece * self.group:(piece + 1) * self.group]]
        return [(self.files[piece // self.parts], piece % self.parts)]


def plan_scan(df: Any, plans: list[Any], *, null_policy: str) -> tuple[ScanJob | None, str]:
    """The job reading ``df``'s files in the tasks, or None, and why (see the module doc)."""
    from petastream.spark.scan_plan import recognise

    mode = _conf(df.sparkSession)
    if mode == "off":
        return None, f"the Spark conf {CONF} is 'off'"
    if null_policy == "fill":
        return None, "null_policy='fill' fills scalar columns in Spark"
    verdict = recognise(df)
    scan = verdict.scan
    if scan is None:
        return None, f"not a plain Parquet scan: {verdict.reason}"
    if scan.format != "parquet":
        return None, f"it reads {scan.format}, not plain Parquet files"
    fields = list(df.schema.fields)
    if tuple(f.name for f in fields) != tuple(scan.columns) or len(plans) != len(fields):
        return None, "its columns are not the scanned columns as named in the files"
    sources = tuple(f.dataType.simpleString() for f in fields)
    for name, kind in zip(scan.columns, sources):
        if not _supported(kind):
            return None, f"column {name!r} is {kind}, which Spark reads its own way"
    targets = tuple(p.spark_type for p in plans)
    cores = _parallelism(df.sparkSession)
    parts = max(1, math.ceil(cores / len(scan.files)))
    # many small files: a few slices per core, each its own shards (not one per file)
    group = max(1, math.ceil(len(scan.files) / (_SLICES_PER_CORE * cores)))
    job = ScanJob(scan.files, scan.columns, sources, targets, scan.filter, parts, 0, group)
    if mode != "tasks" and _local(df.sparkSession):
        job = replace(job, threads=min(cores, job.pieces))
    where = f"{job.threads} thread(s) of this process" if job.threads else "Spark tasks"
    return job, f"{verdict.reason}: its files read in {job.pieces} slice(s) by {where}"


def _local(session: Any) -> bool:
    """A classic session in local mode (its executors are this process's JVM)."""
    if type(session).__module__.startswith("pyspark.sql.connect"):
        return False
    try:
        return str(session.sparkContext.master).startswith("local")
    except Exception:
        return False


def _supported(kind: str) -> bool:
    if kind.startswith("array<") and kind.endswith(">"):
        return kind[6:-1] in _ELEMENTS
    return kind in _SCALARS


def _conf(session: Any) -> str:
    try:
        return str(session.conf.get(CONF, "auto") or "auto").lower()
    except Exception:  # a conf the server refuses to show: the default
        return "auto"


def _parallelism(session: Any) -> int:
    """Spark's default parallelism (classic), the conf's on Connect, else this machine's cores."""
    if not type(session).__module__.startswith("pyspark.sql.connect"):
        try:
            return int(session.sparkContext.defaultParallelism)
        except Exception:
            pass
    try:
        return int(session.conf.get("spark.default.parallelism", None) or os.cpu_count() or 2)
    except Exception:
        return os.cpu_count() or 2


def write_on_driver(job: ScanJob, writer: Any) -> list[dict[str, Any]]:
    """Every slice written by ``job.threads`` threads of this process (local mode: see the
    module doc); the result rows, as a Spark job's tasks would report them."""
    from concurrent.futures import ThreadPoolExecutor

    task = ScanTask(job, writer)
    pool = ThreadPoolExecutor(max_workers=job.threads, thread_name_prefix="petastream-scan")
    done = False
    try:
        rows = list(pool.map(lambda piece: writer.write(task.read([piece]), piece, 0),
                             range(job.pieces)))
        done = True
        return rows
    finally:  # interrupted: queued slices are dropped, running ones end with their slice
        pool.shutdown(wait=done, cancel_futures=True)


def source_frame(df: Any, job: ScanJob) -> Any:
    """One row per slice, one slice per partition: partition ``i`` reads slice ``i``."""
    return df.sparkSession.range(0, job.pieces, 1, job.pieces)


class ScanTask:
    """Picklable callable for ``mapInArrow`` over :func:`source_frame`: reads its slice and
    feeds the batches to ``writer`` (a :class:`~petastream.spark._task.TaskWriter`)."""

    def __init__(self, job: ScanJob, writer: Any):
        self.job = job
        self.writer = writer

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        from petastream.mds.arrow_numpy import values

        pieces = [int(i) for b in batches for i in values(b.column(0))]
        yield from self.writer(self.read(pieces))

    def read(self, pieces: list[int]) -> Iterator[Any]:
        """The batches of slices ``pieces``, in order (a read error: :data:`SCAN_MARKER`)."""
        for url, part in (pair for piece in pieces for pair in self.job.slices(piece)):
            try:
                yield from read_slice(self.job, url, part)
            except EncodingError:
                raise
            except Exception as e:  # noqa: BLE001 - any doubt: Spark reads it instead
                raise EncodingError(f"{SCAN_MARKER}: {url} could not be read here "
                                    f"({type(e).__name__}: {e})") from e


def read_slice(job: ScanJob, url: str, part: int) -> Iterator[Any]:
    """Slice ``part`` of ``job.parts`` of the row groups of file ``url``: record batches of
    ``job.columns`` as Spark would hand them to ``mapInArrow``."""
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs

    from petastream.storage.location import resolve

    loc = resolve(url)
    if loc.is_local:
        fs: Any = pafs.LocalFileSystem()
    else:
        fs = pafs.PyFileSystem(pafs.FSSpecHandler(loc.fs))
    fragment = ds.ParquetFileFormat().make_fragment(loc.path, filesystem=fs)
    check_schema(job, url, fragment.physical_schema)
    fragment.ensure_complete_metadata()
    n = fragment.num_row_groups
    ids = list(range(part * n // job.parts, (part + 1) * n // job.parts))
    if not ids:
        return
    piece = fragment.subset(row_group_ids=ids)
    for batch in piece.to_batches(columns=list(job.columns), filter=job.filter,
                                  batch_size=_ROWS_PER_BATCH, use_threads=False):
        if batch.num_rows:
            yield cast_batch(job, batch)


def check_schema(job: ScanJob, url: str, schema: Any) -> None:
    """Raise (:data:`SCAN_MARKER`) unless every column reads from ``url`` as its Spark type."""
    names = schema.names
    lower = [n.lower() for n in names]
    for name, kind in zip(job.columns, job.source_types):
        if name not in names or lower.count(name.lower()) != 1:
            raise EncodingError(f"{SCAN_MARKER}: {url} has no column named exactly {name!r} "
                                "(or has several differing by case)")
        t = schema.field(name).type
        if not _reads_as(t, kind):
            raise EncodingError(f"{SCAN_MARKER}: column {name!r} of {url} is {t}, which Spark "
                                f"reads as {kind} its own way")


def _reads_as(t: Any, kind: str) -> bool:
    import pyarrow as pa

    if kind.startswith("array<"):
        if not (pa.types.is_list(t) or pa.types.is_large_list(t)):
            return False
        return str(t.value_type) in _SCALARS[kind[6:-1]]
    return str(t) in _SCALARS[kind]


def cast_batch(job: ScanJob, batch: Any) -> Any:
    """``batch`` with ``dtype``'s casts applied (double <-> float, as Spark's ``cast``)."""
    import pyarrow as pa

    if job.source_types == job.target_types:
        return batch
    arrays = []
    for i, (src, dst) in enumerate(zip(job.source_types, job.target_types)):
        arr = batch.column(i)
        if src != dst:
            elem = pa.float32() if dst in ("float", "array<float>") else pa.float64()
            target = elem if not dst.startswith("array<") else (
                pa.large_list(elem) if pa.types.is_large_list(arr.type) else pa.list_(elem))
            arr = arr.cast(target, safe=False)
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, names=list(job.columns))
