"""The worker process of :mod:`petastream.pipeline.procpool.pool`: ``python -m`` this module.

It imports no framework (TensorFlow stays in the loader's process; the ``convert`` it runs is
TensorFlow-free, see :mod:`petastream.pipeline.parts`) and talks to its loader over one socket
(a :class:`multiprocessing.connection.Connection` passed as a file descriptor). Messages in:

* ``("dataset", key, reopen, drop)``: the next passes read dataset ``key``: the one kept open
  under ``key`` since an earlier pass, else (new, or its open failed then) opened now by
  ``reopen()`` (``MDSDataset.reopener``, so with the loader's cache directory and limit); the
  kept datasets ``drop`` (keys) are closed (the loader keeps a few open, least recently used
  out: see :class:`~petastream.pipeline.procpool.pool.WorkerPool`);
* ``("pass", pid, work, w, W, strings)``: produce ``work(w, W)``'s items (``work``: a
  ``PassWork``'s fields but its source, :meth:`~petastream.pipeline.work.PassWork.detached`); ``strings``: str/bytes parts packed into shared memory (``arena.Strings``);
* ``("stop", pid)``: drop pass ``pid`` (the loader broke off its iteration);
* ``("arena", gen, path, slots, slot_bytes)`` or ``("arena", None, error)``: the arena asked
  for (``gen``: its id, named by the items packed in it);
* ``("free", gen, slot)``: the loader is done with a slot of arena ``gen``;
* ``("exit",)`` or the socket closing: leave.

Messages out: ``("ready", 0)`` first, once its imports are done; ``("item", pid, index, gen, slot, layout, n)`` (parts in shared memory),
``("inline", pid, index, item, n)`` (no arena: the item pickled), ``("grow", bytes)`` (an item
needs a bigger arena), ``("error", pid, pickled_exc, type_name, text, traceback)``,
``("unloadable", pid, text)`` (the pass does not unpickle here), ``("report", pid, report)``
(a :class:`~petastream.pipeline.stats.WorkerReport` for the item that follows) and
``("end", pid)``.
"""

from __future__ import annotations

import pickle
import signal
import sys
import traceback
from collections.abc import Iterable
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from petastream.capabilities import StringReads
from petastream.pipeline.procpool.arena import Arena, Strings, pack_strings
from petastream.pipeline.stats import Reported
from petastream.pipeline.work import BatchGroup, PassWork


class _Stopped(Exception):
    """The pass being produced was stopped by the loader."""


class Worker:
    def __init__(self, conn: Connection):
        self.conn = conn
        self.dataset: Any = None
        # The datasets kept open (key -> dataset, or the error opening it, raised at its next
        # pass): what they decoded stays loaded for when the loader comes back to them.
        self.kept: dict[int, tuple[Any, Exception | None]] = {}
        self.arena: Arena | None = None
        self.gen = 0  # the id of the arena in use; frees of another one are moot
        self.free: set[int] = set()
        self.no_arena = False  # the loader could not make one: items go inline
        self.pid = -1
        self.strings = False  # this pass packs str/bytes parts (see arena.Strings)
        self.dataset_error: Exception | None = None  # why the dataset did not open here

    def serve(self) -> None:
        self.send(("ready", 0))  # (the pool's AutoExecutor decodes in threads until it comes)
        while True:
            try:
                msg = self.conn.recv()
            except (EOFError, OSError):
                return  # the loader is gone
            if msg[0] == "exit":
                return
            if msg[0] == "pass":
                self.run(*msg[1:])
            else:
                self.handle(msg)

    def handle(self, msg: tuple[Any, ...]) -> None:
        kind = msg[0]
        if kind == "free":
            if msg[1] == self.gen:
                self.free.add(msg[2])
        elif kind == "dataset":
            key, reopen, drop = msg[1:]
            self.close_kept(drop)  # first: their memory and cache pins go before a new one loads
            if self.dataset is not None:
                # Kept, idle: its end-of-pass close lets go of its cache pins and mapped files
                # (another dataset may need the room; a reader of a cache file is never in the
                # way of its eviction), and keeps what it decoded from local files.
                self.dataset.close()
            if self.kept.get(key, (None, None))[0] is None:  # new, or it failed to open: (again) now
                try:
                    self.kept[key] = (reopen(), None)
                except Exception as e:  # raised at the next pass, in the loader
                    self.kept[key] = (None, e)
            self.dataset, self.dataset_error = self.kept[key]
        elif kind == "stop":
            if msg[1] == self.pid:
                raise _Stopped
        elif kind == "exit":
            raise SystemExit(0)
        elif kind == "arena":
            if msg[1] is None:
                self.no_arena = True  # (the error text is logged by the loader)
            else:  # (possibly the answer to a request of a pass since broken off)
                self.gen, self.arena = msg[1], Arena.attach(*msg[2:])
                self.free = set(range(self.arena.slots))
        # a "pass" cannot come mid-pass: the loader stops the last one first

    def close_kept(self, keys: Iterable[int]) -> None:
        """Close the kept datasets ``keys`` (their read-ahead, loaded row groups and cache leases
        released, as a dataset replaced by another was before any were kept)."""
        for key in keys:
            dataset, _ = self.kept.pop(key, (None, None))
            if dataset is self.dataset:
                self.dataset = None
            if dataset is not None:
                dataset.close()

    def send(self, msg: tuple[Any, ...]) -> None:
        try:
            self.conn.send(msg)
        except OSError:  # the loader is gone (closed, or exited): leave quietly
            raise SystemExit(0) from None

    def pump(self, block: bool) -> None:
        """Handle what the loader sent; ``block``: wait for at least one message."""
        while block or self.conn.poll():
            block = False
            try:
                msg = self.conn.recv()
            except (EOFError, OSError):
                raise SystemExit(0) from None
            self.handle(msg)

    def run(self, pid: int, work: Any, w: int, num_workers: int, strings: bool) -> None:
        self.pid, self.strings = pid, strings
        items = None
        try:
            try:
                work = PassWork(self.dataset, **pickle.loads(work))
            except Exception as e:  # e.g. a transform whose module this interpreter cannot see
                self.send(("unloadable", pid, f"{type(e).__name__}: {e}"))
                return
            if self.dataset_error is not None:
                raise self.dataset_error
            # Strings the loader cuts apart itself are read as bytes and offsets, never as one
            # Python object per value (a transform sees the usual objects).
            if isinstance(self.dataset, StringReads):
                self.dataset.strings = "ragged" if strings and work.transform is None else "objects"
            items = work(w, num_workers)
            for index, item in items:
                self.pump(block=False)
                self.hand_over(index, item)
            self.send(("end", pid))
        except _Stopped:
            pass
        except SystemExit:
            raise
        except BaseException as e:  # the loader re-raises it, with this traceback attached
            try:
                exc = pickle.dumps(e)
            except Exception:
                exc = None  # unpicklable: its type's name and text survive
            self.send(("error", pid, exc, type(e).__name__, str(e), traceback.format_exc()))
        finally:
            if items is not None:
                items.close()  # stops the decode's read-ahead
            self.pid = -1

    def hand_over(self, index: int, item: Any) -> None:
        if isinstance(item, Reported):  # the report goes ahead of its item, which goes as any other
            self.send(("report", self.pid, item.report))
            item = item.item
        n = None
        if isinstance(item, BatchGroup):  # sent as its flat parts; the loader regroups them
            n, item = item.num_batches, tuple(p.reshape(-1, *p.shape[2:]) for p in item)
        arrays = item if isinstance(item, tuple) and all(isinstance(a, (np.ndarray, Strings)) for a in item) else None
        if arrays is None:
            self.send(("inline", self.pid, index, item, n))
            return
        if self.strings:
            arrays = tuple((pack_strings(a) or a) if isinstance(a, np.ndarray) and a.dtype.kind in "OUS" else a
                           for a in arrays)
        need = Arena.size_of(arrays)
        if self.arena is None or need > self.arena.slot_bytes:
            if not self.no_arena:  # ask the loader for a bigger arena and wait for its answer
                self.send(("grow", need))
                while not self.no_arena and (self.arena is None or need > self.arena.slot_bytes):
                    self.pump(block=True)
            if self.arena is None or need > self.arena.slot_bytes:
                self.send(("inline", self.pid, index, item, n))
                return
        while not self.free:
            self.pump(block=True)
        slot = self.free.pop()
        layout = self.arena.pack(slot, arrays)
        self.send(("item", self.pid, index, self.gen, slot, layout, n))


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the loader's to handle: it stops us
    conn = Connection(int(sys.argv[1]))
    worker = Worker(conn)
    try:
        worker.serve()
    finally:  # however it leaves: the kept datasets' cache leases go with them
        worker.close_kept(list(worker.kept))


if __name__ == "__main__":
    main()
