"""Worker pools kept between passes: a loader's pool parked at the end of each pass, for its
next pass or another loader of the same shape in the same environment.

Starting a pool costs fresh interpreters and a dataset open per worker; a training loop makes a
pass per epoch, and compat makes a loader (context manager) per epoch. So a pass's pool is
parked when the pass ends and taken back by the next one. Workers keep the environment they
started in (credentials and cache settings included), so a pool serves only loaders in that
environment. A parked pool nobody takes stops after ``_IDLE_S`` seconds, at
:func:`shutdown_idle`, or at exit.
"""

from __future__ import annotations

import threading

from petastream.pipeline.procpool.pool import PoolRun, WorkerPool, env_key, worker_env
from petastream.pipeline.work import PassWork

__all__ = ["ProcessExecutor", "shutdown_idle"]


class ProcessExecutor:
    """A loader's worker processes (an :class:`~petastream.pipeline.executor.Executor`): a
    :class:`WorkerPool` taken or started on first use; :meth:`run` runs a pass on it.

    Between passes the pool is parked (see :func:`_park`), in the environment its workers
    started in: the next pass of this loader takes it back (a pass per epoch starts no
    processes), and so may another loader of as many workers (a loader or compat context
    manager per epoch). A parked pool nobody takes stops after ``_IDLE_S`` seconds, by
    :func:`shutdown_idle`, or at exit. Parking at the end of every pass, not only at
    :meth:`close`, is what bounds the processes of a loader nobody closes: a
    ``tf.data.Dataset`` keeps its Python callbacks, and with them the loader, alive for the
    rest of the program, even after ``gc.collect()``."""

    worker_type = "process"

    def __init__(self, num_workers: int, slots: int, strings: bool = False):
        self.num_workers, self.slots, self.strings = num_workers, slots, strings
        self.pool: WorkerPool | None = None  # the pool of the running or the last pass
        self._holding = False  # whether self.pool is ours now (else parked, or taken since)
        self._lock = threading.Lock()  # tf.data may end one pass and start the next from two threads

    def start(self) -> WorkerPool:
        with self._lock:
            pool = self.pool
            if pool is not None and (self._holding or _take(pool)) and not (pool.closed or pool.broken):
                self._holding = True
                return pool
            if pool is not None and self._holding:
                pool.close()  # broken: replaced now
            self.pool = _unpark(self.num_workers, self.slots) or WorkerPool(self.num_workers, self.slots)
            self._holding = True
            return self.pool

    def run(self, work: PassWork) -> PoolRun:
        return PoolRun(self.start(), work, work.num_items, self.strings, on_close=self._pass_ended)

    def prestart(self) -> None:
        """Take or start the pool now (starting does not wait for the workers), so that they
        start while the caller builds the rest of its pipeline; an error starting them raises here."""
        self.start()

    def ready(self) -> bool:
        """Whether a pass now would start at once: a pool is held (taken from the parked ones,
        or started now, which does not wait) and all its workers have started."""
        return self.start().ready()

    def _pass_ended(self, pool: WorkerPool) -> None:
        with self._lock:
            if pool is self.pool:
                if not self._holding:
                    return
                self._holding = False
            _park(pool)

    def close(self) -> None:
        """Park the pool now (if a pass holds it) and forget it: iterating again takes one anew."""
        with self._lock:
            pool, holding = self.pool, self._holding
            self.pool, self._holding = None, False
            if pool is not None and holding:
                _park(pool)


_IDLE_S = 60.0  # how long a parked pool waits for its next loader
_parked: dict[tuple[int, int, int], tuple[WorkerPool, threading.Timer]] = {}
_parked_lock = threading.Lock()


def _park(pool: WorkerPool) -> None:
    if pool.closed or pool.broken:
        pool.close()
        return
    key = (pool.num_workers, pool.slots, pool.env_key)
    timer = threading.Timer(_IDLE_S, _expire, (key, pool))
    timer.daemon = True
    with _parked_lock:
        old = _parked.pop(key, None)
        _parked[key] = (pool, timer)
    if old is not None:  # one parked pool per shape is enough
        old[1].cancel()
        if old[0] is not pool:
            old[0].close()
    timer.start()


def _take(pool: WorkerPool) -> bool:
    """Take ``pool`` back out of the parked ones, if it is still there (not taken by another
    loader meanwhile, nor stopped) and this process's environment is still the one its
    workers started in."""
    key = (pool.num_workers, pool.slots, pool.env_key)
    if pool.env_key != env_key(worker_env()):
        return False
    with _parked_lock:
        entry = _parked.get(key)
        if entry is None or entry[0] is not pool:
            return False
        del _parked[key]
    entry[1].cancel()
    return True


def _unpark(num_workers: int, slots: int) -> WorkerPool | None:
    """A parked pool of this shape whose workers started in this process's current environment
    (one started before credentials or cache settings changed would read with the old ones)."""
    with _parked_lock:
        entry = _parked.pop((num_workers, slots, env_key(worker_env())), None)
    if entry is None:
        return None
    pool, timer = entry
    timer.cancel()
    if pool.closed or pool.broken or not pool.alive:
        pool.close()
        return None
    return pool


def _expire(key: tuple[int, int, int], pool: WorkerPool) -> None:
    with _parked_lock:
        if _parked.get(key, (None,))[0] is not pool:
            return  # taken by a loader meanwhile
        del _parked[key]
    pool.close()


def shutdown_idle() -> None:
    """Stop the worker processes parked for reuse (closed loaders' pools) now."""
    with _parked_lock:
        entries = list(_parked.values())
        _parked.clear()
    for pool, timer in entries:
        timer.cancel()
        pool.close()
