"""Worker processes of our own, for consumers that hold the GIL: the pool and one pass on it.

TensorFlow's eager iterator runs Python on every element and contends with decode threads for
the GIL and the cores: on 300k 'tabular' rows the decode takes 35 ms an epoch alone and 79 ms
beside TensorFlow's iterator in one process, against 41 ms in a process of its own. So a
:class:`WorkerPool` runs the decode (the same :class:`~petastream.pipeline.work.PassWork` as
:class:`~petastream.pipeline.threads.ThreadRun`: worker ``w`` of ``W`` produces the pass's
items ``w, w+W, ...``, taken in turn, so in plan order with no reorder buffer) in ``W``
processes, and an item's numeric parts come back through shared memory
(:mod:`petastream.pipeline.procpool.arena`): each worker has an arena of ``slots`` slots, sized by its
first item (and grown if a later one is bigger), and an item is leased until its last view is
gone. Should the consumer hold all but one of a worker's slots, the next item is copied out
and its slot freed at once, so a consumer that keeps batches (a prefetch buffer, a list) cannot
starve the worker. Parts that are Python objects (strings) and any item without an arena
travel pickled through the socket.

The processes are fresh interpreters (``python -m petastream.pipeline.procpool.worker``), not forks:
forking a process that runs TensorFlow's (or any) threads can deadlock the child, and a fresh
interpreter does not re-run the user's ``__main__`` as ``spawn`` does. They import no
framework. They persist across passes (a pool per loader; the dataset is sent once and stays
open in them), parked between passes for the next one (:mod:`petastream.pipeline.procpool.parking`).
Each worker keeps the last ``keep`` datasets it read open (:data:`KEPT_DATASETS`, least
recently used out), so that a loop that reads another dataset in between (train, validation,
train) finds the first one still decoded: over local Parquet a worker's row groups stayed
decoded only until the next dataset, and the train epoch after a validation one decoded them
all again (0.22–0.35x of the TensorFlow floor, against 0.74x warm).
The processes end with the pool's close, its collection or the end of the program, and by
themselves when this process goes (their socket closes).

Failure handling, so that nothing hangs: a worker's exception is re-raised here with its type
(its traceback attached as a note); a worker that dies (killed, out of memory) is reported
within ``_LIVENESS_S`` with its exit code, and the pool is replaced at the next pass;
:meth:`PoolRun.close` (a ``break``, a newer iteration) tells the workers to drop the pass.
"""

from __future__ import annotations

import functools
import io
import logging
import os
import pickle
import socket
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from petastream.errors import InvalidArgumentError, PipelineError, WorkerDiedError
from petastream.pipeline.ordered import PassOrder
from petastream.pipeline.procpool.arena import Arena, ArenaError, copy_parts, unlink
from petastream.pipeline.stats import Reported
from petastream.pipeline.work import BatchGroup, PassWork

__all__ = ["PoolRun", "WorkerDiedError", "WorkerPool", "env_key", "worker_env"]

log = logging.getLogger("petastream.pipeline")

_LIVENESS_S = 0.5  # how often a waiting consumer checks that the worker is still alive
_EXIT_S = 5.0  # how long close() waits for a worker to exit before killing it
_GROW = 1.25  # an arena's slots have room for this many times the item that asked for it

_KEPT_ENV = "PETASTREAM_WORKER_KEPT_DATASETS"
#: Datasets each decode worker keeps open (a training set and a validation set read in turn:
#: 2); each holds, per worker, what a worker reading it holds: its decoded row groups, within
#: the source's own ``memory_limit``. 1 keeps only the one being read (a switch reopens).
KEPT_DATASETS = 2


def kept_datasets() -> int:
    """How many datasets a new pool's workers keep open: ``PETASTREAM_WORKER_KEPT_DATASETS``,
    else :data:`KEPT_DATASETS`."""
    text = os.environ.get(_KEPT_ENV)
    if text is None:
        return KEPT_DATASETS
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise InvalidArgumentError(
            f"{_KEPT_ENV}={text!r}: the number of datasets each decode worker keeps open must be "
            "a whole number of 1 or more (1 keeps only the one being read); unset it for "
            f"the default, {KEPT_DATASETS}")
    return value


def worker_env() -> dict[str, str]:
    """The environment a worker starts with: this process's (credentials, cache settings), and
    its import path (the worker imports what this process can: petastream, a transform's module)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p or os.getcwd() for p in sys.path)
    return env


def env_key(env: dict[str, str]) -> int:
    return hash(tuple(sorted(env.items())))


def _spawn(env: dict[str, str]) -> tuple[subprocess.Popen, Connection]:
    parent, child = socket.socketpair()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "petastream.pipeline.procpool.worker", str(child.fileno())],
            pass_fds=(child.fileno(),), env=env, stdin=subprocess.DEVNULL)
    finally:
        child.close()
    return proc, Connection(parent.detach())


def _shutdown(procs: list[subprocess.Popen], conns: list[Connection], arenas: list[dict[int, Arena]]) -> None:
    for conn in conns:
        try:
            conn.send(("exit",))
            conn.close()
        except OSError:
            pass
    for proc in procs:
        try:
            proc.wait(timeout=_EXIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for mine in arenas:  # a worker that died before attaching an arena left its file
        for arena in mine.values():
            unlink(arena.path)


class WorkerPool:
    """``num_workers`` decode processes with ``slots`` shared-memory slots each, each keeping
    up to ``keep`` datasets open (default: :func:`kept_datasets`)."""

    def __init__(self, num_workers: int, slots: int, keep: int | None = None):
        keep = kept_datasets() if keep is None else keep
        if keep < 1:
            raise InvalidArgumentError(f"keep={keep}: a decode worker keeps at least the dataset it reads; "
                                       "pass 1 or more")
        if os.name != "posix":
            raise InvalidArgumentError(
                f"worker_type='process' needs a POSIX system (it passes sockets to its workers); "
                f"this is {os.name!r}: use worker_type='thread'")
        self.num_workers, self.slots = num_workers, max(2, slots)
        self._procs: list[subprocess.Popen] = []
        self._conns: list[Connection] = []
        # Per worker, the arenas made for it by id ("gen"), from the oldest it may still use:
        # a request can be answered after the worker moved on (a pass broken off while it
        # waited), so items name the arena they sit in, and older ones go once a newer is used.
        self._arenas: list[dict[int, Arena]] = [{} for _ in range(num_workers)]
        # Ends the workers when the pool is closed or collected, or the program exits; set up
        # before they start, so that a failed start leaves none behind.
        self._finalizer = weakref.finalize(self, _shutdown, self._procs, self._conns, self._arenas)
        env = worker_env()
        self.env_key = env_key(env)  # a parked pool serves only loaders in the same environment
        for _ in range(num_workers):
            proc, conn = _spawn(env)
            self._procs.append(proc)
            self._conns.append(conn)
        self._send_locks = [threading.RLock() for _ in range(num_workers)]  # frees come from any thread
        self._lock = threading.Lock()
        self._gens = [0] * num_workers  # the newest arena id made per worker
        self._leased: dict[tuple[int, int], int] = {}  # (worker, arena id) -> slots leased
        self.copied = 0  # items copied out because the consumer held all but one slot
        self._pid = 0
        self.keep = keep
        # What opened each dataset the workers hold, by key, least recently used first; the
        # workers read the last one.
        self._kept: list[tuple[int, Any]] = []
        self._keys = 0
        self.opens = 0  # datasets new to the workers (each opened by every worker)
        self.broken: str | None = None  # why the pool cannot run another pass
        self._ready = [False] * num_workers  # each worker's ("ready", 0) came: its imports are done

    @property
    def alive(self) -> bool:
        """Whether every worker process is still running."""
        return all(p.poll() is None for p in self._procs)

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def close(self) -> None:
        """Stop the workers (they exit at their next message) and free the arenas."""
        self._finalizer()

    def ready(self) -> bool:
        """Whether every worker has started (imported what it runs): a pass now would not wait
        for their start. Call it between passes only (it reads the workers' first message)."""
        for w, conn in enumerate(self._conns):
            if not self._ready[w]:
                try:
                    if not conn.poll(0):
                        return False
                    msg = conn.recv()  # a worker's first message is ("ready", 0)
                except (EOFError, OSError):
                    return False  # dead: the pass that takes the pool reports it
                self._ready[w] = msg[0] == "ready"
        return True

    # -- messages -----------------------------------------------------------------------------
    def _send(self, w: int, msg: tuple[Any, ...]) -> None:
        with self._send_locks[w]:
            try:
                self._conns[w].send(msg)
            except OSError:  # a dead worker is reported by the consumer's next receive
                pass

    def start_pass(self, work: PassWork, strings: bool = False) -> int:
        """Send a pass to every worker; returns its id. ``strings``: str/bytes parts come as
        :class:`~petastream.pipeline.procpool.arena.Strings` in shared memory, not pickled objects."""
        if self.broken:
            raise PipelineError(self.broken)
        try:
            payload = _pickle_pass(work.detached())
        except Exception as e:
            raise InvalidArgumentError(
                f"worker_type='process' sends each pass to fresh worker processes, and this one "
                f"cannot go: {e}. Define transform at module level in an importable module (not a "
                "lambda, a local function or in __main__), or use worker_type='thread' (compat: "
                "reader_pool_type='thread')") from None
        self._pid += 1
        switch = self._switch(work.dataset.reopener())  # opened there with this process's cache
        for w in range(self.num_workers):
            if switch is not None:
                self._send(w, switch)
            self._send(w, ("pass", self._pid, payload, w, self.num_workers, strings))
        return self._pid

    def _switch(self, opener: Any) -> tuple[Any, ...] | None:
        """The ``("dataset", ...)`` message that makes the workers read what ``opener`` opens,
        or None when they read it already. A new loader of a dataset they hold (compat opens it
        anew per context) finds it open: same URL, options, cache and index fingerprint or
        Parquet plan (the files' sizes and versions: a changed file is another dataset, opened
        anew). Reopening cost up to 0.2 s a pass, and over local Parquet every row group's decode."""
        kept = self._kept
        at = next((i for i, (_, o) in enumerate(kept) if _same_opener(opener, o)), None)
        if at is not None:
            entry = kept.pop(at)
            kept.append(entry)
            # (the opener goes along: a worker whose open of it failed then tries again)
            return None if at == len(kept) - 1 else ("dataset", entry[0], opener, ())
        self._keys += 1
        kept.append((self._keys, opener))
        drop = [key for key, _ in kept[:-self.keep]]
        del kept[:-self.keep]
        self.opens += 1
        return ("dataset", self._keys, opener, tuple(drop))

    def stop_pass(self, pid: int) -> None:
        for w in range(self.num_workers):
            self._send(w, ("stop", pid))

    def receive(self, w: int, pid: int) -> tuple[Any, ...]:
        """Worker ``w``'s next message of pass ``pid`` (answering arena requests and dropping
        stale messages of earlier passes on the way)."""
        conn, proc = self._conns[w], self._procs[w]
        while True:
            if not conn.poll(_LIVENESS_S):
                if proc.poll() is not None:
                    self._died(w)
                continue
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                self._died(w)
            if msg[0] == "ready":
                self._ready[w] = True
            elif msg[0] == "grow":
                self._grow(w, msg[1])
            elif msg[1] == pid:
                return msg
            elif msg[0] == "item":  # a stopped pass's item: its slot goes straight back
                self._send(w, ("free", msg[3], msg[4]))

    def _died(self, w: int) -> None:
        proc = self._procs[w]
        try:
            code = proc.wait(timeout=2.0)  # its socket can close just before its exit code is known
        except subprocess.TimeoutExpired:
            code = None
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
        self.broken = f"decode worker process {w} (pid {proc.pid}) {how}"
        raise WorkerDiedError(f"{self.broken} (out of memory? killed?); the loader starts new workers "
                              "at its next iteration")

    def _grow(self, w: int, need: int) -> None:
        try:
            arena = Arena.create(self.slots, int(need * _GROW))
        except ArenaError as e:
            log.warning("decode worker %d hands its batches over pickled, more slowly: %s. Give the "
                        "machine more shared memory (Docker: --shm-size), or hand over less at once "
                        "(batches_per_call, batch_size, prefetch)", w, e)
            self._send(w, ("arena", None, str(e)))
            return
        with self._lock:
            self._gens[w] += 1
            gen = self._gens[w]
            self._arenas[w][gen] = arena
        self._send(w, ("arena", gen, arena.path, arena.slots, arena.slot_bytes))

    # -- leases -------------------------------------------------------------------------------
    def views(self, w: int, gen: int, slot: int, layout: list) -> tuple[Any, ...]:
        """An item's parts as views of its slot, leased until they are all gone; or copies (and
        the slot freed now) if the consumer already holds all but one slot of this worker."""
        with self._lock:
            arenas = self._arenas[w]
            if gen not in arenas:
                raise PipelineError(f"decode worker {w} sent an item in arena {gen}, which this pool "
                                   f"does not hold (it holds {sorted(arenas)})")
            for old in [g for g in arenas if g < gen]:  # the worker has moved on from these
                del arenas[old]
            arena = arenas[gen]
            leased = self._leased.get((w, gen), 0)
            keep = leased < self.slots - 1
            if keep:
                self._leased[(w, gen)] = leased + 1
        base, parts = arena.views(slot, layout)
        if not keep:
            parts = copy_parts(parts)
            del base
            self.copied += 1
            self._send(w, ("free", gen, slot))
            return parts
        f = weakref.finalize(base, self._release, w, gen, slot)
        f.atexit = False  # at exit the workers are gone
        return parts

    def _release(self, w: int, gen: int, slot: int) -> None:
        with self._lock:
            left = self._leased.get((w, gen), 0) - 1
            if left > 0:
                self._leased[(w, gen)] = left
            else:
                self._leased.pop((w, gen), None)
        if not self.closed:  # the worker ignores frees of an arena it has left
            self._send(w, ("free", gen, slot))


class PoolRun:
    """One pass's items from a :class:`WorkerPool`, in plan order (a ``PassRun``)."""

    def __init__(self, pool: WorkerPool, work: PassWork, num_items: int, strings: bool = False,
                 on_close: Callable[[WorkerPool], None] | None = None):
        self._pool, self._n = pool, num_items
        self._order = PassOrder(num_items, pool.num_workers)
        self._closed = False
        self._close_lock = threading.Lock()
        self._on_close = on_close  # told when the pass is over: the pool is free again
        self._pid = 0
        try:
            self._pid = pool.start_pass(work, strings) if num_items else 0
        except BaseException:
            self.close()
            raise

    def __iter__(self) -> PoolRun:
        return self

    def __next__(self) -> Any:
        order, pool = self._order, self._pool
        if self._closed or order.done:
            raise StopIteration
        w = order.worker
        report = None
        try:
            msg = pool.receive(w, self._pid)
            if msg[0] == "report":  # about the item that follows it
                report, msg = msg[2], pool.receive(w, self._pid)
        except BaseException:
            self.close()
            raise
        kind = msg[0]
        if kind == "error":
            self.close()
            raise _rebuild(w, *msg[2:])
        if kind == "unloadable":
            self.close()
            raise InvalidArgumentError(
                f"decode worker process {w} cannot load the pass ({msg[2]}): worker processes are "
                "fresh interpreters and import what the pass refers to. Define transform at module "
                "level in an importable module, or use worker_type='thread' (compat: "
                "reader_pool_type='thread')")
        if kind == "end":
            self.close()
            raise order.ended_early()
        try:
            order.accept(msg[2])
        except BaseException:
            self.close()
            raise
        if kind == "item":
            parts, n = pool.views(w, *msg[3:6]), msg[6]
        else:  # "inline"
            parts, n = msg[3], msg[4]
        item = BatchGroup(parts, n) if n is not None else parts
        return item if report is None else Reported(item, report)

    def close(self) -> None:
        with self._close_lock:  # once, whichever thread comes first (tf.data's finalize, a newer pass)
            if self._closed:
                return
            self._closed = True
        if not self._order.done and not self._pool.closed and self._pid:
            self._pool.stop_pass(self._pid)
        if self._on_close is not None:
            self._on_close(self._pool)


class _PassPickler(pickle.Pickler):
    """Refuses what a fresh interpreter cannot load: functions and classes of ``__main__``
    (they pickle by name, and the worker's ``__main__`` is not the user's script)."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, type) or callable(obj) and hasattr(obj, "__qualname__"):
            if getattr(obj, "__module__", None) == "__main__":
                raise pickle.PicklingError(f"{obj.__qualname__!r} is defined in __main__ (a script or notebook)")
        return NotImplemented


def _pickle_pass(work: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    _PassPickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(work)
    return buf.getvalue()


def _same_opener(a: Any, b: Any) -> bool:
    """Whether two sources' :meth:`reopener` results open the same data (URL, options, cache
    directory and limit, index fingerprint or Parquet plan; a mixture's: each of its sources'
    and the same streams), compared structurally: ``functools.partial`` objects compare by
    identity, and a mixture's opener holds one per source."""
    try:
        return _same(a, b)
    except Exception:  # options that do not compare (a credentials object): reopen
        return False


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, functools.partial) or isinstance(b, functools.partial):
        return (isinstance(a, functools.partial) and isinstance(b, functools.partial) and a.func is b.func
                and _same(a.args, b.args) and _same(a.keywords, b.keywords))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def _rebuild(w: int, blob: bytes | None, type_name: str, text: str, tb: str) -> BaseException:
    """A worker's exception, with its own type where it unpickles, and its traceback."""
    exc: BaseException | None = None
    if blob is not None:
        try:
            exc = pickle.loads(blob)
        except Exception:
            exc = None
    if exc is None:
        exc = PipelineError(f"{type_name}: {text}")
    if hasattr(exc, "add_note"):
        exc.add_note(f"Raised in decode worker process {w}:\n{tb}")
    return exc
