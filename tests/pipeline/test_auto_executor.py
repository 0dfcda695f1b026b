"""AutoExecutor: worker processes where they are ready, threads until then.

A fresh pool takes about a second and a half to start; a pass that would wait for it runs in
threads while it starts, and a later pass takes it. Same batches either way.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from petastream.mds.writer import write_mds
from petastream.pipeline import ThreadExecutor, ThreadRun
from petastream.pipeline.procpool import AutoExecutor, PoolRun, ProcessExecutor, shutdown_idle


class FakePool:
    """A ProcessExecutor stand-in whose readiness the test sets (no timing involved)."""

    worker_type = "process"
    num_workers = 2
    pool = None

    def __init__(self, ready: bool, fails: Exception | None = None):
        self.is_ready, self.fails, self.ran, self.closed = ready, fails, 0, 0

    def ready(self) -> bool:
        if self.fails is not None:
            raise self.fails
        return self.is_ready

    def run(self, work):
        self.ran += 1
        return ThreadExecutor(2, 2).run(work)

    def close(self) -> None:
        self.closed += 1


class Work:
    """A pass of no items (what an executor reads of a PassWork: its items and its source)."""

    num_items = 0
    dataset = type("Source", (), {"cache_limit": None})()

    def __call__(self, w, n):
        return iter(())


def test_a_pass_runs_in_threads_until_the_pool_is_ready():
    fake = FakePool(ready=False)
    auto = AutoExecutor(fake, ThreadExecutor(2, 2))
    auto.run(Work())
    assert fake.ran == 0 and auto.worker_type == "process"  # threads this pass; processes still coming
    fake.is_ready = True
    auto.run(Work())
    assert fake.ran == 1


def test_a_pool_that_cannot_start_leaves_threads_for_good(caplog):
    fake = FakePool(ready=False, fails=OSError("no fork here"))
    auto = AutoExecutor(fake, ThreadExecutor(2, 2))
    with caplog.at_level("WARNING", logger="petastream"):
        run = auto.run(Work())
    assert isinstance(run, ThreadRun) and auto.worker_type == "thread" and fake.closed == 1
    assert "did not start (OSError: no fork here); decoding in threads" in caplog.text


@pytest.fixture
def url(tmp_path):
    path = str(tmp_path / "ds")
    write_mds({"id": np.arange(3000), "x": np.arange(3000, dtype=np.float32)}, path, size_limit=8000)
    return path


def test_a_fresh_loader_decodes_in_threads_then_takes_the_started_pool(url):
    from petastream.pipeline import BatchLoader

    shutdown_idle()  # no parked pool: this loader's pool starts fresh
    auto = AutoExecutor(ProcessExecutor(2, slots=4), ThreadExecutor(2, 2))
    loader = BatchLoader(url, 100, shuffle=True, seed=3, num_epochs=1, executor=auto)
    runs = []
    loader.stages.append(lambda run: runs.append(type(run.run)) or run)  # (under the ReportRun)
    try:
        auto.prestart()
        first = [int(i) for b in loader for i in b["id"]]
        deadline = time.monotonic() + 120  # generous: the workers import numpy and petastream
        while not auto.processes.ready():
            assert time.monotonic() < deadline, "the worker processes never started"
            time.sleep(0.05)
        second = [int(i) for b in loader for i in b["id"]]
        assert runs[-1] is PoolRun  # the started pool serves the later pass
        assert sorted(first) == sorted(second) == list(range(3000))
        reference = BatchLoader(url, 100, shuffle=True, seed=3, num_epochs=1)
        reference.set_epoch(1)  # the loader's second iteration
        assert second == [int(i) for b in reference for i in b["id"]]
    finally:
        loader.close()
        shutdown_idle()
