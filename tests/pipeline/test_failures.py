"""Failure modes of the epoch driver: nothing spins, nothing hangs, nothing is ignored."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

from petastream.errors import InvalidArgumentError
from petastream.mds.writer import write_mds
from petastream.pipeline import BatchLoader, SupersededError, ThreadRun

pytestmark = [pytest.mark.timeout(120), pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")]
N = 100


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("failures") / "ds")
    write_mds({"id": np.arange(N), "x": np.arange(N, dtype=np.float32)}, path, size_limit=500)
    return path


def _decode_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("petastream-decode") and t.is_alive()]


def test_the_issue_example_every_epoch_is_whole(url):
    from petastream.torch import loader

    ld = loader(url, 32, shuffle=True, seed=0)
    seen = []
    for epoch in range(3):
        ld.set_epoch(epoch)
        ids = [int(i) for b in ld for i in b["id"]]
        assert sorted(ids) == list(range(N)) and len(ld) == 4
        seen.append(ids)
    assert seen[0] != seen[1] != seen[2]
    plain = [[int(i) for b in ld for i in b["id"]] for _ in range(2)]  # no set_epoch: still new epochs
    assert all(sorted(p) == list(range(N)) for p in plain) and plain[0] != plain[1]


def _kinds():
    from petastream.tf import TFLoader
    from petastream.torch import TorchLoader

    return {
        "numpy": lambda url, bs, **kw: BatchLoader(url, bs, **kw),
        "thread": lambda url, bs, **kw: TorchLoader(url, bs, **kw),
        "process": lambda url, bs, **kw: TorchLoader(url, bs, worker_type="process", **kw),
        "tf": lambda url, bs, **kw: TFLoader(url, bs, **kw),
    }


@pytest.mark.parametrize("kind", ["numpy", "thread", "process", "tf"])
@pytest.mark.parametrize("num_epochs", [1, None])
def test_an_epoch_with_no_batch_raises_instead_of_spinning(url, kind, num_epochs):
    ld = _kinds()[kind](url, 64, world_size=2, drop_last=True, num_epochs=num_epochs)
    with pytest.raises(InvalidArgumentError, match=r"100 rows makes no batch of batch_size=64 x world_size=2 "
                                                   r"ranks with drop_last=True"):
        iter(ld) if kind != "tf" else ld.as_dataset()


def test_an_empty_dataset_says_so(tmp_path):
    path = str(tmp_path / "empty")
    write_mds({"id": np.zeros(0, np.int64)}, path)
    with pytest.raises(InvalidArgumentError, match="the dataset has no rows"):
        iter(BatchLoader(path, 8))


def _boom(batch):  # module level: picklable for worker processes
    raise KeyError("no such feature in this batch")


@pytest.mark.parametrize("kind", ["numpy", "thread", "process"])
def test_a_transform_error_surfaces_with_its_type(url, kind):
    ld = _kinds()[kind](url, 10, transform=_boom, num_epochs=None)
    t0 = time.monotonic()
    with pytest.raises(KeyError, match="no such feature"):
        for _ in ld:
            pass
    assert time.monotonic() - t0 < 30
    assert not _decode_threads()


def test_a_transform_error_in_tf_names_the_cause(url):
    import tensorflow as tf

    ds = _kinds()["tf"](url, 10, transform=_boom, output_signature={
        "id": tf.TensorSpec([None], tf.int64)}).as_dataset()
    with pytest.raises(tf.errors.OpError, match="no such feature"):
        for _ in ds:
            pass


def test_a_worker_that_ends_short_is_an_error_not_a_hang():
    def work(w, workers):  # owes batches 0..5 but stops after 2
        for i in range(2):
            yield i, {"i": i}

    run = ThreadRun(work, 6, 1, 2)
    got = []
    with pytest.raises(RuntimeError, match="finished without batch 2 of 6"):
        for b in run:
            got.append(b)
    assert len(got) == 2


def test_batches_cross_in_lists_in_order_and_bounded_and_an_error_comes_after_them():
    import threading

    from petastream.pipeline import threads

    produced = []
    gate = threading.Event()

    def work(w, workers):  # 2 workers of 80 batches; worker 1 fails at batch 41
        for i in range(w, 80, workers):
            if i == 41:
                raise KeyError("boom")
            produced.append(i)
            yield i, {"i": i}
            if i == 40:
                gate.set()

    run = ThreadRun(work, 80, 2, 2)
    first = next(run)
    assert first == {"i": 0}
    gate.wait(5)
    time.sleep(0.2)  # the producers run ahead as far as their queues let them, no further
    bound = 2 * (2 + 1) * threads._HANDOFF + 2 * threads._HANDOFF  # queued, being put, being built
    assert len(produced) <= bound + 1
    got = [first["i"]]
    with pytest.raises(KeyError, match="boom"):
        for b in run:
            got.append(b["i"])
    assert got == list(range(41))  # every batch before the error, in plan order


def test_a_thread_that_dies_without_a_word_is_noticed(monkeypatch):
    def work(w, workers):
        yield 0, {"i": 0}
        raise SystemExit  # forwarded as any BaseException is ...

    run = ThreadRun(work, 3, 1, 2)
    next(run)
    with pytest.raises(SystemExit):
        next(run)

    def silent(self, work, w):  # ... so kill the producer loop itself: it returns without a word
        return None

    monkeypatch.setattr(ThreadRun, "_produce", silent)
    run = ThreadRun(lambda w, n: iter(()), 3, 1, 2)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="died without producing batch 0"):
        next(run)
    assert time.monotonic() - t0 < 5


def _pid(batch):
    return {**batch, "pid": np.full(len(batch["id"]), os.getpid())}


def _pid_then_wait(batch):
    if batch["id"][0] >= 10:  # from each worker's second batch on: killed in here
        time.sleep(60)
    return _pid(batch)


def test_a_killed_worker_process_is_reported_within_seconds(url):
    from petastream.torch import TorchLoader

    ld = TorchLoader(url, 5, worker_type="process", num_workers=2, transform=_pid_then_wait, prefetch=1)
    it = iter(ld)
    first = next(it)
    # Killed inside the transform: a worker killed while it checks the DataLoader's shared
    # "done" event dies holding that event's lock, which hangs the DataLoader's own error path
    # (torch's _try_get_data); the next test covers what our close does about it.
    time.sleep(1)
    os.kill(int(first["pid"][0]), signal.SIGKILL)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"worker.* (exited unexpectedly|is killed by signal)"):
        for _ in it:
            pass
    assert time.monotonic() - t0 < 30


@pytest.mark.parametrize("kind", ["numpy", "thread"])
def test_breaking_out_stops_the_decode_threads(url, kind):
    ld = _kinds()[kind](url, 5, num_workers=3, num_epochs=None)
    for i, _ in enumerate(ld):
        if i == 2:
            break
    deadline = time.monotonic() + 5
    while _decode_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _decode_threads()


def test_a_superseded_iterator_raises_and_its_workers_stop(url):
    ld = BatchLoader(url, 5, num_workers=2)
    old = iter(ld)
    next(old)
    new = iter(ld)  # takes the position over: the next epoch
    with pytest.raises(SupersededError, match="superseded"):
        next(old)
    assert sorted(int(i) for b in new for i in b["id"]) == list(range(N))
    assert ld.planner.epoch == 1


def test_infinite_loader_has_no_length_but_says_its_epoch(url):
    ld = BatchLoader(url, 32, num_epochs=None)
    with pytest.raises(TypeError, match=r"repeats forever .* an epoch is 4 batches"):
        len(ld)
    assert ld.batches_per_epoch == 4
    assert len(BatchLoader(url, 32, num_epochs=3)) == 12


def test_state_dict_steps_replays_the_current_iteration(url):
    ld = BatchLoader(url, 30, shuffle=True, num_epochs=2)  # 4 batches an epoch
    it = iter(ld)
    for _ in range(6):
        next(it)
    assert {k: ld.state_dict(steps=5)[k] for k in ("epoch", "samples_consumed")} == {"epoch": 1, "samples_consumed": 30}
    assert ld.state_dict()["samples_consumed"] == 60
    with pytest.raises(InvalidArgumentError, match=r"steps must be an int in \[0, 6\]"):
        ld.state_dict(steps=7)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_num_epochs_is_checked(url, bad):
    with pytest.raises(InvalidArgumentError, match="num_epochs must be a positive int or None"):
        BatchLoader(url, 8, num_epochs=bad)


def test_cuda_without_a_gpu_fails_at_construction(url):
    import torch

    from petastream.torch import TorchLoader

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(InvalidArgumentError, match=r"device='cuda', but torch.cuda.is_available\(\) is False"):
        TorchLoader(url, 8, device="cuda")


def test_rank_and_world_size_from_torchrun_environment(url, monkeypatch):
    from petastream.torch import TorchLoader, resolve_rank_world

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert resolve_rank_world(None, None) == (1, 2)
    assert resolve_rank_world(0, 1) == (0, 1)  # arguments first
    ld = TorchLoader(url, 10)
    assert (ld.planner.rank, ld.planner.world_size) == (1, 2) and len(ld) == 5
    monkeypatch.setenv("RANK", "x")
    with pytest.raises(InvalidArgumentError, match="RANK='x'"):
        resolve_rank_world(None, None)



def test_closing_after_a_worker_died_holding_the_shutdown_lock_returns(url):
    # A worker killed while it checked the shared "done" event dies holding its lock; the
    # DataLoader's shutdown handshake (Event.set()) then blocks for good. Held here instead of
    # by the dead worker, deterministically: close() must still return, the workers stopped.
    import contextlib

    from petastream.torch import TorchLoader

    ld = TorchLoader(url, 5, worker_type="process", num_workers=2, transform=_pid_then_wait, prefetch=1)
    run = ld.executor.run(ld.pass_work(ld.planner.plan()))  # the ProcessRun itself
    first = next(run)
    first = getattr(first, "item", first)  # (an item may carry its worker's report: pipeline.stats)
    workers = list(run._it._workers)
    time.sleep(1)
    os.kill(int(first["pid"][0]), signal.SIGKILL)
    deadline = time.monotonic() + 10
    with contextlib.suppress(RuntimeError):  # the DataLoader's SIGCHLD handler may report it here
        while all(w.exitcode is None for w in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
    assert run._it._workers_done_event._cond.acquire(timeout=5)
    t0 = time.monotonic()
    run.close()
    assert time.monotonic() - t0 < 15
    assert all(w.exitcode is not None for w in workers)
