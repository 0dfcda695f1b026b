"""A full shard cache names the processes whose reads pin it, and whether they are alive."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

import petastream
from petastream.errors import CacheFullError
from petastream.mds.writer import write_mds
from petastream.storage.cache import ShardCache

pytestmark = [
    pytest.mark.skipif(not os.path.isdir("/proc"), reason="holders are looked up in /proc"),
    pytest.mark.timeout(300),
]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHILD_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "src"), ROOT])}

# Maps every shard of a dataset through the cache and keeps the maps until stdin closes.
# "fork": the reader forks a child that inherits the maps, and exits: the pins' lock owner is
# then dead while the child, alive, keeps them.
_HOLDER = """
import os, sys
import petastream
url, cache, ready, mode = sys.argv[1:5]
ds = petastream.open(url, cache_dir=cache, prefetch_depth=0)
held = [ds.shard(s) for s in range(ds.num_shards)]
reader = os.getpid()
if mode == "fork" and os.fork() != 0:
    os._exit(0)
with open(ready + ".tmp", "w") as f:
    f.write(f"{reader} {os.getpid()}")
os.replace(ready + ".tmp", ready)
sys.stdin.read()
"""


def _write(url: str, seed: int) -> str:
    rng = np.random.default_rng(seed)
    write_mds({"id": np.arange(2000), "x": rng.random((2000, 8))}, url, size_limit=20_000, compression="zstd")
    return url


@pytest.mark.parametrize("mode", ["hold", "fork"])
def test_a_full_cache_names_the_processes_pinning_it(tmp_path, monkeypatch, mode):
    pinned_url, other_url = _write(str(tmp_path / "a"), 0), _write(str(tmp_path / "b"), 1)
    cache, ready = str(tmp_path / "cache"), str(tmp_path / "ready")
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, pinned_url, cache, ready, mode],
                              stdin=subprocess.PIPE, stderr=subprocess.PIPE, env=CHILD_ENV)
    try:
        deadline = time.monotonic() + 120
        while not os.path.exists(ready):
            assert holder.poll() in (None, 0), holder.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the holder did not map its shards"
            time.sleep(0.05)
        if mode == "fork":
            holder.wait(timeout=60)  # reaped: not even a zombie is left of it
        with open(ready) as f:
            reader, keeper = (int(p) for p in f.read().split())
        held = ShardCache.at(cache).usage().bytes
        # Room for none of the other dataset's shards while the holder's stay pinned; giving up
        # after a second is the test's choice (the pins do not go while we wait).
        monkeypatch.setattr(ShardCache, "full_timeout", 1.0)
        ds = petastream.open(other_url, cache_dir=cache, cache_limit=held + 1000, prefetch_depth=0)
        with pytest.raises(CacheFullError) as info:
            ds.read_shard(0)
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
        holder.stderr.close()
    message = str(info.value)
    if mode == "hold":
        assert f"pinned by pid {reader} (alive)" in message
    else:
        assert f"pid {reader} (dead: a process it forked still maps the shard)" in message
        assert f"pid {keeper} (alive)" in message
    assert re.search(r"by \d+ shards being read", message)
    assert "end the other processes holding them" in message
