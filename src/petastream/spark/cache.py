"""Where materialized datasets live, how they are found again, and how they are published.

Layout under the parent cache directory::

    <parent>/petastream-<key>/                 a complete dataset (local filesystems)
        index.json                             merged index, written last = the commit point
        <sub>/shard.00000.mds.zstd ...         one sub-directory per successful task
    <parent>/.petastream-tmp-<key>-<uuid>/     an attempt in progress (or killed: never read)
    <parent>/petastream-<key>.json             object stores only: pointer to the complete
                                               attempt directory, written last with one PUT

``key`` is a content key: a hash of the analyzed plan (expression ids stripped, printed in
full), the schema, the input files with their sizes and modification times where the
DataFrame reads files (``df.inputFiles()``), and the options. An unchanged DataFrame converted
by a new process or session therefore finds the dataset. Plans whose result cannot be pinned
down that way (RDD-backed DataFrames, sources other than files that can change under the same
plan) get a key of their own per conversion: no cross-process reuse, only the in-process de-dup
by ``sameSemantics`` (Petastorm's). Local rows (``LocalRelation``, e.g. Connect's
``createDataFrame``) are not printed in the plan; the key then also takes
``df.semanticHash()`` (32 bits, stable across processes on Connect). A changed source that
keeps its files' names, sizes and modification times (or a non-file source inside a plan that
also reads files) is not detected: pass ``reuse=False`` for such inputs.

Publishing. Every conversion writes into its own attempt directory and merges the partial
indexes into ``<attempt>/index.json``. Local: the attempt directory is renamed to
``petastream-<key>`` (``os.rename`` of a directory is atomic and fails when the target exists
and is not empty); the loser of a race between two processes deletes its attempt and uses the
winner's complete dataset. Object stores (no directory rename): the attempt directory stays
the dataset, and the pointer file is written last; a conversion that finds a pointer to a
complete dataset uses it. A killed conversion leaves only an attempt directory without
``index.json``: never published, never picked up by the lookup.
"""

from __future__ import annotations

import atexit
import errno
import hashlib
import json
import logging
import os
import re
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from petastream.errors import StorageError
from petastream.storage.location import Location, resolve

__all__ = ["PARENT_CONF", "PETASTORM_PARENT_CONF", "content_key", "find_complete", "publish",
           "attempt_url", "final_url", "delete_dataset", "register_atexit", "unregister_atexit",
           "Registry"]

log = logging.getLogger("petastream.spark")

PARENT_CONF = "petastream.spark.parentCacheDirUrl"
PETASTORM_PARENT_CONF = "petastorm.spark.converter.parentCacheDirUrl"
KEY_VERSION = "1"
_PREFIX = "petastream-"
_TMP_PREFIX = ".petastream-tmp-"
# Leaves whose data the plan text does not pin down.
_UNPINNED_LEAVES = ("LogicalRDD", "ExternalRDD", "InMemoryRelation", "StreamingRelation")
_EXPR_ID = re.compile(r"#\d+L?")


def final_url(parent: str, key: str) -> str:
    return f"{parent.rstrip('/')}/{_PREFIX}{key}"


def attempt_url(parent: str, key: str) -> str:
    return f"{parent.rstrip('/')}/{_TMP_PREFIX}{key}-{uuid.uuid4().hex[:12]}"


def _marker(key: str) -> str:
    return f"{_PREFIX}{key}.json"


# -- the content key ---------------------------------------------------------------------------


def plan_text(df: Any) -> str:
    """The analyzed logical plan as Spark's ``explain(extended=True)`` prints it (the same text
    for classic and Connect DataFrames), every field printed, expression ids stripped."""
    conf = df.sparkSession.conf
    key = "spark.sql.debug.maxToStringFields"
    old = conf.get(key, None)
    conf.set(key, "1000000")  # no "... 5 more fields": two plans must not print alike
    try:
        jdf = getattr(df, "_jdf", None)
        if jdf is not None:  # classic: what DataFrame.explain(True) prints
            jvm = df.sparkSession.sparkContext._jvm
            explained = jvm.PythonSQLUtils.explainString(jdf.queryExecution(), "extended")
        else:  # Connect
            explained = df._explain_string(extended=True)
    finally:
        if old is None:
            conf.unset(key)
        else:
            conf.set(key, old)
    m = re.search(r"== Analyzed Logical Plan ==\n(.*?)\n== Optimized", explained, re.S)
    return _EXPR_ID.sub("#", m.group(1) if m else explained)


def _file_stats(files: list[str], storage_options: dict | None) -> list[Any] | None:
    """(url, size, mtime) of each input file; None if one cannot be stat'ed."""
    if not files:
        return []
    import fsspec

    def stat(url: str) -> list[Any]:
        local = url[len("file:"):] if url.startswith("file:") else None
        if local is not None:
            path = "/" + unquote(local).lstrip("/")
            st = os.stat(path)
            return [url, st.st_size, st.st_mtime_ns]
        fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
        info = fs.info(path)
        stamp = next((str(info[k]) for k in ("mtime", "LastModified", "last_modified", "ETag",
                                              "etag", "modificationTime", "created") if k in info), None)
        if stamp is None:
            raise StorageError(f"no modification time for {url}")
        return [url, info.get("size"), stamp]

    try:
        with ThreadPoolExecutor(16) as pool:
            return sorted(pool.map(stat, sorted(files)))
    except Exception as e:  # unknown scheme, permissions: the key cannot pin the files
        log.debug("cannot stat the input files (%s); no cross-process reuse", e)
        return None


def content_key(df: Any, options: dict[str, Any], *, storage_options: dict | None = None
                ) -> tuple[str, bool]:
    """``(key, pinned)``: ``pinned`` is False when the key includes a per-conversion token
    because the plan's data cannot be identified across processes."""
    text = plan_text(df)
    files = sorted(df.inputFiles())
    stats = _file_stats(files, storage_options)
    pinned = stats is not None and not any(leaf in text for leaf in _UNPINNED_LEAVES)
    if pinned and not files and re.search(r"^[\s:+|-]*Relation ", text, re.M):
        pinned = False  # a relation that lists no files (JDBC, ...): its data can change
    doc = {"v": KEY_VERSION, "plan": text, "schema": df.schema.json(), "files": stats,
           "options": options}
    if "LocalRelation" in text:
        doc["semantic"] = df.semanticHash()  # the rows are not in the plan text
    if not pinned:
        doc["token"] = uuid.uuid4().hex
    blob = json.dumps(doc, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:32], pinned


# -- lookup and publish ------------------------------------------------------------------------


def find_complete(parent: str, key: str, storage_options: dict | None = None) -> str | None:
    """URL of the complete dataset for ``key`` under ``parent``, or None."""
    from petastream.spark import _records

    # Fresh looks, not fsspec's listing cache: other processes publish and delete these.
    root = resolve(parent, storage_options)
    final = root.child(f"{_PREFIX}{key}")
    if _records.exists(final, "index.json"):
        return final.url
    if not root.is_local:
        try:
            url = json.loads(root.read_bytes(_marker(key)))["url"]
        except (OSError, ValueError, KeyError) as e:
            log.debug("no pointer for %s under %s: %r", key, parent, e)
            return None
        if _records.exists(resolve(url, storage_options), "index.json"):
            return url
        log.debug("the pointer for %s names %s, which has no index.json", key, url)
    return None


def publish(parent: str, key: str, attempt: str, storage_options: dict | None = None
            ) -> tuple[str, bool]:
    """Make the complete attempt directory the dataset for ``key``. Returns ``(url, won)``:
    ``won`` False means another conversion published first; its dataset is returned and the
    attempt deleted."""
    root = resolve(parent, storage_options)
    src = resolve(attempt, storage_options)
    if root.is_local:
        final = root.child(f"{_PREFIX}{key}")
        for _ in range(2):
            try:
                os.rename(src.path, final.path)
                return final.url, True
            except OSError as e:
                if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
            if final.exists("index.json"):
                src.delete_tree()
                return final.url, False
            final.delete_tree()  # not a dataset (never published by this protocol): clear it
        raise StorageError(f"cannot publish {attempt} as {final.url}")
    existing = find_complete(parent, key, storage_options)
    if existing is not None and existing != src.url:
        src.delete_tree()
        return existing, False
    root.write_bytes_atomic(_marker(key), json.dumps({"url": src.url, "key": key}).encode())
    return src.url, True


def delete_dataset(url: str, storage_options: dict | None = None) -> None:
    """Delete a dataset directory and, on object stores, the pointer that names it.

    ``index.json`` goes first: a deletion cut short (a kill, a flaky store) leaves a directory
    that no lookup takes for a complete dataset, never a published one with shards missing.
    Whether a shared dataset may be deleted is :mod:`petastream.spark.leases`' decision."""
    from petastream.spark import _records

    loc = resolve(url, storage_options)
    parent, _, name = loc.url.rstrip("/").rpartition("/")
    if name.startswith(_TMP_PREFIX) and not loc.is_local:
        key = name[len(_TMP_PREFIX):].rsplit("-", 1)[0]
        proot = resolve(parent, storage_options)
        if proot.exists(_marker(key)):
            try:
                if json.loads(proot.read_bytes(_marker(key))).get("url") == loc.url:
                    proot.remove(_marker(key))
            except (OSError, ValueError):
                pass
    _records.remove(loc, "index.json")
    loc.delete_tree()


_AT_EXIT: dict[str, dict | None] = {}
_AT_EXIT_LOCK = threading.Lock()


def _delete_at_exit() -> None:
    with _AT_EXIT_LOCK:
        pending = list(_AT_EXIT.items())
        _AT_EXIT.clear()
    for url, storage_options in pending:
        try:
            delete_dataset(url, storage_options)
        except Exception as e:  # best effort at interpreter exit
            log.warning("Delete cache data %s failed due to %r", url, e)


def register_atexit(url: str, storage_options: dict | None) -> None:
    """Delete ``url`` when the interpreter exits (one handler for all; see :func:`unregister_atexit`)."""
    with _AT_EXIT_LOCK:
        if not _AT_EXIT_REGISTERED:
            atexit.register(_delete_at_exit)
            _AT_EXIT_REGISTERED.append(True)
        _AT_EXIT[url] = storage_options


def unregister_atexit(url: str) -> None:
    with _AT_EXIT_LOCK:
        _AT_EXIT.pop(url, None)


_AT_EXIT_REGISTERED: list[bool] = []


def is_complete(url: str, storage_options: dict | None = None) -> bool:
    try:
        return resolve(url, storage_options).exists("index.json")
    except OSError:
        return False


# -- in-process de-dup -------------------------------------------------------------------------


@dataclass
class _Entry:
    df: Any
    parent: str
    options: dict[str, Any]
    url: str


class Registry:
    """Petastorm's in-process de-dup: same plan (``sameSemantics``), same options, same parent
    directory -> same dataset. Holds the DataFrames (not their data)."""

    def __init__(self) -> None:
        self._entries: list[_Entry] = []
        self.lock = threading.RLock()

    def lookup(self, df: Any, parent: str, options: dict[str, Any]) -> str | None:
        with self.lock:
            for entry in list(self._entries):
                if entry.parent != parent or entry.options != options:
                    continue
                if type(entry.df) is not type(df) or not _same(entry.df, df):
                    continue
                if is_complete(entry.url, options.get("storage_options")):
                    return entry.url
                self._entries.remove(entry)
        return None

    def add(self, df: Any, parent: str, options: dict[str, Any], url: str) -> None:
        with self.lock:
            self._entries.append(_Entry(df, parent, options, url))

    def forget(self, url: str) -> None:
        with self.lock:
            self._entries = [e for e in self._entries if e.url != url]

    def clear(self) -> None:
        with self.lock:
            self._entries.clear()


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a.sameSemantics(b))
    except Exception:  # different sessions, a stopped session
        return False


def location_of(url: str, storage_options: dict | None = None) -> Location:
    return resolve(url, storage_options)
