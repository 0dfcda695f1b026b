"""Pacing: a loader more than ``lead`` windows ahead of the slowest live reader of its order on
a shared bounded cache waits for it; positions travel through the cache's announcements.
(tests/mds/test_cache_shared.py counts the GETs of free-running ranks on a real S3 API.)"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest

import petastream
from petastream.pipeline import BatchLoader
from petastream.pipeline.pacing import Pacer, plan_key
from petastream.storage.announce import Announcements
from petastream.stream import StreamPlanner
from tests.mds.test_cache import CHILD_ENV, _write


class _Peers:
    """Positions scripted per call of ``positions()``; records what this reader published."""

    def __init__(self, script):
        self.script, self.calls, self.published, self.withdrawn = list(script), 0, [], []

    def publish_position(self, plan, window, *, beat=False):
        self.published.append((window, beat))

    def withdraw_position(self, plan):
        self.withdrawn.append(plan)

    def positions(self, plan):
        self.calls += 1
        return self.script.pop(0) if self.script else []


class _Peer:
    def __init__(self, window, age=0.0, pid=1):
        self.pid, self.window, self.seen = pid, window, time.time() - age


def _plan(samples=1000, window=100, batch=10, world=1):
    p = StreamPlanner([samples], batch, shuffle=True, seed=1, window=window, block_size=window, world_size=world)
    return p.plan()


class _Run:
    def __init__(self, n):
        self.items, self.closed = list(range(n)), False

    def __iter__(self):
        return self

    def __next__(self):
        if not self.items:
            raise StopIteration
        return self.items.pop(0)

    def close(self):
        self.closed = True


def test_a_reader_ahead_waits_until_the_slowest_is_within_the_lead():
    plan = _plan()  # 10 windows of 100 samples, 10 batches each
    peers = _Peers([[], [_Peer(0)], [_Peer(0)], [_Peer(0)], [_Peer(1)]])  # at window 3 (lead 2), 0 is too far
    run = Pacer(peers, source=None, lead=2, poll=0).wrap(_Run(100), plan)
    got = [next(run) for _ in range(31)]  # windows 0, 1, 2 and the first batch of 3
    assert got == list(range(31))
    assert [w for w, _ in peers.published] == [0, 1, 2, 3]
    assert peers.calls == 5  # one look per new window, then again until the peer reached window 1
    run.close()
    assert peers.withdrawn and run._run.closed  # noqa: SLF001 - the wrapped run


def test_idle_or_close_readers_are_not_waited_for():
    plan = _plan()
    peers = _Peers([[], [], [], [_Peer(0, age=1000), _Peer(1, pid=2)]])
    run = Pacer(peers, source=None, lead=2, idle_after=30, poll=0).wrap(_Run(100), plan)
    assert [next(run) for _ in range(31)] == list(range(31))
    assert peers.calls == 4  # window 0 is idle (silent 1000 s) and window 1 is within the lead


def test_positions_count_epochs_and_the_ranks_of_a_global_batch():
    plan = StreamPlanner([1000], 10, shuffle=True, seed=1, window=100, block_size=100, world_size=2,
                         rank=1)
    plan.start_epoch(3)
    peers = _Peers([])
    run = Pacer(peers, source=None, lead=1).wrap(_Run(50), plan.plan())
    for _ in range(6):
        next(run)
    # A batch covers 20 positions of the order over the 2 ranks: batches 0-4 in window 0, 5 in 1.
    assert [w for w, _ in peers.published] == [30, 31]


def test_plan_key_is_the_same_on_every_rank_and_differs_by_order():
    a = _plan(world=2)
    b = StreamPlanner([1000], 10, shuffle=True, seed=1, window=100, block_size=100, world_size=2, rank=1).plan()
    c = StreamPlanner([1000], 10, shuffle=True, seed=2, window=100, block_size=100, world_size=2).plan()

    class Src:
        fingerprint = "f"

    assert plan_key(Src, a) == plan_key(Src, b) != plan_key(Src, c)


_PUBLISHER = """
import sys
from petastream.storage.announce import Announcements
Announcements(sys.argv[1]).publish_position("plan-a", 7)
print("published", flush=True)
sys.stdin.read()  # lives until killed
"""


def test_positions_travel_between_processes_and_die_with_them(tmp_path):
    mine = Announcements(str(tmp_path))
    child = subprocess.Popen([sys.executable, "-c", _PUBLISHER, str(tmp_path)], env={**os.environ, **CHILD_ENV},
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "published"
        (theirs,) = mine.positions("plan-a")
        assert (theirs.pid, theirs.window) == (child.pid, 7) and time.time() - theirs.seen < 60
        assert mine.positions("plan-b") == []
        mine.publish_position("plan-a", 3)
        assert mine.positions("plan-a") == [theirs]  # its own position is not a peer's
    finally:
        child.kill()
        child.wait(10)
    assert mine.positions("plan-a") == []  # dead: its files go with it
    assert sorted(os.listdir(tmp_path)) == sorted(f"{mine._name}{ext}" for ext in (".lock", ".pos"))  # noqa: SLF001


def test_a_position_is_rewritten_on_a_new_window_or_a_heartbeat(tmp_path):
    mine, other = Announcements(str(tmp_path)), Announcements(str(tmp_path))
    mine.publish_position("p", 1)
    first = other.positions("p")[0].seen
    mine.publish_position("p", 1)  # the same window: no write
    assert other.positions("p")[0].seen == first
    time.sleep(0.01)
    mine.publish_position("p", 1, beat=True)
    assert other.positions("p")[0].seen > first
    mine.withdraw_position("p")
    assert other.positions("p") == []


@pytest.mark.timeout(120)
def test_loaders_pace_on_a_bounded_cache_only(tmp_path):
    url = _write(str(tmp_path / "ds"), n=4000, size_limit=20_000)  # zstd: read through the cache
    limited = petastream.open(url, cache_dir=str(tmp_path / "c"), cache_limit=int(petastream.open(url).stored_bytes))
    assert BatchLoader(limited, 50).pacer is not None
    assert BatchLoader(petastream.open(url, cache_dir=str(tmp_path / "c")), 50).pacer is None
    # Alone on its cache, a paced loader reads as ever, and leaves no position behind.
    ids = np.concatenate([b["id"] for b in BatchLoader(limited, 50, shuffle=True, num_epochs=2)])
    np.testing.assert_array_equal(np.sort(ids), np.repeat(np.arange(4000), 2))
    readers = os.path.join(limited.cache_dir, "v1", "readers")
    assert all(os.path.getsize(os.path.join(readers, f)) == 0 for f in os.listdir(readers) if f.endswith(".pos"))


def test_parquet_read_through_a_bounded_cache_is_paced(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from petastream.parquet import open_parquet

    pq.write_table(pa.table({"id": np.arange(2000)}), tmp_path / "t.parquet", row_group_size=500)
    common = {"cache_dir": str(tmp_path / "c"), "cache_decoded": True}
    assert BatchLoader(open_parquet(str(tmp_path / "t.parquet"), cache_limit="1gb", **common), 50).pacer is not None
    assert BatchLoader(open_parquet(str(tmp_path / "t.parquet"), **common), 50).pacer is None
    assert BatchLoader(open_parquet(str(tmp_path / "t.parquet"), cache_limit="1gb"), 50).pacer is None  # in place


def test_closing_the_run_ends_a_wait():
    # tf.data pulls batches in its own thread, and a superseded pass is closed from another: a
    # wait for a reader that never comes must end there, not at the idle timeout.
    import threading

    class Stuck(_Peers):
        def positions(self, plan):
            self.calls += 1
            return [_Peer(-10)]  # far behind, and never idle

    peers = Stuck([])
    pacer = Pacer(peers, source=None, lead=1, idle_after=3600, poll=0.01)
    run = pacer.wrap(_Run(10), _plan())
    got = []
    t = threading.Thread(target=lambda: got.append(next(run)))
    t.start()
    while not pacer.waiting_for and t.is_alive():
        time.sleep(0.01)
    run.close()
    t.join(60)
    assert not t.is_alive() and got == [0] and pacer.waiting_for == []


def test_whole_shards_in_a_window_of_one_sample_are_paced_per_shard():
    # compat's default order: shards permuted, each read in order (a window of one sample).
    plan = StreamPlanner([300, 300, 400], 10, shuffle=True, seed=1, window=1, block_size=1 << 62).plan()
    peers = _Peers([])
    run = Pacer(peers, source=None, lead=1).wrap(_Run(100), plan)
    for _ in range(100):
        next(run)
    assert [w for w, _ in peers.published] == [0, 1, 2]  # units of the largest shard (400 samples)
    assert peers.calls == 3
