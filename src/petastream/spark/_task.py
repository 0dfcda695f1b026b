"""The executor side: one ``mapInArrow`` task writes its rows as a partial MDS dataset.

A task writes its shards straight into ``<attempt_dir>/<sub>/`` (``sub`` unique per task
attempt: partition id, Spark's task attempt id and a random suffix, so speculative or retried
attempts never share a directory), then that sub-directory's ``index.json`` last, and returns
one small row (partition, sub, samples, shards, bytes, seconds). No data goes back to the
driver. A task with no rows writes nothing and reports ``sub=''``.

Array columns left to the tasks (``kind='list_auto'``, the default one-pass mode) are decided
on the task's first non-empty batch: one length ``n`` over its non-null arrays gives
``ndarray:<dtype>:<n>``, several lengths give ``ndarray:<dtype>``; the task reports its choice
(``encodings``) and the driver checks that all tasks agree. Nulls inside arrays, and with a
fixed length null arrays too, are filled here under ``null_policy='fill'``. A task stops, and
reports a marker the driver recognises in its ``failure``, on: a null it may not fill
(:data:`NULL_MARKER`), an empty array (:data:`EMPTY_MARKER`: the ndarray encoding cannot store
one), a length other than the fixed one (:data:`LENGTH_MARKER`), or a first batch whose arrays
are all null under ``'fill'`` (:data:`UNKNOWN_MARKER`: no length to fill them to).

Any other :class:`~petastream.errors.EncodingError` (a value the encoding cannot hold) is
reported the same way: it comes from the data, so Spark's task retries cannot help; other
errors (storage, memory) still fail the task, for Spark to retry it.

Why a data error is a result and not a task failure: a failed task makes Spark cancel the job's
running tasks, and a cancelled task that has already handed its Python worker back to the
reuse pool can have that worker destroyed by Spark's kill timer while the *next* job's task
uses it (the Python runner's MonitorThread does not check that the worker was released,
SPARK-54217; so in pyspark 4.1.4, read in its bytecode): that next job (our rewrite after a marker, or the
user's next job) fails with ``ClosedChannelException`` or "Python worker exited
unexpectedly" on a loaded machine. So a task that meets a data error drops what it wrote,
leaves :data:`STOP_FLAG` in the attempt directory and returns normally; the job's other tasks
see the flag at their next batch (or at their start) and return :data:`STOPPED` the same way,
as early as Spark's cancellation would have stopped them. Other errors still fail the task.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np

from petastream.errors import EncodingError

__all__ = ["TaskWriter", "RESULT_SCHEMA", "NULL_MARKER", "LENGTH_MARKER", "EMPTY_MARKER",
           "UNKNOWN_MARKER", "STOPPED", "STOP_FLAG", "marked", "find_marked"]

RESULT_SCHEMA = ("partition int, sub string, samples long, shards int, bytes long, "
                 "seconds double, encodings string, failure string")
#: Prefix of the task error for a null value; the driver recognises it in the task's ``failure``.
NULL_MARKER = "petastream-null-values"
#: Prefix of the task error for an array length that differs from the one the task chose.
LENGTH_MARKER = "petastream-length-changed"
#: Prefix of the task error for an empty array (the ndarray encoding needs >= 1 element).
EMPTY_MARKER = "petastream-empty-arrays"
#: Prefix of the task error for a first batch of null arrays only, under null_policy='fill'.
UNKNOWN_MARKER = "petastream-length-unknown"
#: A task's ``failure`` when it stopped because another task of its job met a data error.
STOPPED = "petastream-stopped"
#: Left in the attempt directory by a task that met a data error: the job's other tasks stop.
STOP_FLAG = "petastream-stop"
#: Seconds between two looks for :data:`STOP_FLAG` (one stat, or one HEAD on object stores).
_STOP_CHECK_INTERVAL = 1.0

_NS_PER = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
_NS_PER_DAY = 86_400 * 1_000_000_000


class TaskWriter:
    """Picklable callable for ``DataFrame.mapInArrow`` (plain data only in its state)."""

    def __init__(self, url: str, plans: list[Any], *, compression: str | None,
                 hashes: list[str] | None, size_limit: int | str | None,
                 fill: bool, storage_options: dict | None, min_compression_saving: float = 0.0):
        self.url = url.rstrip("/")
        self.plans = plans
        self.compression = compression
        self.min_compression_saving = min_compression_saving
        self.hashes = hashes
        self.size_limit = size_limit
        self.fill = fill
        self.storage_options = storage_options

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark import TaskContext

        from petastream.mds.arrow_numpy import record_batch
        from petastream.spark._python_worker import lighten_worker

        start = time.perf_counter()
        lighten_worker()  # the per-task costs pyspark adds, for this worker's next tasks
        ctx = TaskContext.get()
        row = self.write(batches, ctx.partitionId() if ctx else 0, ctx.taskAttemptId() if ctx else 0,
                         start=start)
        # from buffers: pa.array / from_pydict would import pandas into the worker (arrow_numpy)
        types = {"partition": pa.int32(), "sub": pa.string(), "samples": pa.int64(), "shards": pa.int32(),
                 "bytes": pa.int64(), "seconds": pa.float64(), "encodings": pa.string(),
                 "failure": pa.string()}
        yield record_batch({k: (t, [row[k]]) for k, t in types.items()})

    def write(self, batches: Iterator[Any], partition: int, attempt: int,
              start: float | None = None) -> dict[str, Any]:
        """Write ``batches`` as the task ``partition`` (attempt ``attempt``) and return its
        result row (:data:`RESULT_SCHEMA`) as a dict; in a Spark task or in a thread of the
        driver (:mod:`petastream.spark._file_scan`)."""
        from petastream.mds.index import dump_index
        from petastream.mds.writer import MDSWriter

        start = time.perf_counter() if start is None else start
        sub = f"{partition:05d}-{attempt}-{uuid.uuid4().hex[:8]}"
        plans = self.plans
        writer = None
        samples = 0
        shards: list[dict[str, Any]] = []
        failure = ""
        stop = _StopFlag(self.url, self.storage_options)
        try:
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                if stop.raised():
                    failure = STOPPED
                    break
                if writer is None:
                    plans = _resolve_auto(plans, batch, self.fill)
                    columns = {p.name: p.encoding for p in plans}
                cols = self.convert(plans, batch)
                if writer is None:
                    writer = MDSWriter(columns=columns, out=f"{self.url}/{sub}",
                                       compression=self.compression, hashes=self.hashes,
                                       min_compression_saving=self.min_compression_saving,
                                       size_limit=self.size_limit, write_index=False,
                                       storage_options=self.storage_options)
                writer.write_columns(cols)
                samples += batch.num_rows
            if not failure:
                shards = writer.finish() if writer is not None else []
                if writer is not None and shards:
                    writer.location.write_bytes_atomic("index.json", dump_index(shards))
        except EncodingError as e:  # from the data: reported, see the module's docstring
            failure = f"{type(e).__module__}.{type(e).__qualname__}: {e}"
            stop.raise_flag()
        except BaseException:
            if writer is not None:
                writer.abort()
            raise
        if failure:  # this attempt will be discarded: nothing of this task is kept
            if writer is not None:
                writer.abort()
            samples, shards = 0, []
        nbytes = sum((s["zip_data"] or s["raw_data"])["bytes"] for s in shards)
        return {"partition": partition, "sub": sub if shards else "", "samples": samples,
                "shards": len(shards), "bytes": nbytes, "seconds": time.perf_counter() - start,
                "encodings": json.dumps({p.name: p.encoding for p in plans}), "failure": failure}

    def convert(self, plans: list[Any], batch: Any) -> dict[str, Any]:
        """Arrow columns -> what each column's encoding takes (no per-row Python work). Under
        ``fill`` Spark filled the scalar columns; the array columns are filled here."""
        out = {}
        for i, plan in enumerate(plans):
            arr = batch.column(i)
            if not self.fill:
                _check_nulls(plan, arr)
            try:
                out[plan.name] = _CONVERT[plan.kind](plan, arr, self.fill)
            except EncodingError as e:
                raise EncodingError(f"column {plan.name!r}: {e}") from e
        return out


def marked(marker: str, name: str) -> str:
    """``marker`` and the column name, as :func:`find_marked` reads them back."""
    return f"{marker} {json.dumps(name)}"


class _StopFlag:
    """:data:`STOP_FLAG` in the attempt directory: raised by a task that met a data error, looked
    for by the others at their first batch and then at most every
    :data:`_STOP_CHECK_INTERVAL` seconds."""

    def __init__(self, url: str, storage_options: dict | None):
        self.url = url
        self.storage_options = storage_options
        self.next_check = 0.0
        self.location: Any = None

    def _location(self) -> Any:
        if self.location is None:
            from petastream.storage.location import resolve

            self.location = resolve(self.url, self.storage_options)
        return self.location

    def raised(self) -> bool:
        now = time.monotonic()
        if now < self.next_check:
            return False
        self.next_check = now + _STOP_CHECK_INTERVAL
        try:
            return bool(self._location().exists(STOP_FLAG))
        except Exception:  # the flag only saves work; a storage hiccup must not fail a task
            return False

    def raise_flag(self) -> None:
        try:
            self._location().write_bytes_atomic(STOP_FLAG, b"")
        except Exception:  # the other tasks then write in vain, but the outcome is the same
            pass


def find_marked(marker: str, text: str) -> str | None:
    """The column named after ``marker`` in ``text`` (the tasks' reported failures), or None."""
    found = re.search(re.escape(marker) + r' ("(?:[^"\\]|\\.)*")', text)
    return json.loads(found.group(1)) if found else None


def _resolve_auto(plans: list[Any], batch: Any, fill: bool) -> list[Any]:
    """Decide the ``list_auto`` columns on the task's first batch: one length n over its
    non-null arrays -> fixed-size n, several -> variable-length."""
    from petastream.mds.arrow_numpy import list_lengths, validity
    from petastream.spark.schema import with_length

    out = []
    for i, p in enumerate(plans):
        if p.kind != "list_auto":
            out.append(p)
            continue
        col = batch.column(i)
        lengths, valid = list_lengths(col), validity(col)
        if valid is not None:
            lengths = lengths[valid]
        lo, hi = (int(lengths.min()), int(lengths.max())) if len(lengths) else (None, None)
        if lo is None and fill:
            raise EncodingError(f"{marked(UNKNOWN_MARKER, p.name)}: column {p.name!r}: the first "
                                "batch holds null arrays only")
        out.append(with_length(p, lo if lo is not None and lo == hi and lo > 0 else None))
    return out


def _check_nulls(plan: Any, arr: Any) -> None:
    from petastream.mds.arrow_numpy import list_values

    n = arr.null_count
    if not n and plan.kind in ("list", "list_fixed"):
        n = list_values(arr).null_count
    if n:
        raise EncodingError(f"{NULL_MARKER}: column {plan.name!r} holds null values")


def _valid_lengths(plan: Any, arr: Any) -> np.ndarray:
    """Array lengths, -1 for a null array; an empty array fails the task."""
    from petastream.mds.arrow_numpy import list_lengths, validity

    lengths = list_lengths(arr)
    valid = validity(arr)
    if valid is not None:
        lengths[~valid] = -1
    if (lengths == 0).any():
        raise EncodingError(f"{marked(EMPTY_MARKER, plan.name)}: column {plan.name!r} holds empty arrays")
    return lengths


def _filled_values(plan: Any, arr: Any, fill: bool) -> Any:
    """The values of the non-null arrays, nulls among them filled (NaN, 0, False)."""
    from petastream.mds.arrow_numpy import list_values

    values = list_values(arr)
    if values.null_count:
        import pyarrow as pa
        import pyarrow.compute as pc

        if not fill:
            raise EncodingError(f"{NULL_MARKER}: column {plan.name!r} holds null values")
        t = values.type
        value = float("nan") if pa.types.is_floating(t) else False if pa.types.is_boolean(t) else 0
        values = pc.fill_null(values, pa.scalar(value, t))
    return values


def _plain(plan: Any, arr: Any, fill: bool) -> Any:
    return arr


def _temporal(plan: Any, arr: Any, fill: bool) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_date32(arr.type):
        ints, factor = arr.cast(pa.int32()).cast(pa.int64()), _NS_PER_DAY
    elif pa.types.is_date64(arr.type):
        ints, factor = arr.cast(pa.int64()), 1_000_000
    else:
        ints, factor = arr.cast(pa.int64()), _NS_PER[arr.type.unit]
    if fill:
        ints = pc.fill_null(ints, 0)
    try:
        ns = pc.multiply_checked(ints, factor) if factor != 1 else ints
    except pa.ArrowInvalid as e:
        raise EncodingError(
            f"{plan.spark_type} value out of range for int64 nanoseconds since the epoch "
            "(1677-09-21 .. 2262-04-11)"
        ) from e
    from petastream.mds.arrow_numpy import values

    return values(ns).astype(np.int64, copy=False)


def _decimal(plan: Any, arr: Any, fill: bool) -> Any:
    """Arrow's decimal text (the same as ``str(Decimal)``, exponent notation included) as
    already-encoded bytes: no Python object per row."""
    import pyarrow as pa

    return arr.cast(pa.string()).cast(pa.large_binary())


def _json(plan: Any, arr: Any, fill: bool) -> Any:
    import pyarrow as pa

    # Spark's to_json text is the encoded value as is (binary = already encoded: no loop).
    return arr.cast(pa.large_binary())


def _list(plan: Any, arr: Any, fill: bool) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    if arr.null_count:  # no length to fill a null array to
        raise EncodingError(f"{NULL_MARKER}: column {plan.name!r} holds null arrays")
    from petastream.mds.arrow_numpy import list_values

    _valid_lengths(plan, arr)
    if list_values(arr).null_count:
        values = _filled_values(plan, arr, fill)
        offsets = arr.offsets
        arr = type(arr).from_arrays(pc.subtract(offsets, offsets[0]), values)
    if pa.types.is_boolean(arr.type.value_type):
        arr = arr.cast(pa.large_list(pa.uint8()))
    return arr


def _list_fixed(plan: Any, arr: Any, fill: bool) -> np.ndarray:
    n = plan.length
    lengths = _valid_lengths(plan, arr)
    bad = (lengths != n) & (lengths >= 0)
    if bad.any():
        raise EncodingError(f"{marked(LENGTH_MARKER, plan.name)}: expected arrays of length {n} (ndarray:{plan.elem_dtype}:{n}), "
                            f"found one of length {int(lengths[bad][0])}; the data changed since the "
                            "lengths were inferred, or pass array_lengths={column: None}")
    from petastream.mds.arrow_numpy import values

    dtype = np.dtype(plan.elem_dtype)
    flat = values(_filled_values(plan, arr, fill)).astype(dtype, copy=False)
    if not arr.null_count:
        return flat.reshape(len(arr), n)
    out = np.full((len(arr), n), np.nan if dtype.kind == "f" else 0, dtype=dtype)
    out[lengths >= 0] = flat.reshape(-1, n)
    return out


_CONVERT = {"plain": _plain, "date": _temporal, "timestamp": _temporal, "decimal": _decimal,
            "json": _json, "list": _list, "list_fixed": _list_fixed}
