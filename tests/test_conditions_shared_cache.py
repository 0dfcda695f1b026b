"""Several processes on one shard cache directory (issue 36, users' harder conditions): the
process buffer pool (:mod:`petastream.columns.pool`) in loaders with threads, DataLoader worker
processes and TensorFlow decode processes, two independent loaders in two processes at once,
a bounded cache that evicts between them; and a reader killed with SIGKILL mid-epoch.

Each reader runs in a process of its own (:mod:`tests.conditions_reader`), keeps every batch
it is handed and checks them all again after its last epoch, so a pooled buffer, shared-memory
slot or mapped entry reused under a kept batch fails the run. Synchronised on files and
pipes; each wait bounded, failing rather than hanging."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from petastream.mds.writer import write_mds
from petastream.storage.cache import ShardCache

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = {"PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "src"), ROOT])}
N = 24_000  # 3.2 MB decompressed, in shards of ~64 KB; batches of 512 rows
WAIT = 150  # seconds any one child may take before the test fails


@pytest.fixture(scope="module")
def mds_url(tmp_path_factory):
    url = str(tmp_path_factory.mktemp("shared-cache") / "mds")
    ids = np.arange(N, dtype=np.int64)
    write_mds({"id": ids, "x": ids.astype(np.float64)[:, None] * 16 + np.arange(16, dtype=np.float64),
               "s": np.array([f"r{i}" for i in ids], dtype=object)}, url, size_limit=1 << 16, compression="zstd")
    return url


def _spec(url: str, mode: str, epochs: int, **extra) -> dict:
    return {"url": url, "mode": mode, "batch": 512, "epochs": epochs, "n": N, **extra}


def _start(spec: dict, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.conditions_reader", json.dumps(spec)], cwd=ROOT,
                            env={**os.environ, **ENV, **(env or {})}, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(proc: subprocess.Popen) -> dict:
    try:
        out, err = proc.communicate(timeout=WAIT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"a reader did not finish within {WAIT} s: {err[-3000:]}") from None
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def _cache_limit(url: str) -> int:
    """Room for about half the decompressed dataset: the readers evict each other's entries."""
    from petastream.mds.dataset import MDSDataset

    return MDSDataset(url).stored_bytes // 2


@pytest.mark.torch
@pytest.mark.timeout(300)
@pytest.mark.parametrize("modes", [("threads", "threads"), ("threads", "dataloader"),
                                   pytest.param(("threads", "tf-process"), marks=pytest.mark.tf)],
                         ids=lambda m: "+".join(m))
def test_two_loaders_in_two_processes_on_one_cache_keep_every_batch_exact(mds_url, tmp_path, modes):
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    options = {"cache_limit": _cache_limit(mds_url)}
    # Epoch 0's buffers go back to the pool; epoch 1 is handed out in them and kept; epoch 2
    # must then not be made in them.
    procs = [_start(_spec(mds_url, mode, 3, barrier=str(barrier), me=k, peers=2, options=options, keep_epochs=[1]))
             for k, mode in enumerate(modes)]
    results = [_result(p) for p in procs]
    for mode, r in zip(modes, results):
        assert r["ids"] and r["rows"] == 3 * N and r["per_id"] == 3, (mode, r)
        if mode == "threads":  # the pool served later batches from buffers earlier ones gave back
            assert r["reused"] > 0 and r["kept"] == -(-N // 512), r
    usage = ShardCache.at(os.environ["PETASTREAM_CACHE_DIR"]).usage()
    assert usage.temporary == 0 and usage.total_bytes <= options["cache_limit"], usage


def _line(proc: subprocess.Popen, want: str) -> None:
    """Wait (bounded) until ``proc`` prints the line ``want``."""
    deadline = time.monotonic() + WAIT
    while True:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            proc.kill()
            raise AssertionError(f"the reader did not say {want!r} within {WAIT} s: {proc.stderr.read()[-3000:]}")
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"the reader ended before saying {want!r}: {proc.stderr.read()[-3000:]}")
        if line.strip() == want:
            return


def _children(pid: int) -> list[int]:
    """The processes ``pid`` started (its DataLoader workers), from /proc."""
    out = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            out += [int(p) for p in f.read().split()]
    return out


def _gone(pids: list[int]) -> bool:
    from petastream.parent_death import pid_alive

    deadline = time.monotonic() + WAIT
    while any(pid_alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)  # polling for an exit: only its end matters
    return True


KILL_POINTS = {
    # where the victim is when it is killed: mid-fill (threads, or its DataLoader workers), or
    # between batches with TensorFlow's decode processes (fresh interpreters: not patched)
    "threads": {"stall_fill_at": 12},
    "dataloader": {"stall_fill_at": 12},
    "tf-process": {"hold_after": 5},
}


@pytest.mark.torch
@pytest.mark.cloud
@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", ["threads", "dataloader", pytest.param("tf-process", marks=pytest.mark.tf)])
def test_a_reader_killed_mid_epoch_leaves_nothing_the_next_one_trips_on(s3_bucket, mds_url, tmp_path, mode):
    """A reader of an S3 dataset, killed with SIGKILL mid-epoch while it maps (pins) the shards
    it read, announces its read-ahead, and (killed mid-fill) holds a shard's fill lock with
    half of that shard in a temporary file: its worker processes end with it, and a reader
    started after it on the same cache dir reads every row exactly, without waiting for
    anything of the dead one's; the partial fill is never an entry."""
    import s3fs

    url = f"{s3_bucket}/mds"
    s3fs.S3FileSystem().put(mds_url + "/", url.removeprefix("s3://") + "/", recursive=True)
    options = {"cache_limit": _cache_limit(mds_url)}
    point = KILL_POINTS[mode]
    victim = _start(_spec(url, mode, 2, options=options, **point))
    _line(victim, "filling" if "stall_fill_at" in point else "holding")
    workers = _children(victim.pid)
    assert (mode != "threads") == bool(workers)
    cache = ShardCache.at(os.environ["PETASTREAM_CACHE_DIR"])
    held = cache.usage(count_pinned=True)
    assert held.pinned >= 1, held  # the shards it maps
    assert held.temporary >= int("stall_fill_at" in point), held  # the half-written fill
    assert any(name.endswith(".keys") for name in os.listdir(os.path.join(cache.root, "v1", "readers")))
    os.kill(victim.pid, signal.SIGKILL)
    victim.communicate(timeout=WAIT)
    assert _gone(workers), "the killed reader's worker processes outlived it"
    follower = _start(_spec(url, "threads", 1, options=options))
    r = _result(follower)
    assert r["ids"] and r["rows"] == N and r["per_id"] == 1, r
    # The follower evicted to fit the limit, and swept the dead fills' temporary files with it.
    usage = cache.usage()
    assert usage.total_bytes <= options["cache_limit"] and usage.temporary == 0, usage
