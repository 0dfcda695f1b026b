"""One shuffled epoch into PyTorch batches of 1024: petastream vs the floor and the peers.

Workloads (issue 4, :mod:`benchmarks.workloads`): 'tabular' (id, 16 float32 features as one
array column, int32 label) and 'binary' (adds a 256-byte payload and a short string), the same
rows for every reader, in one run. Rows:

* floor: numpy permutation + gather + ``torch.from_numpy`` over arrays already in memory;
* petastream ``torch.loader`` with 1 and 2 decode threads, built once and iterated once per
  epoch as a training loop does (warm-up, then best of 3);
* petastream's compat façade and Petastorm's converter: the same script
  (``benchmarks/peers/petastorm_epoch.py``), Petastorm's in its own env;
* Mosaic Streaming's ``StreamingDataset`` + ``DataLoader`` over the same MDS files, in its env.

Peers run as subprocesses in ``.bench/envs/<peer>`` (``--build-peers`` builds them); a peer
without its env is reported 'unavailable: <why>'.
"""

from __future__ import annotations

import argparse
import functools

import numpy as np

from benchmarks import peer_envs
from benchmarks.harness import Floor, Result, epoch_result
from benchmarks.workloads import WORKLOADS, make_data, prepare
from petastream import bench

NAME = "torch_epoch"
BATCH = 1024
FLOOR = "floor: numpy perm+gather+from_numpy"

__all__ = ["NAME", "FLOOR", "make_data", "run"]


def floor(data: dict[str, np.ndarray]) -> float:
    return bench.torch_floor(data, BATCH)[1]  # shared with `petastream bench`


def petastream_epochs(url: str, workers: int) -> bench.EpochFn:
    return bench.torch_epochs(url, BATCH, workers)  # one loader, iterated once per epoch


def peer_result(bench: str, n: int, variant: str, res: dict, note: str) -> Result:
    secs = res.get("seconds") if "error" not in res else None
    return Result(bench, variant, n, secs, note=note, extra=res.get("extra") or {})


def run(args: argparse.Namespace) -> list[Result]:
    results = []
    n = args.rows
    for workload in WORKLOADS:
        data = make_data(workload, n)
        paths = prepare(workload, n, data)
        bench = f"{NAME}/{workload}"
        base = Floor(functools.partial(floor, data))
        rows = []
        for workers in (1, 2):
            rows.append(epoch_result(bench, f"petastream loader, {workers} thread(s)", n,
                                     petastream_epochs(paths["mds"], workers)))
            base.again()
        results += [base.result(bench, FLOOR, n), *rows]
        del data, base  # the columns: memory the peers need
        for variant, res, note in peer_envs.converter_epochs("torch", workload, paths, n, args):
            results.append(peer_result(bench, n, variant, res, note))
        mosaic = peer_envs.mosaic_epoch(paths, n, args)
        if mosaic:
            results.append(peer_result(bench, n, *mosaic))
    return results
