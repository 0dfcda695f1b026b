"""Claims: one write per DataFrame content key among the processes sharing a parent directory.

::

    <parent>/.petastream-claims/<key>.json   the writer: host, pid, heartbeat, start of the write
    <parent>/.petastream-claims/<key>.waiting-<host>-<pid>-<nonce>.json
                                             a process waiting for the writer: a writer that
                                             publishes and exits at once keeps the dataset for
                                             it (see :func:`waiters`)
    <parent>/.petastream-claims/<key>.lock   local directories only: an OS file lock held for
                                             the instant a claim is checked and taken

The first process to convert a DataFrame creates the claim, writes, publishes, and removes
the claim. The others wait while the claim's writer is alive, logging progress every
``progress_interval`` seconds, then find the published dataset and reuse it. A writer that
dies (same host: its pid is gone, noticed within :data:`POLL_S`; other host: its heartbeat
expired, :data:`petastream.spark._records.TTL_S`) no longer holds the claim: the first waiter
to notice takes it over and writes. The wait is bounded (:data:`WAIT_TIMEOUT_S`): past it the
waiter writes too, as a writer that hangs alive must not block everyone.

Taking a claim is atomic on local paths (the file lock around check-and-take; the record is
created with an atomic hard link). On object stores a new claim is a conditional PUT where the
store supports it, and a take-over is a plain PUT; every claimer reads the claim back after
:data:`SETTLE_S` and keeps it only if its own record is there. The worst case of a race is two
writers of one key: both writes complete, :func:`petastream.spark.cache.publish` keeps the
first and discards the other (local) or both stay complete datasets, each leased by its users
(object stores). Never a corrupt or deleted-in-use dataset.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator
from typing import Any

from petastream.spark import _records
from petastream.spark._records import encode, me
from petastream.storage.location import Location, resolve

__all__ = ["claim", "waiters", "CLAIM_DIR", "WAIT_TIMEOUT_S", "POLL_S", "SETTLE_S"]

log = logging.getLogger("petastream.spark")

CLAIM_DIR = ".petastream-claims"
#: Longest wait for another live writer of the same key, in seconds.
WAIT_TIMEOUT_S = 3600.0
#: Seconds between two looks at the claim while waiting (local; object stores: 1 s, a GET each).
POLL_S = 0.25
#: Object stores: seconds between writing a claim and reading it back.
SETTLE_S = 0.5


@contextlib.contextmanager
def claim(parent: str, key: str, storage_options: dict | None = None, *,
          progress_interval: float = 10.0, timeout: float | None = None) -> Iterator[bool]:
    """Hold the claim to write ``key`` under ``parent`` while the block runs.

    Yields True once this process holds it (the caller then looks for the dataset again: a
    previous writer may have published it), False when the wait timed out (the caller
    writes anyway)."""
    loc = resolve(parent, storage_options).child(CLAIM_DIR)
    name = f"{key}.json"
    started = time.time()
    # Until the block ends (the caller has leased the dataset by then), this process counts
    # as a user of the dataset that the writer publishes.
    waiting = f"{key}.waiting-{me().name}.json"
    _records.write(loc, waiting, encode(me(), key=key))
    _records.heartbeat.add(loc, waiting, key=key)
    try:
        if not _acquire(loc, name, key, parent, progress_interval,
                        WAIT_TIMEOUT_S if timeout is None else timeout, started):
            yield False
            return
        _records.heartbeat.add(loc, name, key=key, started=started)
        try:
            yield True
        finally:
            _records.heartbeat.discard(loc, name)
            try:
                if _mine(_records.read(loc, name)):
                    _records.remove(loc, name)
            except OSError as e:  # a dead claim is taken over anyway
                log.warning("could not remove the claim %s: %r", loc.child_url(name), e)
    finally:
        _records.heartbeat.discard(loc, waiting)
        _records.remove(loc, waiting)


def waiters(parent: str, key: str, storage_options: dict | None = None) -> list[str]:
    """The other live processes (``host:pid``) waiting for a write of ``key`` under
    ``parent``, or checking for it after their wait: they are about to lease the dataset.
    Records of dead processes are removed on the way."""
    loc = resolve(parent, storage_options).child(CLAIM_DIR)
    prefix, own = f"{key}.waiting-", f"{key}.waiting-{me().name}.json"
    found = []
    for name in _records.list_names(loc):
        if not name.startswith(prefix) or name == own:
            continue
        record = _records.read(loc, name)
        if record is not None and _records.alive(record):
            found.append(f"{record.get('host')}:{record.get('pid')}")
        elif record is not None:
            _records.remove(loc, name)
    return found


def _mine(record: dict[str, Any] | None) -> bool:
    return record is not None and record.get("nonce") == me().nonce and record.get("pid") == os.getpid()


def _acquire(loc: Location, name: str, key: str, parent: str, interval: float, timeout: float,
             started: float) -> bool:
    t0 = time.monotonic()
    next_log = t0 + interval if interval else float("inf")
    poll = POLL_S if loc.is_local else max(POLL_S, 1.0)
    while True:
        with _exclusive(loc, key) as atomic:
            taken, record = _take(loc, name, key, started)
        if taken and not atomic:
            time.sleep(SETTLE_S)
            record = _records.read(loc, name)
            taken = _mine(record)
        if taken:
            return True
        record = record or {}
        waited = time.monotonic() - t0
        who = f"host {record.get('host')}, pid {record.get('pid')}"
        if waited >= timeout:
            log.warning("waited %.0f s for the live process (%s) writing the same DataFrame "
                        "into %s (content key %s); writing it here too (the first to publish "
                        "is kept)", waited, who, parent, key)
            return False
        if time.monotonic() >= next_log:
            since = record.get("started")
            log.info("waiting for the process (%s) that is writing the same DataFrame into %s "
                     "(content key %s, writing for %s s): %.0f s so far; the wait ends when it "
                     "publishes or dies, or after %.0f s; reuse=False writes a copy of your own",
                     who, parent, key, f"{time.time() - since:.0f}" if isinstance(since, float)
                     else "?", waited, timeout)
            next_log += interval
        time.sleep(poll)


def _take(loc: Location, name: str, key: str, started: float
          ) -> tuple[bool, dict[str, Any] | None]:
    """Take the claim if it is free or its writer is dead: (whether this process holds it,
    the record found)."""
    record = _records.read(loc, name)
    data = encode(me(), key=key, started=started)
    if record is None:
        return _records.create(loc, name, data), None
    if _mine(record):
        return True, record
    if _records.alive(record):
        return False, record
    log.warning("the process writing content key %s (host %s, pid %s) is gone; this process "
                "takes over its write", key, record.get("host"), record.get("pid"))
    _records.write(loc, name, data)
    return True, record


@contextlib.contextmanager
def _exclusive(loc: Location, key: str) -> Iterator[bool]:
    """Local: hold ``<key>.lock`` around check-and-take (yields True). Object stores, or a
    file system without working locks: no lock (yields False; the caller reads back)."""
    if not loc.is_local:
        yield False
        return
    from filelock import FileLock, Timeout

    os.makedirs(loc.path, exist_ok=True)
    lock = FileLock(os.path.join(loc.path, f"{key}.lock"))
    try:
        # Held for milliseconds; a long wait means a lock that its owner's death did not free
        # (no flock on this file system): carry on without it.
        lock.acquire(timeout=10)
    except (Timeout, NotImplementedError, OSError) as e:
        log.debug("no file lock in %s (%r); settling claims by reading back", loc.url, e)
        yield False
        return
    try:
        yield True
    finally:
        lock.release()
