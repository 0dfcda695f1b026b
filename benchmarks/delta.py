"""Delta tables (issue #35): opening a table of many files, and a shuffled epoch vs the floor.

Every row is the **median of ``--rounds`` interleaved rounds** (each round times every
variant once, in turn, after one warm-up of each), with the spread (min-max) in its note: on
a shared machine whose speed drifts, variants timed in the same rounds are compared under the
same conditions. The load average is recorded with the results.

(a) **open**: a table of ``--files`` data files (10,000; one ``write_deltalake`` of as many
partitions, then ``create_checkpoint()``), opened with ``DeltaSource`` and planned for rank 0
of 8 (``StreamPlanner``, shuffled, first chunks of the epoch laid out): in a fresh process
(imports excluded: what a training script's first open costs), in a warm process (the
default, which plans files from the log's row counts: one footer read), its share that is the
log (``delta.log.open_snapshot``: deltalake's log replay and the add actions), and with
``fetch="row_group"``, which reads every file's footer at open (the plan of a Parquet
directory). Wall and CPU seconds (CPU: what a loaded machine inflates less).

(b) **epoch**: a table of ``--rows`` rows ('tabular' and 'binary' rows of
:mod:`benchmarks.workloads`) written in 4 versions (appends, row groups of 65,536 rows), then
deletion vectors (tests/delta/dv_writer.py) deleting 1% of every file's rows: one shuffled
epoch into PyTorch batches of 1024 through ``DeltaSource`` + ``petastream.torch.loader`` (1
and 2 decode threads); the same loader over a plain ``ParquetSource`` of the same data files
(no log, no deletion vectors: every row of the files); the in-memory floor over the rows the
table serves (:func:`petastream.bench.torch_floor`). A row's "vs floor" is the ratio of the
medians; its note gives the spread of each round's ratio to the floor timed in that round.

``python -m benchmarks.delta [--files 10000] [--rows 1000000] [--rounds 5] [--parts open epoch]``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.harness import Result, report, save
from benchmarks.parquet_epoch import loader_epochs
from benchmarks.torch_epoch import floor as torch_floor
from benchmarks.workloads import DATA, PARQUET_ROW_GROUP, WORKLOADS, _arrow_table, make_data

NAME = "delta"
BATCH = 1024
FLOOR = "floor: numpy perm+gather+from_numpy"
OPTIONS = {"array_lengths": {"features": 16}}
VERSIONS = 4
DELETED = 0.01  # of each file's rows, by deletion vectors

__all__ = ["NAME", "FLOOR", "run"]


def many_files_table(files: int) -> str:
    """A table of ``files`` small data files and a checkpoint (written once, then reused)."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    path = DATA / f"delta-{files}-files"
    if (path / ".done").exists():
        return str(path)
    shutil.rmtree(path, ignore_errors=True)
    per = 20
    n = files * per
    table = pa.table({"part": np.repeat(np.arange(files, dtype=np.int32), per), "id": np.arange(n),
                      "x": np.random.default_rng(0).random(n)})
    write_deltalake(str(path), table, partition_by=["part"])
    DeltaTable(str(path)).create_checkpoint()
    (path / ".done").touch()
    return str(path)


def _interleaved(variants: dict[str, Callable[[], Any]], rounds: int) -> dict[str, list[Any]]:
    """Each variant called once (warm-up), then ``rounds`` rounds of one call of each, in turn."""
    for fn in variants.values():
        fn()
    out: dict[str, list[Any]] = {k: [] for k in variants}
    for _ in range(rounds):
        for k, fn in variants.items():
            out[k].append(fn())
    return out


def _spread(values: list[float], unit: str = "s") -> str:
    return f"median of {len(values)}, {min(values):.3g}-{max(values):.3g} {unit}"


def _clock(fn: Callable[[], Any]) -> Callable[[], tuple[float, float]]:
    def timed() -> tuple[float, float]:
        t, c = time.perf_counter(), time.process_time()
        fn()
        return time.perf_counter() - t, time.process_time() - c

    return timed


def planned(path: str, **options: Any) -> Any:
    """The table opened, and planned for rank 0 of 8 as a loader does (first chunks laid out)."""
    from petastream.delta import DeltaSource
    from petastream.stream import StreamPlanner

    src = DeltaSource(path, **options)
    planner = StreamPlanner(src.shard_sizes, BATCH, shuffle=True, seed=1, rank=0, world_size=8)
    chunks = planner.begin_pass().chunks(max_samples=1 << 16, first_samples=1 << 13)
    next(iter(chunks))
    return src


def open_and_plan(path: str, **options: Any) -> int:
    src = planned(path, **options)
    src.close()
    return len(src)


def the_log(path: str) -> int:
    from petastream.delta.log import open_snapshot
    from petastream.storage.location import resolve

    return len(open_snapshot(resolve(path)).files)


_COLD = """
import json, sys, time
import numpy as np
t = time.perf_counter()
from benchmarks.delta import planned
import deltalake, petastream.delta, petastream.stream, pyarrow
i = time.perf_counter() - t
t, c = time.perf_counter(), time.process_time()
src = planned(sys.argv[1])
wall, cpu = time.perf_counter() - t, time.process_time() - c
t = time.perf_counter()
src.read(np.arange(1024))
print(json.dumps([wall, cpu, i, time.perf_counter() - t]))
"""

#: Per fresh-process open: seconds of its imports and of reading 1024 rows after it (pyarrow's
#: first conversion imports pandas then, about a second on a slow machine).
COLD_EXTRA: dict[str, list[float]] = {"imports_s": [], "first_read_s": []}


def cold_open(path: str) -> tuple[float, float]:
    """Open + plan in a fresh interpreter (its imports timed apart, not counted; then a first
    read of 1024 rows, timed apart too: :data:`COLD_EXTRA`)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", _COLD, path], capture_output=True, text=True, check=True,
                         env=env, cwd=root)
    wall, cpu, imports, first = json.loads(out.stdout.strip().splitlines()[-1])
    COLD_EXTRA["imports_s"].append(imports)
    COLD_EXTRA["first_read_s"].append(first)
    return wall, cpu


def run_open(args: argparse.Namespace) -> list[Result]:
    path = many_files_table(args.files)
    name = f"{NAME}/open-{args.files}-files"
    variants: dict[str, Callable[[], tuple[float, float]]] = {
        "open + plan rank 0/8, fresh process (imports not counted)": functools.partial(cold_open, path),
        "open + plan rank 0/8, from the log (default)": _clock(functools.partial(open_and_plan, path)),
        "of which the log (deltalake replay + add actions)": _clock(functools.partial(the_log, path)),
        "open + plan rank 0/8, every footer (fetch='row_group')":
            _clock(functools.partial(open_and_plan, path, fetch="row_group")),
    }
    out = []
    for variant, times in _interleaved(variants, args.rounds).items():
        wall, cpu = [w for w, _ in times], [c for _, c in times]
        note = (f"wall {statistics.median(wall):.2f} s ({_spread(wall)}), "
                f"cpu {statistics.median(cpu):.2f} s ({_spread(cpu)})")
        extra: dict[str, Any] = {"wall_s": wall, "cpu_s": cpu}
        if variant.startswith("open + plan rank 0/8, fresh"):
            extra.update(COLD_EXTRA)
            note += (f"; imports {statistics.median(COLD_EXTRA['imports_s']):.2f} s, then a first read of "
                     f"1024 rows {statistics.median(COLD_EXTRA['first_read_s']):.2f} s")
        out.append(Result(name, variant, args.files * 20, statistics.median(wall), note=note, extra=extra))
    return out


def epoch_table(workload: str, n: int) -> tuple[str, dict[str, np.ndarray]]:
    """The workload's rows as a table of :data:`VERSIONS` appends with deletion vectors, and the
    rows it serves (in memory, for the floor)."""
    import pyarrow as pa
    from deltalake import DeltaTable, WriterProperties, write_deltalake
    from tests.delta.dv_writer import delete_rows

    data = make_data(workload, n)
    path = DATA / f"delta-{workload}-{n}"
    bounds = np.linspace(0, n, VERSIONS + 1).astype(int)
    if not (path / ".done").exists():
        shutil.rmtree(path, ignore_errors=True)
        props = WriterProperties(max_row_group_size=PARQUET_ROW_GROUP)
        for a, b in zip(bounds[:-1], bounds[1:]):
            part = {k: v[a:b] for k, v in data.items()}
            write_deltalake(str(path), _arrow_table(part), mode="append", writer_properties=props)
        adds = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True))
        rng = np.random.default_rng(1)
        deleted = {p: sorted(rng.choice(int(r), int(r * DELETED), replace=False).tolist())
                   for p, r in zip(adds.column("path").to_pylist(), adds.column("num_records").to_pylist())}
        delete_rows(str(path), deleted)
        (path / ".done").touch()
    ids = np.sort(_served_ids(str(path)))
    return str(path), {k: v[ids] for k, v in data.items()}


def _served_ids(path: str) -> np.ndarray:
    from petastream.delta import DeltaSource

    src = DeltaSource(path, columns=["id"])
    ids = src.read(np.arange(len(src)), ["id"])["id"]
    src.close()
    return np.asarray(ids)


def _epoch(epochs: Callable[[], tuple[int, float]], expected: int, variant: str) -> float:
    rows, seconds = epochs()
    if rows != expected:  # an epoch short or long is a failure, never a timing
        raise RuntimeError(f"{variant}: an epoch of {rows} rows, expected {expected}")
    return seconds


def run_epoch(args: argparse.Namespace) -> list[Result]:
    import pyarrow as pa
    from deltalake import DeltaTable

    from petastream.delta import DeltaSource
    from petastream.parquet import ParquetSource

    results = []
    for workload in WORKLOADS:
        path, served = epoch_table(workload, args.rows)
        files = [os.path.join(path, p) for p in
                 pa.table(DeltaTable(path).get_add_actions(flatten=True)).column("path").to_pylist()]
        n = len(served["id"])
        name = f"{NAME}/{workload}"
        delta = functools.partial(DeltaSource, path, **OPTIONS)
        plain = functools.partial(ParquetSource, files, **OPTIONS)
        variants: dict[str, tuple[int, Callable[[], float]]] = {FLOOR: (n, functools.partial(torch_floor, served))}
        for workers in (1, 2):
            for label, source, rows in (("DeltaSource", delta, n), ("ParquetSource, the same files", plain, args.rows)):
                variant = f"{label} + torch.loader, {workers} thread(s)"
                variants[variant] = (rows, functools.partial(_epoch, loader_epochs(source, workers), rows, variant))
        times = _interleaved({k: fn for k, (_, fn) in variants.items()}, args.rounds)
        floor = times[FLOOR]
        for variant, (rows, _) in variants.items():
            secs = times[variant]
            if variant == FLOOR:
                note = _spread(secs)
            else:  # each round's rows/s against the floor's rows/s in the same round
                ratios = [(rows / s) / (n / f) for s, f in zip(secs, floor)]
                note = f"{_spread(secs)}; each round vs its floor {min(ratios):.0%}-{max(ratios):.0%}"
            results.append(Result(name, variant, rows, statistics.median(secs), note=note, extra={"seconds": secs}))
    return results


def run(args: argparse.Namespace) -> list[Result]:
    for name, default in (("files", 10_000), ("rounds", 5), ("parts", ["open", "epoch"])):
        if not hasattr(args, name):  # called by benchmarks.run, whose arguments lack these
            setattr(args, name, default)
    return (run_open(args) if "open" in args.parts else []) + (run_epoch(args) if "epoch" in args.parts else [])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--files", type=int, default=10_000)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (medians; >= 3)")
    p.add_argument("--parts", nargs="*", default=["open", "epoch"])
    args = p.parse_args()
    if args.rounds < 3:
        p.error("--rounds: at least 3 (medians and spread)")
    before = os.getloadavg()
    results = run(args)
    load = {"load_before": [round(x, 2) for x in before], "load_after": [round(x, 2) for x in os.getloadavg()]}
    print(report(results, FLOOR))
    print(f"load average (1, 5, 15 min): before {load['load_before']}, after {load['load_after']}")
    print(f"saved {save(NAME, results, meta=load)}")


if __name__ == "__main__":
    main()
