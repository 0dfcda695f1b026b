"""Small JSON records that say which process holds something, and whether it is still alive.

Leases (:mod:`petastream.spark.leases`) and claims (:mod:`petastream.spark.claims`) are such
records, written under the parent cache directory, which may be a local path or an object
store. A record names its owner (host, pid, the process start time where ``/proc`` has it, a
random nonce) and carries a heartbeat timestamp that a daemon thread of the owner rewrites
every :data:`HEARTBEAT_S` seconds.

Whether an owner is alive:

* same host: its pid exists, is not a zombie, and (where ``/proc`` tells) started when the
  record says, so a reused pid does not keep a dead owner alive. Detected at once.
* other host: its heartbeat is younger than the record's ``ttl`` (the writer's
  :data:`TTL_S`). A crash there is noticed ``ttl`` seconds later; clocks of the hosts must
  agree to well within ``ttl``.

Reads here bypass fsspec's listing cache: other processes write these records.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from petastream.storage.location import Location

__all__ = ["HEARTBEAT_S", "TTL_S", "Owner", "me", "alive", "encode", "list_names", "read",
           "write", "create", "remove", "exists", "heartbeat", "HOST"]

log = logging.getLogger("petastream.spark")

HOST = socket.gethostname()
#: Seconds between two refreshes of a live process's records.
HEARTBEAT_S = 10.0
#: A record whose heartbeat is older than this (on another host) belongs to a dead process.
TTL_S = 60.0


def _proc_stat(pid: int) -> list[str] | None:
    """Fields of ``/proc/<pid>/stat`` after the command name (index 0 = state), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    return text.rsplit(")", 1)[-1].split()


def _start_ticks(pid: int) -> str | None:
    fields = _proc_stat(pid)
    return fields[19] if fields and len(fields) > 19 else None


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    start: str | None
    nonce: str

    @property
    def name(self) -> str:
        """A file-name-safe identity: ``<host>-<pid>-<nonce>``."""
        host = "".join(c if c.isalnum() or c in "._" else "_" for c in self.host)
        return f"{host}-{self.pid}-{self.nonce}"


_ME: dict[int, Owner] = {}


def me() -> Owner:
    """This process (a forked child is a new owner)."""
    pid = os.getpid()
    if pid not in _ME:
        _ME[pid] = Owner(HOST, pid, _start_ticks(pid), uuid.uuid4().hex[:12])
    return _ME[pid]


def encode(owner: Owner, **extra: Any) -> bytes:
    doc = {"host": owner.host, "pid": owner.pid, "start": owner.start, "nonce": owner.nonce,
           "heartbeat": time.time(), "ttl": TTL_S, **extra}
    return json.dumps(doc, sort_keys=True).encode()


def _pid_alive(pid: int, start: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        pass
    fields = _proc_stat(pid)
    if fields is None:
        return True  # no /proc (macOS): the pid exists, trust it
    if fields[0] in ("Z", "X"):  # killed, not yet reaped by its parent
        return False
    return start is None or len(fields) <= 19 or fields[19] == start


def alive(record: dict[str, Any], now: float | None = None) -> bool:
    """Whether the process that wrote ``record`` is alive (see the module docstring)."""
    if record.get("host") == HOST and isinstance(record.get("pid"), int):
        if record["pid"] == os.getpid():
            return record.get("nonce") == me().nonce  # else: a parent's record seen after fork
        return _pid_alive(record["pid"], record.get("start"))
    beat, ttl = record.get("heartbeat"), record.get("ttl", TTL_S)
    if not isinstance(beat, (int, float)) or not isinstance(ttl, (int, float)):
        return False
    return (time.time() if now is None else now) - beat <= ttl


# -- I/O on a Location, fresh (no listing cache) ------------------------------------------------


def list_names(loc: Location) -> list[str]:
    """Names directly under ``loc`` as they are now; empty if it does not exist."""
    if loc.is_local:
        try:
            return sorted(os.listdir(loc.path))
        except FileNotFoundError:
            return []
    loc.fs.invalidate_cache(loc.path)
    try:
        paths = loc.fs.ls(loc.path, detail=False, refresh=True)
    except FileNotFoundError:
        return []
    return sorted(posixpath.basename(p.rstrip("/")) for p in paths)


def read(loc: Location, name: str) -> dict[str, Any] | None:
    """The record ``name`` under ``loc``, or None if it is missing or unreadable."""
    try:
        doc = json.loads(loc.read_bytes(name))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def exists(loc: Location, name: str) -> bool:
    """Whether ``name`` exists under ``loc`` now (object stores: asked, not cached)."""
    if loc.is_local:
        return os.path.exists(loc.child(name).path)
    path = loc.child(name).path
    loc.fs.invalidate_cache(posixpath.dirname(path))
    try:
        loc.fs.info(path)
        return True
    except FileNotFoundError:
        return False


def write(loc: Location, name: str, data: bytes) -> None:
    loc.write_bytes_atomic(name, data)


def create(loc: Location, name: str, data: bytes) -> bool:
    """Write ``name`` only if it does not exist; False if it did. Local: atomic (a hard link of
    a complete temporary file). Object stores: a conditional PUT where the store and fsspec
    support it, else a plain PUT (callers read back what they wrote to settle races)."""
    target = loc.child(name)
    if loc.is_local:
        os.makedirs(loc.path, exist_ok=True)
        tmp = f"{target.path}.tmp-{uuid.uuid4().hex[:12]}"
        with open(tmp, "wb") as f:
            f.write(data)
        try:
            os.link(tmp, target.path)
            return True
        except FileExistsError:
            return False
        except OSError:  # no hard links here (some FUSE mounts): exclusive open instead
            try:
                fd = os.open(target.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                return False
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            return True
        finally:
            os.remove(tmp)
    try:
        loc.fs.pipe_file(target.path, data, mode="create")
        return True
    except FileExistsError:
        return False
    except TypeError:  # this fsspec implementation has no create mode
        loc.fs.pipe_file(target.path, data)
        return True
    except OSError:  # S3 answers PreconditionFailed (EINVAL in s3fs) when the object exists
        if exists(loc, name):
            return False
        raise


def remove(loc: Location, name: str) -> None:
    """Remove ``name`` if it exists (object stores: without trusting a cached listing)."""
    target = loc.child(name)
    try:
        if loc.is_local:
            os.remove(target.path)
        else:
            loc.fs.rm_file(target.path)
    except FileNotFoundError:
        pass


# -- the heartbeat ------------------------------------------------------------------------------


class _Heartbeat:
    """One daemon thread per process that rewrites every registered record's heartbeat."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """A fresh state (also in a forked child: the parent's records are not its own)."""
        self._records: dict[tuple[str, str], tuple[Location, str, dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    def add(self, loc: Location, name: str, **extra: Any) -> None:
        with self._lock:
            self._records[(loc.url, name)] = (loc, name, extra)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="petastream-heartbeat",
                                                daemon=True)
                self._thread.start()

    def discard(self, loc: Location, name: str) -> None:
        with self._lock:
            self._records.pop((loc.url, name), None)

    def _run(self) -> None:
        while True:
            time.sleep(HEARTBEAT_S)
            with self._lock:
                if self._pid != os.getpid():
                    return
                records = list(self._records.values())
            for loc, name, extra in records:
                try:
                    if exists(loc, name):  # never recreate a record someone removed
                        write(loc, name, encode(me(), **extra))
                except Exception as e:  # a flaky store: the next beat tries again
                    log.debug("heartbeat of %s/%s failed: %r", loc.url, name, e)


heartbeat = _Heartbeat()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=heartbeat.reset)
