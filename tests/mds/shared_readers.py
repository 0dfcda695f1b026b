"""Several reader processes on one shard cache, paced step by step by the parent (drift).

Each child is one rank of a job (``rank`` of ``world``, ``LOCAL_WORLD_SIZE=world``: all ranks
on this node) reading a shuffled :class:`~petastream.pipeline.BatchLoader` of an S3 dataset
through one cache directory with a ``cache_limit``. It takes batches only when told: the
parent writes ``<k>`` on its stdin, the child takes ``k`` batches and answers ``<taken>``
(fewer at the end of its run). So drift is set by the schedule, not by timing: in each round
reader ``i`` takes ``speeds[i]`` batches (a reader ahead by ``max_lead`` batches of the slowest
one still running waits), and the GETs the S3 server saw are compared with the ideal, each
shard once per epoch (:func:`run_readers`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = r"""
import sys
import numpy as np
import petastream
from petastream.pipeline import BatchLoader

url, cache, limit, rank, world, epochs, batch = sys.argv[1:8]
ds = petastream.open(url, cache_dir=cache, cache_limit=int(limit))
loader = BatchLoader(ds, int(batch), shuffle=True, seed=5, num_workers=1, num_epochs=int(epochs),
                     rank=int(rank), world_size=int(world))
print(f"window {loader.planner.window} batches {len(loader)}", flush=True)
it = iter(loader)
total = 0
for line in sys.stdin:
    taken = 0
    for _ in range(int(line)):
        batch = next(it, None)
        if batch is None:
            break
        total += int(batch["id"].sum())
        taken += 1
    print(taken, flush=True)
    if taken < int(line):
        break
print(f"total {total}", flush=True)
"""


def run_readers(url: str, cache_dir: str, limit: int, speeds: Sequence[int], *, env: dict[str, str],
                epochs: int = 2, batch: int = 50, max_lead: int | None = None, nodes: int = 1) -> list[int]:
    """Run ``len(speeds)`` ranks of one job on ``cache_dir``, paced as the module says; returns
    the sum of the ids each read (every rank's share of every epoch, checked by the caller).
    ``nodes``: the ranks split over that many "nodes", each with a cache of its own
    (``cache_dir/node<k>``; the ideal is then each shard once per epoch per node)."""
    world = len(speeds)
    per_node = -(-world // nodes)
    child_env = {**env, "LOCAL_WORLD_SIZE": str(per_node),
                 "PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "src"), ROOT])}
    caches = [cache_dir if nodes == 1 else os.path.join(cache_dir, f"node{r // per_node}") for r in range(world)]
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, url, caches[r], str(limit), str(r), str(world),
                               str(epochs), str(batch)], env=child_env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
             for r in range(world)]
    try:
        heads = [_line(p) for p in procs]
        lengths = [int(h.split()[3]) for h in heads]
        done = [0] * world
        while any(d < n for d, n in zip(done, lengths)):
            running = [d for d, n in zip(done, lengths) if d < n]
            floor = min(running)
            for i, p in enumerate(procs):
                if done[i] >= lengths[i]:
                    continue
                step = speeds[i]
                if max_lead is not None:
                    step = min(step, max(0, floor + max_lead - done[i]))
                if step == 0:
                    continue
                p.stdin.write(f"{step}\n")
                p.stdin.flush()
                done[i] += int(_line(p))
        totals = []
        for p in procs:
            p.stdin.close()
            totals.append(int(_line(p).split()[1]))
            p.wait(timeout=60)
        return totals
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def _line(p: subprocess.Popen) -> str:
    line = p.stdout.readline()
    if not line:
        p.wait(timeout=60)
        raise RuntimeError(f"reader exited {p.returncode}: {p.stderr.read()[-3000:]}")
    return line.strip()
