"""Worker processes end with a trainer killed by ``kill -9``.

Each test runs a small trainer script in a subprocess; the script starts its workers, reads a
batch, says it is ready, and waits; the test kills it with SIGKILL and then expects every
process the trainer had started to be gone. A worker that outlives its trainer keeps the shard
cache's entries it maps pinned, and a later job on the node runs out of cache.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from petastream.mds.writer import write_mds
from petastream.parent_death import pid_alive

pytestmark = [
    pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds a process's children in /proc"),
    pytest.mark.timeout(600),
]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHILD_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "src"), ROOT])}
READY_S = 300.0  # starting spawn workers imports torch in each: slow on a loaded machine
GONE_S = 60.0  # how long the workers may take to notice (the poll runs every second)


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    # Batches of 100 rows of ~2 kB strings (~200 kB pickled) overflow a pipe's 64 kB: a worker
    # whose batch the dead trainer never read blocks in its queue's feeder thread at exit.
    n = 4000
    path = str(tmp_path_factory.mktemp("orphans") / "ds")
    write_mds({"id": np.arange(n), "s": np.array([f"{i:06d}" * 300 for i in range(n)], dtype=object)},
              path, size_limit=1 << 20, compression="zstd")
    return path


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (forkserver workers are the server's children)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = [], [pid]
    while frontier:
        kids = [p for p, pp in parents.items() if pp in frontier]
        found += kids
        frontier = kids
    return found


def _kill_trainer(script: str, *args: str, tmp_path) -> tuple[list[int], list[int]]:
    """Run ``script`` until it writes its ready file, ``kill -9`` it; return the processes it
    had started and those of them still running after ``GONE_S``."""
    ready = str(tmp_path / "ready")
    proc = subprocess.Popen([sys.executable, "-c", script, ready, *args], env=CHILD_ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    kids: list[int] = []
    try:
        deadline = time.monotonic() + READY_S
        while not os.path.exists(ready):
            if proc.poll() is not None:
                pytest.fail(f"the trainer exited with {proc.returncode}: {proc.stderr.read()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"the trainer was not ready after {READY_S:.0f}s")
            time.sleep(0.1)
        kids = _descendants(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        deadline = time.monotonic() + GONE_S
        while any(pid_alive(k) for k in kids) and time.monotonic() < deadline:
            time.sleep(0.2)
        return kids, [k for k in kids if pid_alive(k)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)
        proc.stderr.close()
        for k in kids:  # a failed test must not leave them behind either
            if pid_alive(k):
                os.kill(k, signal.SIGKILL)


_READY = """
def ready(path):
    with open(path + ".tmp", "w") as f:
        f.write("ready")
    os.replace(path + ".tmp", path)
"""

_TORCH_LOADER = """
import os, sys, time
from petastream.torch import loader
""" + _READY + """
ready_file, url, context = sys.argv[1:4]
it = iter(loader(url, 100, shuffle=True, num_workers=2, worker_type="process",
                 multiprocessing_context=None if context == "default" else context))
next(it)
ready(ready_file)
time.sleep(3600)
"""

_ITERABLE = """
import os, sys, time
import torch
from petastream.torch import MDSIterableDataset
""" + _READY + """
ready_file, url = sys.argv[1:3]
dl = torch.utils.data.DataLoader(MDSIterableDataset(url, 100, shuffle=True), batch_size=None,
                                 num_workers=2, multiprocessing_context="fork")
it = iter(dl)
next(it)
ready(ready_file)
time.sleep(3600)
"""

_COMPAT = """
import os, sys, time
from petastream.compat.pytorch import DataLoader
from petastream.compat.reader import make_batch_reader
""" + _READY + """
ready_file, url = sys.argv[1:3]
reader = make_batch_reader(url, reader_pool_type="process", workers_count=2, num_epochs=1)
it = iter(DataLoader(reader, batch_size=100))
next(it)
ready(ready_file)
time.sleep(3600)
"""

_OWN_WORKERS = """
import os, sys, time
import numpy as np
from petastream.pipeline import BatchLoader
from petastream.pipeline.procpool import ProcessExecutor
from petastream.pipeline.parts import DENSE, STRING, ColumnParts, FlatParts
""" + _READY + """
ready_file, url = sys.argv[1:3]
parts = FlatParts((ColumnParts("id", DENSE, np.dtype("int64")), ColumnParts("s", STRING)))
# as the TensorFlow loader runs its worker processes
it = iter(BatchLoader(url, 100, shuffle=True, num_workers=2, convert=parts,
                      executor=ProcessExecutor(2, slots=4, strings=True)))
next(it)
ready(ready_file)
time.sleep(3600)
"""


@pytest.mark.torch
@pytest.mark.parametrize("context", ["spawn", "forkserver", "fork"])
def test_torch_loader_workers_die_with_a_killed_trainer(url, tmp_path, context):
    started, survivors = _kill_trainer(_TORCH_LOADER, url, context, tmp_path=tmp_path)
    assert len(started) >= 2 and survivors == []


@pytest.mark.torch
def test_iterable_dataset_workers_in_a_users_dataloader_die_with_a_killed_trainer(url, tmp_path):
    started, survivors = _kill_trainer(_ITERABLE, url, tmp_path=tmp_path)
    assert len(started) >= 2 and survivors == []


@pytest.mark.torch
def test_compat_process_pool_workers_die_with_a_killed_trainer(url, tmp_path):
    started, survivors = _kill_trainer(_COMPAT, url, tmp_path=tmp_path)
    assert len(started) >= 2 and survivors == []


def test_petastreams_own_workers_die_with_a_killed_trainer(url, tmp_path):
    started, survivors = _kill_trainer(_OWN_WORKERS, url, tmp_path=tmp_path)
    assert len(started) >= 2 and survivors == []


# -- the mechanism alone ---------------------------------------------------------------------

_WATCHED = """
import os, sys, threading, time
from petastream.parent_death import exit_with_parent
ready_file, signal_safe, interval = sys.argv[1], sys.argv[2] == "1", float(sys.argv[3])
exit_with_parent(os.getppid(), signal_safe=signal_safe, interval=interval)
# A non-daemon thread that never ends: an ordinary exit would wait for it forever.
threading.Thread(target=time.sleep, args=(3600,)).start()
with open(ready_file + ".tmp", "w") as f:
    f.write("ready")
os.replace(ready_file + ".tmp", ready_file)
"""

_PARENT = """
import os, subprocess, sys, time
ready_file, signal_safe, interval = sys.argv[1:4]
child = subprocess.Popen([sys.executable, "-c", sys.argv[4], ready_file + ".child", signal_safe, interval])
while not os.path.exists(ready_file + ".child"):
    time.sleep(0.05)
os.replace(ready_file + ".child", ready_file)
time.sleep(3600)
"""


@pytest.mark.parametrize("how", [
    pytest.param("signal", marks=pytest.mark.skipif(not sys.platform.startswith("linux"),
                                                    reason="PR_SET_PDEATHSIG is Linux's")),
    "poll",
])
def test_exit_with_parent(tmp_path, how):
    # "signal": the poll is an hour apart, so only the parent-death signal can end the child.
    args = ("1", "3600") if how == "signal" else ("0", "0.2")
    started, survivors = _kill_trainer(_PARENT, *args, _WATCHED, tmp_path=tmp_path)
    assert len(started) == 1 and survivors == []
