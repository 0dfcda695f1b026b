"""One shuffled epoch into PyTorch batches of 1024: petastream vs the in-memory floor.

Workloads (issue 4): 'tabular' (id, 16 float32 features as one array column, int32 label) and
'binary' (adds a 256-byte payload and a short string). The floor is numpy permutation + gather
+ ``torch.from_numpy`` over arrays already in memory. Peers (Petastorm's converter, Mosaic's
StreamingDataset) need their own environments (pyarrow 14 / numpy < 2 for Petastorm): the
harness reports them as unavailable until those environments exist.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

from benchmarks.harness import Result
from petastream.mds.writer import write_mds

NAME = "torch_epoch"
BATCH = 1024


def make_data(workload: str, n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    data = {"id": np.arange(n, dtype=np.int64), "features": rng.random((n, 16), dtype=np.float32),
            "label": rng.integers(0, 10, n).astype(np.int32)}
    if workload == "binary":
        payload = rng.integers(0, 256, (n, 256), dtype=np.uint8)
        data["payload"] = np.array([row.tobytes() for row in payload], dtype=object)
        data["name"] = np.array([f"item-{i % 1000}" for i in range(n)], dtype=object)
    return data


def floor(data: dict[str, np.ndarray]) -> float:
    import torch

    n = len(data["id"])
    t = time.perf_counter()
    perm = np.random.default_rng(1).permutation(n)
    for i in range(0, n, BATCH):
        ix = perm[i : i + BATCH]
        {k: (torch.from_numpy(v[ix]) if v.dtype != object else list(v[ix])) for k, v in data.items()}
    return time.perf_counter() - t


def petastream_epoch(url: str, workers: int) -> float:
    from petastream.torch import loader

    t = time.perf_counter()
    rows = sum(len(b["id"]) for b in loader(url, BATCH, shuffle=True, seed=1, num_workers=workers))
    return time.perf_counter() - t if rows else float("nan")


def run(args: argparse.Namespace) -> list[Result]:
    results = []
    n = args.rows
    for workload in ("tabular", "binary"):
        data = make_data(workload, n)
        url = os.path.join(tempfile.mkdtemp(prefix="petastream-bench-"), workload)
        write_mds(data, url, compression=None)
        bench = f"{NAME}/{workload}"
        results.append(Result(bench, "floor: numpy perm+gather+from_numpy", n, min(floor(data) for _ in range(3))))
        for workers in (1, 2):
            petastream_epoch(url, workers)  # warm the page cache
            best = min(petastream_epoch(url, workers) for _ in range(3))
            results.append(Result(bench, f"petastream loader, {workers} thread(s)", n, best))
        for peer in ("petastorm make_torch_dataloader", "mosaic StreamingDataset"):
            results.append(Result(bench, peer, n, None, note="unavailable: needs its own environment"))
    return results
