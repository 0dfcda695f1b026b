"""Loaders give back their descriptors and maps: 200 loaders of each kind under a 256-fd limit."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from petastream.mds.writer import write_mds

pytestmark = [pytest.mark.timeout(600), pytest.mark.skipif(not sys.platform.startswith("linux"),
                                                           reason="counts /proc/self/fd")]

SCRIPT = textwrap.dedent("""
    import os, resource, sys
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    import petastream.tf as ptf
    from petastream.torch import loader
    from petastream.compat.pytorch import DataLoader
    from petastream.compat.reader import make_batch_reader
    url = sys.argv[1]
    fds = lambda: len(os.listdir("/proc/self/fd"))
    kinds = {
        "torch": lambda: sum(len(b["id"]) for b in loader(url, 64, num_workers=2)),
        "tf": lambda: sum(int(b["id"].shape[0]) for b in ptf.dataset(url, 64)),
        "compat": lambda: sum(len(b["id"]) for b in DataLoader(make_batch_reader(url, num_epochs=1), batch_size=64)),
    }
    for name, epoch in kinds.items():
        epoch()  # warm: libraries, thread pools
        before = fds()
        for _ in range(200):
            assert epoch() == 2000
        print(name, before, fds())
""")


def test_two_hundred_exhausted_loaders_of_each_kind_under_256_descriptors(tmp_path):
    url = str(tmp_path / "ds")
    write_mds({"id": np.arange(2000), "x": np.arange(2000, dtype=np.float32)}, url, size_limit=1000,
              compression="zstd")  # 40-odd shards: a leak of one descriptor each hits 256 fast
    out = subprocess.run([sys.executable, "-c", SCRIPT, url], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    for line in out.stdout.split("\n"):
        if line:
            name, before, after = line.split()
            assert int(after) <= int(before) + 4, line
