"""Worker processes of our own (``pipeline.procpool``): same batches as threads, shared memory
that is given back, errors with their type, dead workers reported, nothing left behind."""

from __future__ import annotations

import gc
import os
import signal
import sys
import time

import numpy as np
import pytest

from petastream.errors import InvalidArgumentError
from petastream.mds.writer import write_mds
from petastream.pipeline import BatchLoader
from petastream.pipeline.parts import DENSE, RAGGED, STRING, ColumnParts, FlatParts
from petastream.pipeline.procpool import parking
from petastream.pipeline.procpool import pool as processes
from petastream.pipeline.procpool.arena import Strings
from petastream.pipeline.procpool.parking import ProcessExecutor
from petastream.pipeline.procpool.pool import WorkerDiedError

pytestmark = pytest.mark.timeout(180)
N = 3000
PARTS = FlatParts((ColumnParts("id", DENSE, np.dtype("int64")), ColumnParts("x", DENSE, np.dtype("float32"), (3,)),
                   ColumnParts("s", STRING), ColumnParts("v", RAGGED, np.dtype("int32"))))


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("processes") / "ds")
    write_mds({"id": np.arange(N), "x": np.arange(N * 3, dtype=np.float32).reshape(N, 3),
               "s": np.array([f"row-{i}" for i in range(N)], dtype=object),
               "v": np.array([np.full(i // 1000 + 1, i, np.int32) for i in range(N)], dtype=object)},
              path, columns={"id": "int64", "x": "ndarray:float32:3", "s": "str", "v": "ndarray:int32"},
              size_limit=20_000)
    return path


class PartsLoader(BatchLoader):
    """A framework-free loader whose batches are flat parts, run by threads or processes."""

    def __init__(self, *args, processes: bool = True, slots: int = 4, strings: bool = False, **kwargs):
        workers = kwargs.get("num_workers", 2)
        executor = ProcessExecutor(workers, slots, strings) if processes else None
        super().__init__(*args, convert=PARTS, executor=executor, **kwargs)


def _rows(batch):
    ids, x, s, values, splits = batch  # ragged arrays of varying size: arenas grow to fit
    return ids.tolist(), x.tolist(), list(s), values.tolist(), splits.tolist()


def add_one(batch):
    return {**batch, "id": batch["id"] + 1}


def fail_at_77(batch):
    if 77 in batch["id"]:
        raise KeyError("row 77 is cursed")
    return batch


def frameworks_seen(batch):
    loaded = [m for m in ("tensorflow", "torch", "pyspark") if m in sys.modules]
    return {**batch, "s": np.array([",".join(loaded) or "none"] * len(batch["id"]), dtype=object)}


def test_processes_give_the_threads_batches(url):
    kw = dict(batch_size=100, shuffle=True, seed=4, num_workers=2)
    threads, procs = PartsLoader(url, processes=False, **kw), PartsLoader(url, **kw)
    try:
        copied = procs.executor.start().copied  # (a pool parked by an earlier test may serve)
        for _ in range(3):  # three epochs: the workers, their dataset and arenas persist
            want, got = [_rows(b) for b in threads], [_rows(b) for b in procs]
            assert got == want and len(got) == 30
        assert procs.executor.pool.copied == copied  # a consumer that drops batches never forces a copy
    finally:
        procs.close()


def test_strings_can_cross_as_bytes_and_offsets(url):
    kw = dict(batch_size=100, shuffle=True, seed=5, num_workers=2)
    procs, threads = PartsLoader(url, strings=True, **kw), PartsLoader(url, processes=False, **kw)
    try:
        for _ in range(2):
            n = 0
            for want, got in zip(threads, procs):
                s = got[2]
                assert isinstance(s, Strings) and s.data.dtype == np.uint8
                assert [s.data[i:i + k].tobytes().decode() for i, k in zip(s.starts, s.lengths)] == list(want[2])
                assert _rows(want[:2] + (np.zeros(0),) + want[3:]) == _rows(got[:2] + (np.zeros(0),) + got[3:])
                n += 1
            assert n == 30
    finally:
        procs.close()


def test_a_consumer_that_keeps_every_batch_cannot_starve_the_workers(url):
    kw = dict(batch_size=50, shuffle=True, seed=1, num_workers=2)
    procs = PartsLoader(url, slots=2, **kw)
    try:
        copied = procs.executor.start().copied
        kept = list(procs)  # holds every slot it is given: the rest must come as copies
        assert [_rows(b) for b in kept] == [_rows(b) for b in PartsLoader(url, processes=False, **kw)]
        assert procs.executor.pool.copied - copied >= len(kept) - 2 * 2
    finally:
        procs.close()


def test_slots_go_back_when_the_batches_go(url):
    procs = PartsLoader(url, batch_size=100, num_workers=1, slots=3)
    try:
        copied = procs.executor.start().copied
        for _ in procs:  # each batch dropped as the next comes: its slot is freed
            pass
        del _
        gc.collect()
        assert procs.executor.pool._leased == {} and procs.executor.pool.copied == copied
    finally:
        procs.close()


def test_transform_runs_in_the_workers_without_frameworks(url):
    pytest.importorskip("tensorflow")  # loaded here (the minimum-versions run has none): the workers must not load it

    procs = PartsLoader(url, batch_size=500, num_workers=2, transform=frameworks_seen)
    try:
        seen = {s for b in procs for s in b[2]}
        assert seen == {"none"}
    finally:
        procs.close()


def test_breaking_off_then_the_next_epoch_is_whole(url):
    procs = PartsLoader(url, batch_size=100, shuffle=True, seed=2, num_workers=2)
    ref = PartsLoader(url, batch_size=100, shuffle=True, seed=2, num_workers=2, processes=False)
    try:
        next(iter(procs))  # broken off after one batch
        next(iter(ref))
        got = [_rows(b) for b in procs]  # stale items of the dropped pass are skipped, freed
        assert got == [_rows(b) for b in ref] and sorted(i for b in got for i in b[0]) == list(range(N))
    finally:
        procs.close()


def test_an_item_names_the_arena_it_is_in_when_a_request_was_answered_late():
    # A worker asks for an arena, its pass is broken off, and in the next pass it asks again:
    # the loader answers both, and the worker may pack into the first before the second
    # arrives (found by the hypothesis contract test in CI, where timing made it happen).
    import socket
    from multiprocessing.connection import Connection

    from petastream.pipeline.procpool.arena import Arena

    pool = processes.WorkerPool(1, slots=3)
    try:
        here, there = socket.socketpair()
        pool._conns[0], worker = Connection(here.detach()), Connection(there.detach())  # we play worker 0
        layout = [("shm", 0, "<i8", (5,))]
        for msg in (("grow", 40), ("grow", 40), ("item", 7, 0, 1, 2, layout, None)):
            worker.send(msg)
        item = pool.receive(0, 7)  # answers both requests on the way
        answers = [worker.recv(), worker.recv()]
        assert [m[:2] for m in answers] == [("arena", 1), ("arena", 2)]
        Arena.attach(*answers[0][2:]).pack(2, (np.arange(5),))  # the item really is in arena 1
        (values,) = pool.views(0, *item[3:6])
        assert values.tolist() == [0, 1, 2, 3, 4]
        del values
        gc.collect()
        assert worker.recv() == ("free", 1, 2) and pool._leased == {}
        Arena.attach(*answers[1][2:])  # (unlinks its file)
    finally:
        pool.close()


def test_a_worker_error_keeps_its_type_and_traceback(url):
    procs = PartsLoader(url, batch_size=100, num_workers=2, transform=fail_at_77)
    try:
        with pytest.raises(KeyError, match="row 77 is cursed") as err:
            list(procs)
        notes = "\n".join(getattr(err.value, "__notes__", []))
        assert sys.version_info < (3, 11) or ("decode worker process" in notes and "fail_at_77" in notes)
        assert [b[0][0] for b in PartsLoader(url, batch_size=1000, num_workers=2, transform=add_one)] == [1, 1001, 2001]
    finally:
        procs.close()


def test_a_killed_worker_is_reported_within_seconds_and_replaced(url):
    procs = PartsLoader(url, batch_size=10, num_workers=2, slots=2)
    try:
        it = iter(procs)
        next(it)
        victim = procs.executor.pool._procs[1]
        os.kill(victim.pid, signal.SIGKILL)
        t = time.monotonic()
        with pytest.raises(WorkerDiedError, match=f"pid {victim.pid}.*signal {int(signal.SIGKILL)}"):
            for _ in it:
                pass
        assert time.monotonic() - t < 10
        assert sum(len(b[0]) for b in procs) == N  # the next epoch runs on new workers
    finally:
        procs.close()


def from_main(batch):
    return batch


from_main.__module__ = "__main__"  # as a script's or notebook's function: the workers cannot import it


@pytest.mark.parametrize(("transform", "says"), [
    (lambda b: b, "worker_type='thread'"),  # does not pickle
    (add_one.__get__(0), "cannot load the pass"),  # pickles, but does not load in a worker
    (from_main, "defined in __main__"),
], ids=["lambda", "bound", "main"])
def test_a_transform_the_workers_cannot_load_is_refused_clearly(url, transform, says):
    procs = PartsLoader(url, batch_size=100, transform=transform)
    try:
        with pytest.raises(InvalidArgumentError, match=says):
            next(iter(procs))
    finally:
        procs.close()


def test_a_closed_loaders_workers_serve_the_next_loader_then_stop(url, monkeypatch):
    first = PartsLoader(url, batch_size=100, num_workers=2, slots=5)
    list(first)
    pool = first.executor.pool
    first.close()  # parked: a loader per epoch starts no new processes
    second = PartsLoader(url, batch_size=100, shuffle=True, seed=8, num_workers=2, slots=5)
    it = iter(second)
    head = next(it)
    assert second.executor.pool is pool and all(p.poll() is None for p in pool._procs)
    monkeypatch.setattr(parking, "_IDLE_S", 0.2)  # parked again at the end of the pass
    assert sorted(i for b in [head, *it] for i in b[0]) == list(range(N))
    second.close()
    for p in pool._procs:  # unused, the parked pool stops by itself
        p.wait(timeout=10)


def test_a_loader_nobody_closes_parks_its_workers_between_passes(url, monkeypatch):
    """TensorFlow keeps a dataset's loader alive for good (its Python callbacks), so a loader
    must not hold processes between passes: its next pass takes its pool back (no new
    processes per epoch), and unused the pool stops by itself."""
    loader = PartsLoader(url, batch_size=500, num_workers=2)
    list(loader)
    pool = loader.executor.pool
    assert parking._parked[(2, 4, pool.env_key)][0] is pool  # parked at the end of the pass
    assert sorted(i for b in loader for i in b[0]) == list(range(N))
    assert loader.executor.pool is pool  # taken back
    with monkeypatch.context() as changed:  # credentials rotated between epochs: new workers
        changed.setenv("AWS_ACCESS_KEY_ID", "rotated")
        assert sorted(i for b in loader for i in b[0]) == list(range(N))
        assert loader.executor.pool is not pool
        loader.executor.pool.close()
    monkeypatch.setattr(parking, "_IDLE_S", 0.2)
    list(loader)  # back in the first environment: the parked pool again, parked anew after
    assert loader.executor.pool is pool
    for p in pool._procs:
        p.wait(timeout=10)
    assert loader.executor.pool is pool and pool.closed


def test_the_workers_keep_a_dataset_open_for_the_next_loader_of_the_same_one(url, tmp_path):
    """A loader per epoch over a dataset opened anew each time (compat's context per epoch)
    finds it open in the workers: it is sent again only when it is another dataset (another
    URL or index), never read stale."""
    from petastream.mds.dataset import MDSDataset

    sent = []
    first = PartsLoader(MDSDataset(url), batch_size=100, num_workers=2)
    pool = first.executor.start()
    send = pool._send
    pool._send = lambda w, msg: (sent.append(msg[0]), send(w, msg))
    list(first)
    first.close()
    second = PartsLoader(MDSDataset(url), batch_size=100, shuffle=True, seed=3, num_workers=2)
    assert sorted(i for b in second for i in b[0]) == list(range(N))
    assert second.executor.pool is pool and sent.count("dataset") == 2  # once per worker, first loader only
    second.close()
    other = str(tmp_path / "other")
    write_mds({"id": np.arange(N, N + 50), "x": np.zeros((50, 3), np.float32),
               "s": np.array(["a"] * 50, dtype=object), "v": np.array([np.ones(i % 2 + 1, np.int32) for i in range(50)], dtype=object)},
              other, columns={"id": "int64", "x": "ndarray:float32:3", "s": "str", "v": "ndarray:int32"})
    third = PartsLoader(MDSDataset(other), batch_size=100, num_workers=2)
    assert sorted(i for b in third for i in b[0]) == list(range(N, N + 50))
    assert third.executor.pool is pool and sent.count("dataset") == 4
    third.close()


def test_a_parked_pool_serves_only_loaders_in_its_environment(url, monkeypatch):
    """Workers keep the environment they started in (credentials, cache settings): after it
    changes, a new loader starts workers of its own; back in the old one, it takes the parked."""
    first = PartsLoader(url, batch_size=500, num_workers=2)
    list(first)
    pool = first.executor.pool
    first.close()
    with monkeypatch.context() as changed:
        changed.setenv("AWS_ACCESS_KEY_ID", "rotated")
        second = PartsLoader(url, batch_size=500, num_workers=2)
        assert sorted(i for b in second for i in b[0]) == list(range(N))
        assert second.executor.pool is not pool
        second.close()
    third = PartsLoader(url, batch_size=500, num_workers=2)
    list(third)
    assert third.executor.pool is pool
    third.close()
    parking.shutdown_idle()


def test_shutdown_idle_ends_the_workers_and_leaves_no_shared_memory(url):
    procs = PartsLoader(url, batch_size=100, num_workers=2)
    list(procs)
    pool = procs.executor.pool
    paths = [a.path for arenas in pool._arenas for a in arenas.values()]
    procs.close()
    parking.shutdown_idle()
    assert pool.closed and all(p.poll() is not None for p in pool._procs)
    assert paths and not any(os.path.exists(p) for p in paths)
    assert not [f for f in os.listdir("/dev/shm") if f.startswith("petastream-arena-")] if os.path.isdir("/dev/shm") else True


def test_a_collected_loaders_workers_stop_once_idle(url, monkeypatch):
    monkeypatch.setattr(parking, "_IDLE_S", 0.2)  # parked at the end of the pass, for the next loader
    procs = PartsLoader(url, batch_size=100, num_workers=1)
    list(procs)
    workers = list(procs.executor.pool._procs)
    del procs
    gc.collect()
    for p in workers:
        p.wait(timeout=10)


def test_a_dataset_the_workers_cannot_open_is_an_error_in_the_loop(url, tmp_path):
    import shutil

    copy = str(tmp_path / "copy")
    shutil.copytree(url, copy)
    procs = PartsLoader(copy, batch_size=100, num_workers=2)
    shutil.rmtree(copy)  # gone before the workers open it
    try:
        with pytest.raises(Exception, match="index.json") as err:
            next(iter(procs))
        assert "decode worker process" in "\n".join(getattr(err.value, "__notes__", ["decode worker process"]))
    finally:
        procs.close()
