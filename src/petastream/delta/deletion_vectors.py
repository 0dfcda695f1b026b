"""Deletion vectors of a Delta snapshot, as keep masks.

deltalake's ``DeltaTable.deletion_vectors()`` materializes every deletion vector of the table
at once, and in deltalake 1.6.6 never returns (no CPU used) once more than about 1,000 data
files carry a vector stored in a file (delta-io/delta-rs#4627 is the upstream issue on its
cost). The call is made in a daemon thread and waited for at most :data:`DELTALAKE_TIMEOUT_S`
seconds: a table that would hang is an error naming the table, its version and its files,
never a hang. A call that did not return leaves deltalake's runtime blocked in this process
(even opening another table then never returns), so every later Delta open in the process
is refused at once (:func:`check_deltalake_usable`) rather than hung.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from petastream.errors import ConfigurationError, StateError, UnsupportedFeatureError

__all__ = ["DELTALAKE_TIMEOUT_ENV", "DELTALAKE_TIMEOUT_S", "arrow_table", "check_deltalake_usable",
           "deltalake_keep_masks"]

#: How long deltalake's ``deletion_vectors()`` may take. It reads every vector of the table
#: (one request per vector file on object stores), which on a slow store takes tens of
#: seconds for a table just under the hang's threshold: 120 s leaves that room while still
#: ending a call that hung (it uses no CPU, so it would not end).
DELTALAKE_TIMEOUT_S = 120.0
#: Overrides :data:`DELTALAKE_TIMEOUT_S` (seconds).
DELTALAKE_TIMEOUT_ENV = "PETASTREAM_DELTA_DV_TIMEOUT_S"

#: The table whose deletion_vectors() call never returned in this process (None: none did).
_blocked_by: list[str] = []


def check_deltalake_usable(url: str) -> None:
    """Refuse to call deltalake once a call of it never returned in this process: its runtime
    is blocked, and opening any table would hang (found with deltalake 1.6.6)."""
    if _blocked_by:
        raise StateError(
            f"cannot open the Delta table at {url}: deltalake's deletion_vectors() on {_blocked_by[0]} "
            "never returned in this process, and deltalake does not answer in it since (it would "
            "hang); restart the process")


def _timeout() -> float:
    value = os.environ.get(DELTALAKE_TIMEOUT_ENV)
    if not value:
        return DELTALAKE_TIMEOUT_S
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise ConfigurationError(f"{DELTALAKE_TIMEOUT_ENV}={value!r}: give a number of seconds > 0 "
                                 f"(unset: {DELTALAKE_TIMEOUT_S:g})")
    return seconds


def arrow_table(data: Any) -> Any:
    """deltalake's Arrow data (an arro3 table or reader) as a ``pyarrow.Table``, through the
    Arrow C stream: ``pyarrow.table(data)`` first asks whether it is a pandas DataFrame, which
    imports pandas (0.7-1.3 s in a fresh process here: most of a cold open of 10,000 files)."""
    import pyarrow as pa

    return (data if isinstance(data, pa.RecordBatchReader) else pa.RecordBatchReader.from_stream(data)).read_all()


def _bounded(call: Any, seconds: float) -> Any:
    """``call()`` in a daemon thread, waited for at most ``seconds``: ``(True, result)``, or
    ``(False, None)`` when it has not returned (the thread is left behind: a call blocked in
    delta-rs cannot be interrupted, and a daemon thread does not keep the process alive)."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            outcome.append((False, e))

    thread = threading.Thread(target=run, name="petastream-delta-deletion-vectors", daemon=True)
    thread.start()
    thread.join(seconds)
    if not outcome:
        return False, None
    ok, value = outcome[0]
    if not ok:
        raise value
    return True, value


def deltalake_keep_masks(table: Any, url: str, version: int, files: int) -> dict[str, np.ndarray]:
    """Each file with a deletion vector (by deltalake's URI for it): its keep mask (rows past
    the mask's end are kept), from ``table.deletion_vectors()``, waited for at most
    :data:`DELTALAKE_TIMEOUT_S` seconds. ``version``, ``files``: the
    snapshot's version and number of data files (for the message)."""
    import pyarrow as pa

    seconds = _timeout()
    done, data = _bounded(lambda: arrow_table(table.deletion_vectors()), seconds)
    if not done:
        _blocked_by.append(f"{url} at version {version}")
        raise UnsupportedFeatureError(
            f"Delta table {url} at version {version} ({files} data files): deltalake's "
            f"DeltaTable.deletion_vectors() did not return within {seconds:g} s; deltalake 1.6.6 "
            "never returns once more than about 1,000 files have deletion vectors stored in files "
            "(see delta-io/delta-rs#4627). Fix: purge the deletion vectors (REORG TABLE ... APPLY "
            "(PURGE) on Databricks rewrites the files they mark), read the table with Spark, or "
            f"allow more time with {DELTALAKE_TIMEOUT_ENV}=<seconds> if it is only slow")
    out: dict[str, np.ndarray] = {}
    for batch in data.to_batches():
        paths = batch.column("filepath").to_pylist()
        vectors = batch.column("selection_vector")  # list<bool>: one keep mask per file
        values = vectors.values
        bits = np.unpackbits(np.frombuffer(values.buffers()[1], np.uint8), bitorder="little")
        keep = bits[values.offset:values.offset + len(values)].astype(bool)
        width = np.int64 if vectors.type.id == pa.large_list(pa.bool_()).id else np.int32
        ends = np.frombuffer(vectors.buffers()[1], width)[vectors.offset:vectors.offset + len(vectors) + 1]
        for path, a, b in zip(paths, ends[:-1].tolist(), ends[1:].tolist()):
            out[path] = keep[a:b]
    return out
