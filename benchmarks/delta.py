"""Delta tables (issue #35): opening a table of many files, and a shuffled epoch vs the floor.

(a) **open**: a table of ``--files`` data files (10,000; one ``write_deltalake`` of as many
partitions, then ``create_checkpoint()``), opened with ``DeltaSource`` and planned for rank 0
of 8 (``StreamPlanner``, shuffled, first chunks of the epoch laid out): the default, which
plans files from the log's row counts (one footer read), against ``fetch="row_group"``, which
reads every file's footer at open (the plan of a Parquet directory). Wall and CPU seconds
(CPU time: what a loaded machine does not inflate as much), best of ``--repeat``.

(b) **epoch**: a table of ``--rows`` rows ('tabular' and 'binary' rows of
:mod:`benchmarks.workloads`) written in 4 versions (appends, row groups of 65,536 rows), then
deletion vectors (tests/delta/dv_writer.py) deleting 1% of every file's rows: one shuffled
epoch into PyTorch batches of 1024 through ``DeltaSource`` + ``petastream.torch.loader`` (1
and 2 decode threads), vs the in-memory floor over the same served rows
(:func:`petastream.bench.torch_floor`), as ``benchmarks/parquet_epoch.py`` measures Parquet.

``python -m benchmarks.delta [--files 10000] [--rows 1000000] [--parts open epoch]``.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.harness import Floor, Result, epoch_result, report, save
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


def _timed(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """Best wall and best CPU seconds of ``repeat`` calls (after one warm-up)."""
    fn()
    wall, cpu = [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return min(wall), min(cpu)


def open_and_plan(path: str, **options: Any) -> int:
    from petastream.delta import DeltaSource
    from petastream.stream import StreamPlanner

    src = DeltaSource(path, **options)
    planner = StreamPlanner(src.shard_sizes, BATCH, shuffle=True, seed=1, rank=0, world_size=8)
    chunks = planner.begin_pass().chunks(max_samples=1 << 16, first_samples=1 << 13)
    next(iter(chunks))
    src.close()
    return len(src)


def run_open(args: argparse.Namespace) -> list[Result]:
    path = many_files_table(args.files)
    name = f"{NAME}/open-{args.files}-files"
    out = []
    for variant, options in (("from the log (default)", {}), ("every footer (fetch='row_group')",
                                                              {"fetch": "row_group"})):
        wall, cpu = _timed(functools.partial(open_and_plan, path, **options), args.repeat)
        out.append(Result(name, f"open + plan rank 0/8, {variant}", args.files * 20, wall,
                          note=f"cpu {cpu:.2f} s, wall {wall:.2f} s", extra={"cpu_s": cpu}))
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


def run_epoch(args: argparse.Namespace) -> list[Result]:
    from petastream.delta import DeltaSource

    results = []
    for workload in WORKLOADS:
        path, served = epoch_table(workload, args.rows)
        n = len(served["id"])
        name = f"{NAME}/{workload}"
        base = Floor(functools.partial(torch_floor, served))
        source = functools.partial(DeltaSource, path, **OPTIONS)
        rows = []
        for workers in (1, 2):
            rows.append(epoch_result(name, f"DeltaSource + torch.loader, {workers} thread(s)", n,
                                     loader_epochs(source, workers)))
            base.again()
        results += [base.result(name, FLOOR, n), *rows]
    return results


def run(args: argparse.Namespace) -> list[Result]:
    for name, default in (("files", 10_000), ("repeat", 3), ("parts", ["open", "epoch"])):
        if not hasattr(args, name):  # called by benchmarks.run, whose arguments lack these
            setattr(args, name, default)
    return (run_open(args) if "open" in args.parts else []) + (run_epoch(args) if "epoch" in args.parts else [])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--files", type=int, default=10_000)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--parts", nargs="*", default=["open", "epoch"])
    args = p.parse_args()
    results = run(args)
    print(report(results, FLOOR))
    print(f"saved {save(NAME, results)}")


if __name__ == "__main__":
    main()
