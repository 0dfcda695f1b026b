"""One shuffled epoch into PyTorch batches of 1024 over a Parquet directory, vs the in-memory floor.

Workloads: 'tabular' and 'binary' (:mod:`benchmarks.workloads`), the Parquet copy that
``prepare`` writes for Spark (one file, row groups of 65,536 rows, ``features`` as
``list<float>``, read as fixed-size with ``array_lengths={"features": 16}``). Rows:

* floor: numpy permutation + gather + ``torch.from_numpy`` over arrays in memory
  (:func:`petastream.bench.torch_floor`, as ``torch_epoch``);
* ``ParquetSource`` + ``petastream.torch.loader`` (1 and 2 decode threads): one loader built
  once, iterated once per epoch, as ``torch_epoch`` measures MDS;
* ``ParquetSource`` decode path, one thread: the loader's own plan (``StreamPlanner``, default
  block and window), each chunk read with ``pipeline.decode.read_chunk`` after announcing the
  next chunks' shards to the source, batches sliced and turned into tensors: what a decode
  worker does, without the loader around it;
* the same decode path, and ``torch.loader`` with 2 threads, over the MDS copy of the same
  rows, for reference;
* Petastorm's ``make_batch_reader`` + ``BatchedDataLoader`` in its env, and the same script
  with petastream.compat's (``benchmarks/peers/petastorm_reader_epoch.py``; ``--peers``).

In-process rows run in interleaved rounds with the floor, peers bracketed by it, medians with
their spread: as :mod:`benchmarks.torch_epoch`.

``python -m benchmarks.parquet_epoch --rows 200000 [--rounds 5]``.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks import peer_envs
from benchmarks.harness import Result, interleaved, peer_result, report, save, wall_of
from benchmarks.torch_epoch import floor as torch_floor
from benchmarks.workloads import WORKLOADS, make_data, prepare
from petastream import bench

NAME = "parquet_epoch"
BATCH = 1024
FLOOR = "floor: numpy perm+gather+from_numpy"
OPTIONS = {"array_lengths": {"features": 16}}

__all__ = ["NAME", "FLOOR", "run"]


def _tensors(batch: dict[str, Any]) -> dict[str, Any]:
    import torch

    # Packed-record views of MDS columns are strided: one contiguous copy, as the torch adapter does.
    return {k: torch.from_numpy(np.ascontiguousarray(v)) if v.dtype != object else list(v)
            for k, v in batch.items()}


def decode_epochs(open_source: Callable[[], Any], seed: int = 1) -> Callable[[], tuple[int, float]]:
    """Epochs of the decode path (see the module doc); the source is opened by the first call."""
    from petastream.pipeline.decode import read_chunk, slice_columns
    from petastream.stream import StreamPlanner

    state: dict[str, Any] = {}

    def epoch() -> tuple[int, float]:
        t = time.perf_counter()
        if not state:
            state["src"] = src = open_source()
            state["planner"] = StreamPlanner(src.shard_sizes, BATCH, shuffle=True, seed=seed)
        src, planner = state["src"], state["planner"]
        chunks = list(planner.begin_pass().chunks(max_samples=1 << 16, first_samples=1 << 13))
        rows = 0
        for k, chunk in enumerate(chunks):
            src.prefetch([s for c in chunks[k:k + 3] for s in c.shards_in_need_order()])
            block = read_chunk(src, chunk)
            for i in range(chunk.num_batches):
                a, b = int(chunk.bounds[i]), int(chunk.bounds[i + 1])
                _tensors(slice_columns(block, a, b))
                rows += b - a
            planner.advance(chunk.num_batches)
        src.close()
        return rows, time.perf_counter() - t

    return epoch


def loader_epochs(source: Callable[[], Any], workers: int) -> Callable[[], tuple[int, float]]:
    def build() -> Any:
        from petastream.torch import loader

        return loader(source(), BATCH, shuffle=True, seed=1, num_workers=workers, rank=0, world_size=1)

    return bench.epochs(build)


def run(args: argparse.Namespace) -> list[Result]:
    from petastream.mds.dataset import MDSDataset
    from petastream.parquet import ParquetSource

    results = []
    n = args.rows
    rounds = getattr(args, "rounds", None) or 5
    for workload in WORKLOADS:
        data = make_data(workload, n)
        paths = prepare(workload, n, data)
        name = f"{NAME}/{workload}"
        base = functools.partial(torch_floor, data)  # the torch epoch's floor, same rows
        parquet = functools.partial(ParquetSource, paths["parquet"], **OPTIONS)
        mds = functools.partial(MDSDataset, paths["mds"])
        cache = tempfile.mkdtemp(prefix="petastream-decoded-")
        decoded = functools.partial(ParquetSource, paths["parquet"], cache_decoded=True, cache_dir=cache, **OPTIONS)
        variants = {
            **{f"ParquetSource + torch.loader, {w} thread(s)": loader_epochs(parquet, w) for w in (1, 2)},
            "ParquetSource cache_decoded=True + torch.loader, 2 threads": loader_epochs(decoded, 2),
            "ParquetSource decode path, 1 thread": decode_epochs(parquet),
            "MDS decode path, 1 thread (reference)": decode_epochs(mds),
            "MDS + torch.loader, 2 threads (reference)": loader_epochs(mds, 2),
        }
        try:
            results += interleaved(name, n, (FLOOR, base), variants, rounds)
        finally:
            del variants
            shutil.rmtree(cache, ignore_errors=True)
        for variant, res, note in peer_envs.reader_epochs(paths, n, args, floor=wall_of(base)):
            results.append(peer_result(name, n, variant, res, note))
    return results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--peers", nargs="*", default=None, help="petastorm, compat (default: both)")
    p.add_argument("--rounds", type=int, default=5, help="interleaved timed rounds after a warm-up (medians)")
    p.add_argument("--peer-repeat", type=int, default=None, help="timed epochs per peer run (default: --rounds)")
    p.add_argument("--peer-timeout", type=float, default=1800.0)
    args = p.parse_args()
    results = run(args)
    print(report(results, FLOOR))
    print(f"saved {save(NAME, results)}")


if __name__ == "__main__":
    main()
