"""One shuffled epoch into PyTorch batches of 1024: petastream vs the floor and the peers.

Workloads (issue 4, :mod:`benchmarks.workloads`): 'tabular' (id, 16 float32 features as one
array column, int32 label) and 'binary' (adds a 256-byte payload and a short string), the same
rows for every reader, in one run. Rows:

* floor: numpy permutation + gather + ``torch.from_numpy`` over arrays already in memory;
* petastream ``torch.loader`` with 1 and 2 decode threads, built once and iterated once per
  epoch as a training loop does;
* petastream's compat façade and Petastorm's converter: the same script
  (``benchmarks/peers/petastorm_epoch.py``), Petastorm's in its own env;
* Mosaic Streaming's ``StreamingDataset`` + ``DataLoader`` over the same MDS files, in its env.

The floor and the in-process rows run in interleaved rounds (:func:`benchmarks.harness.interleaved`:
a warm-up round, then ``--rounds``, each one epoch of the floor then of each row); a row reports
its median rows/s and the median and min-max of its per-round ratio to the floor. Peers run as
subprocesses in ``.bench/envs/<peer>`` (``--build-peers`` builds them), ``--peer-repeat`` epochs
each (default: as many as the rounds), the floor timed just before and after each subprocess;
a peer without its env is reported 'unavailable: <why>'.
"""

from __future__ import annotations

import argparse
import functools

import numpy as np

from benchmarks import peer_envs
from benchmarks.harness import Result, interleaved, peer_result, wall_of
from benchmarks.workloads import WORKLOADS, make_data, prepare
from petastream import bench

NAME = "torch_epoch"
BATCH = 1024
FLOOR = "floor: numpy perm+gather+from_numpy"

__all__ = ["NAME", "FLOOR", "make_data", "run"]


def floor(data: dict[str, np.ndarray]) -> tuple[int, float]:
    return bench.torch_floor(data, BATCH)  # shared with `petastream bench`


def petastream_epochs(url: str, workers: int) -> bench.EpochFn:
    return bench.torch_epochs(url, BATCH, workers)  # one loader, iterated once per epoch


def run(args: argparse.Namespace) -> list[Result]:
    results = []
    n = args.rows
    for workload in WORKLOADS:
        data = make_data(workload, n)
        paths = prepare(workload, n, data)
        bench = f"{NAME}/{workload}"
        base = functools.partial(floor, data)
        variants = {f"petastream loader, {workers} thread(s)": petastream_epochs(paths["mds"], workers)
                    for workers in (1, 2)}
        results += interleaved(bench, n, (FLOOR, base), variants, getattr(args, "rounds", None) or 5)
        del variants  # their loaders: memory the peers need (the floor's columns stay, to bracket them)
        for variant, res, note in peer_envs.converter_epochs("torch", workload, paths, n, args, wall_of(base)):
            results.append(peer_result(bench, n, variant, res, note))
        mosaic = peer_envs.mosaic_epoch(paths, n, args, wall_of(base))
        if mosaic:
            results.append(peer_result(bench, n, *mosaic))
    return results
