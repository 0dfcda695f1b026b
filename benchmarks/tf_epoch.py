"""One shuffled epoch into TensorFlow batches of 1024: petastream vs the floor and Petastorm.

Same workloads and data as :mod:`benchmarks.torch_epoch`. Rows:

* floor: numpy permutation + gather + ``tf.convert_to_tensor`` per column, per batch;
* petastream native ``petastream.tf.dataset(url, batch_size=1024, shuffle=True, seed=1,
  num_epochs=1, num_workers=W)``, built once and iterated eagerly once per epoch (each
  iteration is the next epoch, as under Keras), W = 1 and 2, with
  decode threads (``worker_type="thread"``) and worker processes (``"process"``; the
  default, ``"auto"``, picks processes for W >= 2);
* petastream compat ``make_tf_dataset`` and Petastorm's converter ``make_tf_dataset(
  batch_size=1024, num_epochs=1)``: the same script, Petastorm's in its own env.

Rows are counted via ``id`` to confirm every epoch is complete. Interleaved rounds with the
floor, medians and spread, peers bracketed by the floor: as :mod:`benchmarks.torch_epoch`.
"""

from __future__ import annotations

import argparse
import functools

import numpy as np

from benchmarks import peer_envs
from benchmarks.harness import Result, interleaved, peer_result, wall_of
from benchmarks.workloads import WORKLOADS, make_data, prepare
from petastream import bench

NAME = "tf_epoch"
BATCH = 1024
FLOOR = "floor: numpy perm+gather+convert_to_tensor"


def floor(data: dict[str, np.ndarray]) -> tuple[int, float]:
    return bench.tf_floor(data, BATCH)  # shared with `petastream bench`


def petastream_epochs(url: str, workers: int, worker_type: str = "thread") -> bench.EpochFn:
    return bench.tf_epochs(url, BATCH, workers, worker_type=worker_type)  # one dataset, once per epoch


def run(args: argparse.Namespace) -> list[Result]:
    results = []
    n = args.rows
    for workload in WORKLOADS:
        data = make_data(workload, n)
        paths = prepare(workload, n, data)
        bench = f"{NAME}/{workload}"
        base = functools.partial(floor, data)
        variants = {}
        for worker_type, what in (("thread", "worker(s)"), ("process", "worker process(es)")):
            for workers in (1, 2):
                default = " (default)" if worker_type == ("process" if workers >= 2 else "thread") else ""
                variants[f"petastream tf.dataset, {workers} {what}{default}"] = petastream_epochs(
                    paths["mds"], workers, worker_type)
        results += interleaved(bench, n, (FLOOR, base), variants, getattr(args, "rounds", None) or 5)
        del variants  # their datasets and worker processes: memory the peers need
        for variant, res, note in peer_envs.converter_epochs("tf", workload, paths, n, args, wall_of(base)):
            results.append(peer_result(bench, n, variant, res, note))
    return results
