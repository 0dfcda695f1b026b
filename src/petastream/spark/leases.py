"""Leases: no process deletes a dataset that another live process is using.

Every process that uses a materialized dataset (it wrote it or found it; native or compat;
local or object store) holds a lease on it until it exits or deletes it::

    <dataset>/.leases/use-<host>-<pid>-<nonce>.json       this process uses the dataset
    <dataset>/.leases/keep-<host>-<pid>-<nonce>.json      someone asked to keep it at exit
    <dataset>/.leases/deleting-<host>-<pid>-<nonce>.json  a deletion is deciding (tombstone)

The rule. At exit, a process gives up its lease and deletes the dataset (Petastorm's
delete-at-exit) only when no other *live* lease and no keep pin exists. An explicit delete
(``converter.delete()``, ``MaterializedDataset.delete()``) gives up the lease and the
caller's keep pin and deletes unless another live process uses the dataset; it ignores other
processes' keep pins, which are there for the automatic clean-up only. Leases of dead
processes (see :mod:`petastream.spark._records`: same host, pid gone; other host, heartbeat
expired) do not count and are pruned, so a crashed job never pins data. The live processes
waiting on the claim of the dataset's content key count too
(:func:`petastream.spark.claims.waiters`): they are about to lease what was just published.

Why no process deletes under a new user: a deleter writes its tombstone *before* it lists
the leases; a new user writes its lease *before* it looks for live tombstones, and backs off
when it sees one (the caller looks the dataset up again). Whatever the interleaving, either
the deleter sees the new lease and keeps the dataset, or the new user sees the tombstone and
does not use it. Deletion removes ``index.json`` first, so a deletion cut short leaves a
directory that no lookup takes for a complete dataset.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass

from petastream.spark import _records
from petastream.spark._records import encode, me
from petastream.spark.cache import delete_dataset  # now: at exit its imports would fail
from petastream.storage.location import Location, resolve

__all__ = ["acquire", "rebind", "forget", "release", "set_exit_action", "held", "kept", "users",
           "LEASE_DIR"]

log = logging.getLogger("petastream.spark")

LEASE_DIR = ".leases"

Deleter = Callable[[str], None]


@dataclass
class _Held:
    url: str
    storage_options: dict | None
    keep: bool = False
    on_exit: Deleter | None = None  # how to delete at exit; None: cache.delete_dataset
    # Other processes about to lease it (waiters for its write; see claims.waiters).
    waiters: Callable[[], list[str]] | None = None


_HELD: dict[str, _Held] = {}
_LOCK = threading.RLock()
_EXIT_PID: list[int] = []


def _dir(url: str, storage_options: dict | None) -> Location:
    return resolve(url, storage_options).child(LEASE_DIR)


def _use(owner_name: str) -> str:
    return f"use-{owner_name}.json"


def held(url: str) -> bool:
    """Whether this process holds a lease on ``url``."""
    with _LOCK:
        return url in _HELD


def kept(url: str) -> bool:
    """Whether this process holds ``url`` with a keep pin (kept at exit)."""
    with _LOCK:
        return url in _HELD and _HELD[url].keep


def acquire(url: str, storage_options: dict | None = None, *, keep: bool = False,
            check: bool = True, waiters: Callable[[], list[str]] | None = None) -> bool:
    """Hold a lease on the dataset at ``url`` until exit or :func:`release` (idempotent).

    ``keep``: also pin it, so that no process deletes it at exit. ``check`` (default): back
    off and return False when a live deletion is under way or ``index.json`` is gone (look the
    dataset up again); False only for an attempt directory this process is writing.
    ``waiters``: lists the other processes about to lease the dataset; a release keeps the
    dataset for them as for lease holders.
    """
    with _LOCK:
        entry = _HELD.get(url)
        dataset = resolve(url, storage_options)
        loc = dataset.child(LEASE_DIR)
        if entry is None:
            name = _use(me().name)
            _records.write(loc, name, encode(me()))
            if check and (_deleting(loc) or not _records.exists(dataset, "index.json")):
                log.debug("not leasing %s: being deleted, or deleted", url)
                _records.remove(loc, name)
                return False
            _records.heartbeat.add(loc, name)
            entry = _HELD[url] = _Held(url, storage_options)
            _register_exit()
        if waiters is not None:
            entry.waiters = waiters
        if keep and not entry.keep:
            _records.write(loc, f"keep-{me().name}.json", encode(me(), keep=True))
            entry.keep = True
    return True


def rebind(old_url: str, new_url: str) -> None:
    """The leased directory was renamed (a local attempt published): follow it."""
    with _LOCK:
        entry = _HELD.pop(old_url, None)
        if entry is None:
            return
        name = _use(me().name)
        _records.heartbeat.discard(_dir(old_url, entry.storage_options), name)
        entry.url = new_url
        _HELD[new_url] = entry
        _records.heartbeat.add(_dir(new_url, entry.storage_options), name)


def forget(url: str) -> None:
    """Drop the lease without touching storage (its directory was deleted with it)."""
    with _LOCK:
        entry = _HELD.pop(url, None)
        if entry is not None:
            _records.heartbeat.discard(_dir(url, entry.storage_options), _use(me().name))


def set_exit_action(url: str, deleter: Deleter) -> None:
    """Delete ``url`` with ``deleter(url)`` at exit (when the rule allows) instead of the
    default (compat: Petastorm's registered delete handler)."""
    with _LOCK:
        if url in _HELD:
            _HELD[url].on_exit = deleter


def users(url: str, storage_options: dict | None = None, *, count_keep: bool = True
          ) -> list[str]:
    """The other live processes (``host:pid``) holding a lease on ``url``, and keep pins
    (``keep:host:pid``) if ``count_keep``. Dead processes' leases are removed on the way."""
    return _users(_dir(url, storage_options), count_keep)


def _users(loc: Location, count_keep: bool) -> list[str]:
    own = _use(me().name)
    found = []
    for name in _records.list_names(loc):
        kind = name.split("-", 1)[0]
        # This process's keep pin counts: another session in it asked to keep the dataset.
        if kind not in ("use", "keep") or not name.endswith(".json") or name == own:
            continue
        record = _records.read(loc, name)
        if record is None:
            continue
        who = f"{record.get('host')}:{record.get('pid')}"
        if kind == "keep":
            if count_keep:
                found.append(f"keep:{who}")
        elif _records.alive(record):
            found.append(who)
        else:
            log.debug("removing the lease of dead process %s on %s", who, loc.url)
            _records.remove(loc, name)
    return found


def _deleting(loc: Location) -> bool:
    mine = me().name
    for name in _records.list_names(loc):
        if name.startswith("deleting-") and mine not in name:
            record = _records.read(loc, name)
            if record is not None and _records.alive(record):
                return True
    return False


def release(url: str, storage_options: dict | None = None, *, explicit: bool = False,
            delete: Deleter | None = None, force: bool = False) -> bool:
    """Give up this process's lease on ``url`` and delete the dataset if the rule allows
    (see the module docstring). ``explicit``: a user's delete (removes this process's keep
    pin, ignores others'); else the clean-up at exit (any keep pin keeps the dataset).
    ``delete``: how to delete (default: this lease's exit action, else
    :func:`petastream.spark.cache.delete_dataset`). ``force``: delete even if others use it.
    Returns True when the dataset was deleted."""
    with _LOCK:
        entry = _HELD.pop(url, None)
    options = entry.storage_options if entry is not None else storage_options
    loc = _dir(url, options)
    mine = me().name
    _records.heartbeat.discard(loc, _use(mine))
    _records.remove(loc, _use(mine))
    if explicit:
        _records.remove(loc, f"keep-{mine}.json")
    elif entry is not None and entry.keep:
        return False
    deleter = delete or (entry.on_exit if entry is not None else None) or _default_delete(options)
    if force:
        deleter(url)
        return True
    tomb = f"deleting-{mine}.json"
    try:
        _records.write(loc, tomb, encode(me()))
    except OSError as e:  # read-only or gone: nobody can lease it either
        log.debug("cannot write the tombstone in %s: %r", loc.url, e)
    try:
        others = _users(loc, count_keep=not explicit)
        if not others and entry is not None and entry.waiters is not None:
            others = [f"waiting:{w}" for w in entry.waiters()]
        if others:
            log.info("keeping %s: still used by %s", url, ", ".join(others))
            return False
        deleter(url)
        log.info("deleted %s: no other live process uses it", url)
        return True
    finally:
        try:
            _records.remove(loc, tomb)
        except OSError:
            pass


def _default_delete(storage_options: dict | None) -> Deleter:
    return lambda url: delete_dataset(url, storage_options)


def _at_exit() -> None:
    if _EXIT_PID != [os.getpid()]:
        return  # a forked child exiting normally: the leases are its parent's
    with _LOCK:
        urls = list(_HELD)
    for url in urls:
        try:
            release(url)
        except Exception as e:  # at exit: report, never raise
            log.warning("Delete cache data %s failed due to %r", url, e)


def _register_exit() -> None:
    if not _EXIT_PID:
        atexit.register(_at_exit)
    _EXIT_PID[:] = [os.getpid()]


def _forked() -> None:
    # A forked child (DataLoader workers, multiprocessing) shares its parent's datasets but
    # not its leases: it must neither refresh nor release them.
    global _LOCK
    _LOCK = threading.RLock()  # a parent's thread may have held it at the fork
    _HELD.clear()
    _EXIT_PID.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)
