"""Several reader processes on one shard cache, paced step by step by the parent (drift).

Each child is one rank of a job (``rank`` of ``world``, ``LOCAL_WORLD_SIZE=world``: all ranks
on this node) reading a shuffled :class:`~petastream.pipeline.BatchLoader` of an S3 dataset
through one cache directory with a ``cache_limit``. It takes batches only when told: the
parent writes ``<k>`` on its stdin, the child takes ``k`` batches and answers ``<taken>``
(fewer at the end of its run), or ``blocked`` first when petastream's pacing makes it wait
for a reader behind it (``loader.pacer.waiting_for``). So drift is set by the schedule, not by
timing: in each round reader ``i`` takes ``speeds[i]`` batches, so the readers drift apart as
far as pacing lets them, and the GETs the S3 server saw are compared with the ideal, each shard once
per epoch (:func:`run_readers`).
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
from collections.abc import Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = r"""
import sys
import threading
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

def take(k, out):
    global total
    for _ in range(k):
        batch = next(it, None)
        if batch is None:
            break
        total += int(batch["id"].sum())
        out.append(1)

for line in sys.stdin:
    taken = []
    t = threading.Thread(target=take, args=(int(line), taken))
    t.start()
    said = False
    while t.is_alive():
        t.join(0.02)
        if loader.pacer is not None and loader.pacer.waiting_for and not said:
            print("blocked", flush=True)  # waiting for a reader behind: the parent moves it on
            said = True
    print(len(taken), flush=True)
    if len(taken) < int(line):
        break
print(f"total {total}", flush=True)
"""


def run_readers(url: str, cache_dir: str, limit: int, speeds: Sequence[int], *, env: dict[str, str],
                epochs: int = 2, batch: int = 50, nodes: int = 1) -> list[int]:
    """Run ``len(speeds)`` ranks of one job on ``cache_dir``, paced as the module says; returns
    the sum of the ids each read (every rank's share of every epoch, checked by the caller).
    ``nodes``: the ranks split over that many "nodes", each with a cache of its own
    (``cache_dir/node<k>``; the ideal is then each shard once per epoch per node).
"""
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
        _in_rounds(procs, speeds, lengths, done)
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


def _in_rounds(procs: list, speeds: Sequence[int], lengths: list[int], done: list[int]) -> None:
    """Rounds in which reader ``i`` takes ``speeds[i]`` batches. A reader that answers "blocked" is waiting
    (petastream's pacing) for a reader behind it: the rounds go on without it, and its count
    is taken when it comes."""
    blocked: set[int] = set()
    while any(d < n for d, n in zip(done, lengths)):
        running = sum(d < n for d, n in zip(done, lengths))
        for i in _answered(procs, blocked, wait=len(blocked) == running):
            done[i] += int(_line(procs[i]))
            blocked.discard(i)
        for i, p in enumerate(procs):
            if done[i] >= lengths[i] or i in blocked:
                continue
            p.stdin.write(f"{speeds[i]}\n")
            p.stdin.flush()
            answer = _line(p)
            if answer == "blocked":
                blocked.add(i)
            else:
                done[i] += int(answer)


def _answered(procs: list, blocked: set[int], *, wait: bool) -> list[int]:
    """The blocked readers whose count has come (``wait``: at least one, however long)."""
    if not blocked:
        return []
    ready, _, _ = select.select([procs[i].stdout for i in blocked], [], [], 600 if wait else 0)
    if wait and not ready:
        raise RuntimeError("no blocked reader answered in 600 s")
    return [i for i in blocked if procs[i].stdout in ready]


def _line(p: subprocess.Popen) -> str:
    line = p.stdout.readline()
    if not line:
        p.wait(timeout=60)
        raise RuntimeError(f"reader exited {p.returncode}: {p.stderr.read()[-3000:]}")
    return line.strip()
