"""The writer's memory is bounded by the shard size, not by the input (Spark executors write
image columns; a per-byte index used to need 16x the column)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import os, sys, tempfile
    import numpy as np, pyarrow as pa
    import petastream.mds.encodings, petastream.storage.location
    from petastream.mds.writer import write_mds
    pa.array([b"x"])  # libraries loaded before the baseline
    n = 100_000
    col = np.array([os.urandom(1000) for _ in range(n)], dtype=object)  # a 100 MB bytes column
    ids = np.arange(n)
    current = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    out = tempfile.mkdtemp() + "/ds"
    write_mds({"id": ids, "payload": col}, out)  # default size_limit: 64 MiB shards
    # VmHWM, not ru_maxrss: the latter survives exec, so it starts at the forking parent's size
    peak = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmHWM:"))
    largest = max(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out) if f.startswith("shard."))
    print(peak - current, largest)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_peak_memory_of_a_100mb_bytes_column_is_within_three_shards():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True)
    grown, largest = map(int, out.stdout.split())
    assert largest > 60_000_000
    assert grown <= 3 * largest, f"writing grew RSS by {grown / 1e6:.0f} MB; largest shard {largest / 1e6:.0f} MB"
