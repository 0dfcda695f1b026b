"""What a materialization write job's outcome means (split from :mod:`petastream.spark.materializer`).

Tasks report their choices, and the data errors they met (markers among them), in their
result rows (:mod:`petastream.spark._task`). Here: whether a task met one (:func:`check_task_errors`),
whether the tasks' array encodings agree (:func:`check_agreement`), and what a failed job
becomes (:func:`job_failure`): a :class:`Retry` with changed plans, the clear error a marker
names (nulls, empty arrays), or Spark's error with the task's own message.
"""

from __future__ import annotations

import json
import re
from typing import Any

from petastream.spark._errors import MaterializationError
from petastream.spark._task import (
    EMPTY_MARKER,
    LENGTH_MARKER,
    NULL_MARKER,
    STOPPED,
    UNKNOWN_MARKER,
    find_marked,
)
from petastream.spark.schema import ColumnPlan, count_nulls, empty_error, null_error, with_length

__all__ = ["Retry", "TaskErrors", "check_task_errors", "check_agreement", "job_failure"]


class Retry(Exception):
    """The tasks chose array encodings that do not agree: write again with these plans
    (after deciding the columns ``infer`` with one aggregate job)."""

    def __init__(self, plans: list[ColumnPlan], why: str, infer: tuple[str, ...] = ()):
        super().__init__(why)
        self.plans = plans
        self.infer = infer


class TaskErrors(Exception):
    """Tasks of a write job met data errors; the message holds them, one a line, as
    ``module.Error: message`` (what :func:`job_failure` reads in Spark's exception text)."""


def check_task_errors(rows: list[dict[str, Any]]) -> None:
    """Raise :class:`TaskErrors` when a task reported a data error (the tasks that only
    stopped because of it say :data:`~petastream.spark._task.STOPPED`)."""
    failures = [r["failure"] for r in rows if r["failure"] and r["failure"] != STOPPED]
    if failures:
        raise TaskErrors("\n".join(failures))


def check_agreement(plans: list[ColumnPlan], rows: list[dict[str, Any]]) -> None:
    """``array_lengths='optimistic'``: every task that wrote must have chosen the same
    encoding per array column; a column they disagree on becomes variable-length (raised
    before the merge: the attempt is discarded, never published)."""
    auto = [p for p in plans if p.kind == "list_auto"]
    if not auto:
        return
    chosen: dict[str, set[str]] = {p.name: set() for p in auto}
    for row in rows:
        if row["sub"]:
            encodings = json.loads(row["encodings"])
            for name in chosen:
                chosen[name].add(encodings[name])
    split = sorted(name for name, encs in chosen.items() if len(encs) > 1)
    if split:
        raise Retry([with_length(p, None) if p.name in split else p for p in plans],
                     f"tasks chose different array encodings for {split}")


def job_failure(e: BaseException, prepared: Any, plans: list[ColumnPlan], null_policy: str,
                attempt: str) -> BaseException | None:
    """What to raise for a failed write job (its attempt already discarded): a :class:`Retry`
    when a task's marker says the plans must change, the clear error a marker names, Spark's
    error wrapped in :class:`MaterializationError` naming the task's own message (its
    ``__cause__`` set), or None to re-raise ``e`` as is."""
    text = str(e) if isinstance(e, Exception) else ""
    if NULL_MARKER in text:
        return _null_failure(prepared, plans, null_policy)
    empty = find_marked(EMPTY_MARKER, text)
    if empty is not None:
        return empty_error(empty)
    auto = {p.name for p in plans if p.kind == "list_auto"}
    changed = find_marked(LENGTH_MARKER, text)
    if changed in auto:
        return Retry([with_length(p, None) if p.name == changed else p for p in plans],
                     f"column {changed!r}: array lengths vary within a task")
    unknown = find_marked(UNKNOWN_MARKER, text)
    if unknown in auto:
        return Retry(plans, f"column {unknown!r}: a task met only null arrays in its first batch",
                     infer=(unknown,))
    if isinstance(e, Exception) and not isinstance(e, MaterializationError):
        wrapped = MaterializationError(f"materializing the DataFrame into {attempt} failed: {_task_message(e)}")
        wrapped.__cause__ = e
        return wrapped
    return None


def _null_failure(df: Any, plans: list[ColumnPlan], null_policy: str) -> Exception:
    nulls = count_nulls(df, plans)
    if null_policy == "fill":
        nulls = {p.name: nulls.get(p.name, 0) for p in plans if p.kind in ("list", "list_auto")}
        bad = ", ".join(f"{k!r}: {v} row(s)" for k, v in nulls.items() if v)
        from petastream.spark._errors import NullValuesError

        return NullValuesError(
            f"null arrays in variable-length array column(s) ({bad}) have no fill value; "
            "filter them out or fill them in Spark (e.g. coalesce(col, array(lit(0))))"
        )
    return null_error(nulls)


_ERROR_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Invalid)): (.+)$", re.M)
_JVM = ("org.", "java.", "scala.", "py4j.", "io.grpc.", "pyspark.")


def _task_message(e: BaseException) -> str:
    """The Python error a task raised, found in Spark's exception text (ours first)."""
    text = str(e)
    found = [(n, m) for n, m in _ERROR_LINE.findall(text) if not n.startswith(_JVM)]
    ours = [f for f in found if f[0].startswith(("petastream.", "pyarrow."))]
    if ours or found:
        name, msg = (ours or found)[-1]
        return f"{name.rsplit('.', 1)[-1]}: {msg}"
    return text.strip().splitlines()[0] if text.strip() else type(e).__name__
