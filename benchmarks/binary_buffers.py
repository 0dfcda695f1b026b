"""'binary' epochs into PyTorch with str/bytes columns as objects vs as JaggedBytes, beside the floor.

One shuffled epoch of batches of 1024 over the 'binary' workload (:mod:`benchmarks.workloads`:
id, 16 float32 features, label, a 256-byte payload, a short string), from MDS and from
Parquet, with ``petastream.torch.loader`` (``--workers`` decode threads) handing the payload
and the string out as ``strings="objects"`` (lists of ``bytes``/``str``, the default) and as
``strings="jagged"`` (values + offsets tensors). The floor is ``petastream.bench.torch_floor``
(permutation + gather + ``torch.from_numpy`` over columns in memory; lists for str/bytes): the
README's.

Each loader is built once and warmed by one epoch; then every round runs one epoch of each row
in a rotating order (interleaved, so a slow spell of a loaded machine hits them all alike).
Reported per row: the median rows/s with min-max over the rounds, the median of the per-round
ratios to that round's floor, and CPU time per row (``time.process_time``, all threads) beside
wall time per row.

    PETASTREAM_BENCH_DATA=/work/main/.bench/data python -m benchmarks.binary_buffers --rows 200000
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from benchmarks.workloads import make_data, prepare
from petastream import bench

BATCH = 1024


def _loader_epoch(source: Callable[[], Any], workers: int, strings: str) -> Callable[[], int]:
    from petastream.torch import loader

    ld = loader(source(), BATCH, shuffle=True, seed=1, num_workers=workers, rank=0, world_size=1,
                strings=strings)

    def epoch() -> int:
        return sum(len(b["id"]) for b in ld)

    return epoch


def _timed(fn: Callable[[], int]) -> tuple[int, float, float]:
    w, c = time.perf_counter(), time.process_time()
    rows = fn()
    return rows, time.perf_counter() - w, time.process_time() - c


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--formats", default="mds,parquet")
    args = p.parse_args(argv)
    n = args.rows
    data = make_data("binary", n)
    paths = prepare("binary", n, data)
    rows: dict[str, Callable[[], int]] = {"floor": lambda: bench.torch_floor(data, BATCH)[0]}
    for fmt in args.formats.split(","):
        if fmt == "mds":
            def src() -> Any:
                return paths["mds"]
        else:
            from petastream.parquet import open_parquet

            def src() -> Any:
                return open_parquet(paths["parquet"], array_lengths={"features": 16})
        for strings in ("objects", "jagged"):
            rows[f"{fmt} {strings}"] = _loader_epoch(src, args.workers, strings)
    for fn in rows.values():  # warm-up: page cache, read-ahead threads, allocator
        fn()
    names = list(rows)
    results: dict[str, list[tuple[int, float, float]]] = {k: [] for k in names}
    for r in range(args.rounds):
        for k in names[r % len(names):] + names[:r % len(names)]:
            results[k].append(_timed(rows[k]))
    floor_rate = [rw / w for rw, w, _ in results["floor"]]
    print(f"'binary' {n} rows, batch {BATCH}, {args.workers} thread(s), {args.rounds} interleaved rounds "
          "(medians, min-max)")
    print(f"{'row':<18} {'rows/s':>10} {'min-max':>19} {'x floor':>8} {'wall us/row':>12} {'cpu us/row':>11}")
    for k in names:
        res = results[k]
        rates = [rw / w for rw, w, _ in res]
        ratios = [rate / f for rate, f in zip(rates, floor_rate)]
        wall = statistics.median(w / rw * 1e6 for rw, w, _ in res)
        cpu = statistics.median(c / rw * 1e6 for rw, _, c in res)
        if any(rw != n for rw, _, _ in res):
            print(f"{k}: epochs of {sorted({rw for rw, _, _ in res})} rows, expected {n}")
        print(f"{k:<18} {statistics.median(rates):>10,.0f} {min(rates):>9,.0f}-{max(rates):<9,.0f} "
              f"{statistics.median(ratios):>8.2f} {wall:>12.2f} {cpu:>11.2f}")


if __name__ == "__main__":
    main()
