"""Deletion vectors of a Delta snapshot, as keep masks.

Read from the log's ``add`` actions' ``deletionVector`` descriptors (:func:`log_keep_masks`):
the newest classic checkpoint at or before the version (its ``add.path`` and
``add.deletionVector`` columns only), then the JSON commits after it; each vector file is read
once, through the table's :class:`~petastream.storage.location.Location` (local, S3, Azure...),
its size and CRC-32 checked, its bitmap decoded by pyroaring. Only the files kept by the
log's pruning get their vectors read. A log using what this reader does not read
(multi-part checkpoints, v2 checkpoints named by UUID or with sidecars, a commit gone, a
vector file outside the table) falls back to deltalake.

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

import base64
import json
import os
import re
import struct
import threading
import uuid
import zlib
from typing import Any
from urllib.parse import unquote

import numpy as np

from petastream._extras import require
from petastream.errors import (
    ConfigurationError,
    CorruptShardError,
    FormatError,
    StateError,
    UnsupportedFeatureError,
)
from petastream.storage.location import Location

__all__ = ["DELTALAKE_TIMEOUT_ENV", "DELTALAKE_TIMEOUT_S", "arrow_table", "check_deltalake_usable",
           "deltalake_keep_masks", "descriptors", "log_keep_masks"]

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


def deltalake_keep_masks(table: Any, url: str, version: int, files: int, why: str = "") -> dict[str, np.ndarray]:
    """Each file with a deletion vector (by deltalake's URI for it): its keep mask (rows past
    the mask's end are kept), from ``table.deletion_vectors()``, waited for at most
    :data:`DELTALAKE_TIMEOUT_S` seconds. ``version``, ``files``: the
    snapshot's version and number of data files, ``why``: what in its log petastream does not
    read (for the message)."""
    import pyarrow as pa

    seconds = _timeout()
    done, data = _bounded(lambda: arrow_table(table.deletion_vectors()), seconds)
    if not done:
        _blocked_by.append(f"{url} at version {version}")
        raise UnsupportedFeatureError(
            f"Delta table {url} at version {version} ({files} data files): deltalake's "
            f"DeltaTable.deletion_vectors() did not return within {seconds:g} s; deltalake 1.6.6 "
            "never returns once more than about 1,000 files have deletion vectors stored in files "
            f"(see delta-io/delta-rs#4627). petastream reads the vectors itself from classic "
            f"checkpoints and JSON commits, but this table's log needs deltalake ({why or 'asked for'}). "
            "Fix: write a classic checkpoint of the version read (deltalake: "
            "DeltaTable(url).create_checkpoint()), purge the deletion vectors (REORG TABLE ... APPLY "
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


# -- Reading the vectors ourselves ---------------------------------------------------------
# From the Delta protocol ("Deletion Vectors"): a descriptor's storageType is "u" (a file
# <table>/<prefix>/deletion_vector_<uuid>.bin; pathOrInlineDv is the prefix then the UUID's 16
# bytes in Z85), "i" (pathOrInlineDv is the bitmap in Z85) or "p" (an absolute path). A vector
# file is a version byte (1), then per vector at its offset: its size (int32 BE), the bitmap,
# its CRC-32 (uint32 BE). The bitmap is a RoaringBitmapArray: magic 1681511377 (int32 LE), then
# the portable 64-bit Roaring format, which pyroaring's BitMap64 reads.

MAGIC = 1681511377
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
# Z85 and base64's b85 are the same code over different alphabets: translate, then b85decode.
_TO_B85 = str.maketrans(_Z85, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
_ANY_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\..*(parquet|json)$")


class _Unreadable(Exception):
    """The log uses something this reader does not read (multi-part or v2 checkpoints, a path
    it cannot match): deltalake reads the vectors instead. Never leaves this module."""


def _z85(text: str) -> bytes:
    if len(text) % 5:
        raise FormatError(f"Z85 text of {len(text)} characters (a multiple of 5 is needed)")
    return base64.b85decode(text.translate(_TO_B85))


def _checkpoint(log: Location, version: int) -> int:
    """The version of the newest checkpoint at or before ``version`` (-1: none), which must be
    a classic single-file one."""
    try:
        last = json.loads(log.read_bytes("_last_checkpoint"))
    except (FileNotFoundError, ValueError):
        last = None
    if isinstance(last, dict) and isinstance(last.get("version"), int) and last["version"] <= version \
            and not last.get("parts") and not last.get("v2Checkpoint") \
            and log.exists(f"{last['version']:020d}.checkpoint.parquet"):
        return int(last["version"])
    found = [(int(m.group(1)), bool(_CHECKPOINT.match(n))) for n in log.listdir() if (m := _ANY_CHECKPOINT.match(n))]
    found = [f for f in found if f[0] <= version]
    if not found:
        return -1
    newest = max(v for v, _ in found)
    if (newest, True) not in found:
        raise _Unreadable(f"its checkpoint at version {newest} is multi-part or v2")
    return newest


def _from_checkpoint(log: Location, at: int, into: dict[str, Any]) -> None:
    import pyarrow.parquet as pq

    name = f"{at:020d}.checkpoint.parquet"
    where = log.local_file(name)
    with (open(where, "rb") if where else log.fs.open(log.child(name).path, "rb")) as f:
        pf = pq.ParquetFile(f)
        names = pf.schema_arrow.names
        if "sidecar" in names and pf.read(columns=["sidecar"]).column("sidecar").null_count != pf.metadata.num_rows:
            raise _Unreadable(f"its checkpoint {name} has sidecar files")
        if "add" not in names:
            return
        fields = [f.name for f in pf.schema_arrow.field("add").type]
        adds = pf.read(columns=["add.path"] + (["add.deletionVector"] if "deletionVector" in fields else []))
    column = adds.column("add").combine_chunks()
    paths = column.field("path").to_pylist()
    vectors = column.field("deletionVector").to_pylist() if "deletionVector" in fields else [None] * len(paths)
    for valid, path, dv in zip(column.is_valid().to_pylist(), paths, vectors):
        if valid:
            into[unquote(path)] = dv


def _from_commits(log: Location, first: int, last: int, into: dict[str, Any]) -> None:
    names = [f"{v:020d}.json" for v in range(first, last + 1)]
    if log.is_local:
        texts = [log.read_bytes(n) for n in names]
    else:  # one request per commit: a few at once
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(16) as pool:
            texts = list(pool.map(log.read_bytes, names))
    for text in texts:
        for line in text.decode().splitlines():  # str: json.loads then skips guessing the encoding
            if '"add"' in line:
                add = json.loads(line).get("add")
                if add:
                    into[unquote(add["path"])] = add.get("deletionVector")


def descriptors(loc: Location, version: int, paths: list[str]) -> dict[str, dict]:
    """The deletion vector descriptor of each of ``paths`` (add paths as the log writes them)
    that has one, from the log replayed up to ``version``: the newest classic checkpoint at or
    before it, then the JSON commits after it, a later add of a path replacing an earlier one."""
    log = loc.child("_delta_log")
    at = _checkpoint(log, version)
    found: dict[str, Any] = {}
    if at >= 0:
        _from_checkpoint(log, at, found)
    try:
        _from_commits(log, at + 1, version, found)
    except FileNotFoundError as e:  # log compaction, or commits cleaned up: deltalake knows
        raise _Unreadable(f"a commit is missing: {e}") from e
    out = {}
    for path in paths:
        key = unquote(path)
        if key not in found:
            raise _Unreadable(f"no add action found for {path}")
        if found[key]:
            out[path] = found[key]
    return out


def _rows(blob: bytes, what: str) -> np.ndarray:
    """The deleted row indices a serialized RoaringBitmapArray holds."""
    BitMap64 = require("pyroaring", "reading a Delta table's deletion vectors").BitMap64

    if len(blob) < 12 or int.from_bytes(blob[:4], "little") != MAGIC:
        raise CorruptShardError(f"{what}: not a deletion vector (no RoaringBitmapArray magic {MAGIC})")
    try:
        return np.frombuffer(BitMap64.deserialize(blob[4:]).to_array(), np.uint64)
    except Exception as e:  # noqa: BLE001 - pyroaring raises ValueError / OverflowError on damage
        raise CorruptShardError(f"{what}: its bitmap cannot be read ({e})") from e


def _file_blob(content: bytes, dv: dict, name: str, what: str) -> bytes:
    # No offset: the file's first vector (byte 0 is the version), as Delta's writers place it.
    offset, size = int(1 if dv.get("offset") is None else dv["offset"]), int(dv["sizeInBytes"])
    if content[:1] != b"\x01":
        raise CorruptShardError(f"{what}: {name} does not start with version byte 1")
    if offset < 1 or offset + 8 + size > len(content):
        raise CorruptShardError(f"{what}: the vector at offset {offset} ({size} bytes) runs past the end "
                                f"of {name} ({len(content)} bytes): the file is truncated")
    (stored,) = struct.unpack_from(">i", content, offset)
    blob = content[offset + 4:offset + 4 + size]
    (crc,) = struct.unpack_from(">I", content, offset + 4 + size)
    if stored != size or zlib.crc32(blob) & 0xFFFFFFFF != crc:
        raise CorruptShardError(f"{what}: the vector at offset {offset} of {name} fails its size or CRC-32 "
                                f"check (size {stored}, the log says {size}): the file is damaged")
    return blob


def _vector_file(loc: Location, dv: dict) -> str:
    """The vector file's path relative to the table root."""
    text = str(dv["pathOrInlineDv"])
    if dv["storageType"] == "u":
        if len(text) < 20:
            raise _Unreadable(f"pathOrInlineDv {text!r} is too short for a UUID")
        try:
            name = f"deletion_vector_{uuid.UUID(bytes=_z85(text[-20:]))}.bin"
        except ValueError as e:
            raise _Unreadable(f"pathOrInlineDv {text!r} does not end in a Z85 UUID") from e
        return f"{text[:-20]}/{name}" if text[:-20] else name
    root = loc.url.rstrip("/") + "/"
    path = unquote(text)
    for form in (root, "file://" + root, "file:" + root):  # Spark writes file:/path
        if path.startswith(form):
            return path[len(form):]
    raise _Unreadable(f"the vector file {text} is outside the table's directory")


def _read(loc: Location, version: int, files: dict[str, int | None]) -> dict[str, np.ndarray]:
    """Each of ``files`` (add path -> its rows, None: unknown) with a deletion vector: its keep
    mask (False: deleted; rows past the mask's end are kept). Each vector file is read once.
    Raises :class:`_Unreadable` where the log needs deltalake."""
    table = f"Delta table {loc.url} at version {version}"
    found = descriptors(loc, version, list(files))
    by_file: dict[str, list[str]] = {}
    names: dict[tuple[str, str], str] = {}
    out: dict[str, np.ndarray] = {}
    for path, dv in found.items():
        kind = dv.get("storageType")
        if kind == "i":
            what = f"{table}: the inline deletion vector of {path}"
            try:
                blob = _z85(str(dv["pathOrInlineDv"]))[:int(dv["sizeInBytes"])]
            except ValueError as e:
                raise CorruptShardError(f"{what} is not Z85 ({e})") from e
            _add(out, path, _mask(_rows(blob, what), dv, files[path], what))
        elif kind in ("u", "p"):  # most vectors share a few files: each name decoded once
            where = (kind, dv["pathOrInlineDv"])
            if where not in names:
                names[where] = _vector_file(loc, dv)
            by_file.setdefault(names[where], []).append(path)
        else:
            raise _Unreadable(f"storageType {kind!r}")
    files_read = sorted(by_file)
    if loc.is_local or len(files_read) < 2:
        contents = [loc.read_bytes(n) for n in files_read]
    else:  # one request per vector file: a few at once
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(16) as pool:
            contents = list(pool.map(loc.read_bytes, files_read))
    for name, content in zip(files_read, contents):
        for path in by_file[name]:
            what = f"{table}: the deletion vector of {path}"
            _add(out, path, _mask(_rows(_file_blob(content, found[path], loc.child_url(name), what), what),
                                  found[path], files[path], what))
    return out


def _add(out: dict[str, np.ndarray], path: str, keep: np.ndarray) -> None:
    if len(keep):  # an empty vector deletes nothing: the file is served whole
        out[path] = keep


def _mask(rows: np.ndarray, dv: dict, records: int | None, what: str) -> np.ndarray:
    if len(rows) != int(dv["cardinality"]):
        raise CorruptShardError(f"{what} holds {len(rows)} rows; the log says {dv['cardinality']}")
    if len(rows) and records is not None and int(rows[-1]) >= records:
        raise CorruptShardError(f"{what} deletes row {int(rows[-1])} of a file of {records} rows")
    keep = np.ones(int(rows[-1]) + 1 if len(rows) else 0, bool)
    keep[rows.astype(np.int64)] = False
    return keep


def log_keep_masks(loc: Location, version: int, files: dict[str, int | None]) -> tuple[dict[str, np.ndarray] | None, str]:
    """Each of ``files`` (add path -> its rows, None: unknown) with a deletion vector: its keep
    mask (False: deleted; rows past the mask's end are kept), read from the log's descriptors,
    each vector file once. ``(None, why)`` where the log needs deltalake to read them."""
    try:
        return _read(loc, version, files), ""
    except _Unreadable as e:
        return None, str(e)
