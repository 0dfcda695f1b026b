"""``petastream bench URL``: how fast is the data path on this machine?

Times shuffled epochs of the native loaders (``petastream.torch.loader`` and
``petastream.tf.dataset``) over any MDS dataset (ours or Mosaic's, local or remote), next to
the in-memory floor: the same rows read once into memory (``petastream.open(url).read(ids)``),
then batched with a random permutation and handed to the framework (``torch.from_numpy`` /
``tf.convert_to_tensor``) — what a loader would cost if reading and decoding were free.
A framework that is not installed gets a row saying so, not an error.

Each variant: one loader (or ``tf.data.Dataset``) iterated once per epoch, as a training loop
does; one warm-up epoch (it builds the loader and fills the local shard cache of a remote or
compressed dataset), then the best of ``--repeat`` epochs. An epoch that does not deliver every row is
reported, never timed. MB/s counts decoded bytes (numeric columns' ``nbytes``, str/bytes
lengths). The output ends with the versions in use, so it can be pasted into a bug report.
``benchmarks/`` (``make bench``) uses the same functions beside Petastorm and Mosaic.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = ["Row", "read_floor_data", "torch_floor", "tf_floor", "torch_epochs", "tf_epochs",
           "best_epoch", "measure", "add_bench_arguments", "run_bench"]

EpochFn = Callable[[], tuple[int, float]]


@dataclass
class Row:
    variant: str
    rows: int
    seconds: float | None  # None: not timed (see note)
    note: str = ""
    floor: bool = False

    def rows_per_s(self) -> float | None:
        return self.rows / self.seconds if self.seconds else None


# -- the measured paths (shared with benchmarks/) --------------------------------------------

def read_floor_data(url: str, rows: int | None = None) -> dict[str, np.ndarray]:
    """The first ``rows`` rows (default: all) of every column, in memory."""
    import petastream

    ds = petastream.open(url)
    n = len(ds) if rows is None else min(rows, len(ds))
    return ds.read(np.arange(n))


def decoded_bytes(data: dict[str, np.ndarray]) -> int:
    total = 0
    for col in data.values():
        if col.dtype == object:
            total += sum(len(v) if isinstance(v, (str, bytes)) else getattr(v, "nbytes", 8)
                         for v in col)
        else:
            total += col.nbytes
    return total


def _floor(data: dict[str, np.ndarray], batch: int, seed: int, convert: Callable[[np.ndarray], Any]
           ) -> tuple[int, float]:
    n = len(next(iter(data.values())))
    t = time.perf_counter()
    perm = np.random.default_rng(seed).permutation(n)
    for i in range(0, n, batch):
        ix = perm[i : i + batch]
        {k: convert(v[ix]) for k, v in data.items()}
    return n, time.perf_counter() - t


def torch_floor(data: dict[str, np.ndarray], batch: int = 1024, seed: int = 1) -> tuple[int, float]:
    """Permutation + gather + ``torch.from_numpy`` (lists for str/bytes) over in-memory columns."""
    import torch

    return _floor(data, batch, seed, lambda v: torch.from_numpy(v) if v.dtype != object else list(v))


def tf_floor(data: dict[str, np.ndarray], batch: int = 1024, seed: int = 1) -> tuple[int, float]:
    """Permutation + gather + ``tf.convert_to_tensor`` over in-memory columns."""
    from petastream._quiet import import_tensorflow

    tf = import_tensorflow()  # without its start-up lines
    return _floor(data, batch, seed, tf.convert_to_tensor)


def _count(batches: Iterable[Any], limit: int | None, size: Callable[[Any], int]) -> int:
    rows = 0
    for b in batches:
        rows += size(b)
        if limit is not None and rows >= limit:
            break
    return rows


def _batch_rows(batch: dict[str, Any]) -> int:
    col = next(iter(batch.values()))
    return int(col.shape[0]) if hasattr(col, "shape") else len(col)


def torch_epochs(url: str, batch: int = 1024, workers: int = 1, seed: int = 1,
                 limit: int | None = None) -> EpochFn:
    """Shuffled epochs of one ``petastream.torch.loader`` (the first ``limit`` rows of each):
    each call iterates it once, as a training loop does per epoch; the first call builds it."""
    def build() -> Any:
        from petastream.torch import loader

        return loader(url, batch, shuffle=True, seed=seed, num_workers=workers, rank=0, world_size=1)

    return _epochs(build, limit)


def tf_epochs(url: str, batch: int = 1024, workers: int = 1, seed: int = 1,
              limit: int | None = None, worker_type: str = "auto") -> EpochFn:
    """Shuffled epochs of one ``petastream.tf.dataset`` (each iteration of it is the next epoch),
    iterated eagerly once per call, as Keras does per epoch; the first call builds it."""
    def build() -> Any:
        from petastream._quiet import import_tensorflow

        import_tensorflow()
        import petastream.tf as ptf

        return ptf.dataset(url, batch, shuffle=True, seed=seed, num_epochs=1, num_workers=workers,
                           rank=0, world_size=1, worker_type=worker_type)

    return _epochs(build, limit)


def _epochs(build: Callable[[], Any], limit: int | None) -> EpochFn:
    built: list[Any] = []

    def epoch() -> tuple[int, float]:
        t = time.perf_counter()
        if not built:
            built.append(build())
        rows = _count(built[0], limit, _batch_rows)
        return rows, time.perf_counter() - t

    return epoch


def best_epoch(variant: str, n: int, epoch: EpochFn, repeat: int = 3, floor: bool = False) -> Row:
    """One warm-up epoch, then the best of ``repeat``; an epoch short of ``n`` rows is reported."""
    from petastream._extras import EXTRAS

    try:
        epoch()
        runs = [epoch() for _ in range(repeat)]
    except ImportError as e:
        top = (e.name or "").split(".")[0]
        what, how = EXTRAS.get(top, (e.name or str(e), "install it"))
        return Row(variant, n, None, f"skipped: {what} is not installed ({how})", floor)
    except Exception as e:  # noqa: BLE001 - a benchmark reports, it does not stop
        return Row(variant, n, None, f"failed: {type(e).__name__}: {e}"[:300], floor)
    good = [sec for rows, sec in runs if rows == n]
    bad = [rows for rows, _ in runs if rows != n]
    note = f"INCOMPLETE epochs: {bad} rows, expected {n}" if bad else ""
    return Row(variant, n, min(good) if good else None, note, floor)


# -- the command ---------------------------------------------------------------------------------

def _workers(value: str) -> list[int]:
    try:
        out = sorted({int(v) for v in value.split(",") if v.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers like '1,4', got {value!r}") from None
    if not out or out[0] < 1:
        raise argparse.ArgumentTypeError(f"worker counts must be >= 1, got {value!r}")
    return out


def _positive(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value!r}")
    return n


def default_workers() -> str:
    cpus = os.cpu_count() or 1
    return ",".join(str(w) for w in sorted({1, min(cpus, 8)}))


def add_bench_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (__doc__ or "").split("\n\n")[1].replace("``", "'")
    p.add_argument("url", help="MDS dataset: path or fsspec URL (ours or Mosaic-written)")
    p.add_argument("--batch-size", type=_positive, default=1024, help="rows per batch (1024)")
    p.add_argument("--workers", type=_workers, default=default_workers(),
                   help=f"decode threads to try, comma-separated (default {default_workers()})")
    p.add_argument("--frameworks", default="torch,tf",
                   help="which loaders: 'torch', 'tf' or 'torch,tf' (default)")
    p.add_argument("--rows", type=_positive, default=None,
                   help="time the first N rows of each epoch (default: the whole dataset)")
    p.add_argument("--repeat", type=_positive, default=3, help="timed epochs, best kept (3)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")


def measure(url: str, *, batch: int = 1024, workers: Iterable[int] = (1,),
            frameworks: Iterable[str] = ("torch", "tf"), rows: int | None = None, repeat: int = 3,
            emit: Callable[[Row, float], None] = lambda row, per_row: None) -> dict[str, Any]:
    """Measure and return ``{"url", "rows", "bytes_per_row", "results", "versions"}``;
    ``emit(row, bytes_per_row)`` is called with each row as soon as it is measured."""
    data = read_floor_data(url, rows)
    n = len(next(iter(data.values()))) if data else 0
    per_row = decoded_bytes(data) / n if n else 0.0
    results: list[Row] = []

    def add(row: Row) -> None:
        results.append(row)
        emit(row, per_row)

    plans = {"torch": ("floor: in memory -> torch.from_numpy", torch_floor,
                       "petastream.torch.loader", torch_epochs, "thread"),
             "tf": ("floor: in memory -> tf.convert_to_tensor", tf_floor,
                    "petastream.tf.dataset", tf_epochs, "worker")}
    for fw in frameworks:
        floor_name, floor_fn, name, epoch_fn, unit = plans[fw]
        floor = best_epoch(floor_name, n, functools.partial(floor_fn, data, batch), repeat, floor=True)
        add(floor)
        if floor.note.startswith("skipped"):
            add(Row(name, n, None, "skipped: see above"))
            continue
        for w in workers:
            add(best_epoch(f"{name}, {w} {unit}{'s' if w > 1 else ''}", n,
                           epoch_fn(url, batch, w, limit=rows), repeat))
    return {"url": url, "rows": n, "bytes_per_row": per_row, "batch_size": batch,
            "results": [asdict(r) | {"rows_per_s": r.rows_per_s()} for r in results],
            "versions": versions()}


def versions() -> dict[str, str]:
    from importlib import metadata

    out = {"python": platform.python_version(), "machine": f"{platform.machine()}, "
           f"{os.cpu_count()} CPUs"}
    for dist in ("petastream", "numpy", "pyarrow", "torch", "tensorflow", "tensorflow-cpu"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def _line(row: Row, per_row: float, floor: Row | None) -> str:
    rps = row.rows_per_s()
    if rps is None:
        return f"  {row.variant:<44} {'-':>12} {'-':>9} {'':>8}  {row.note}"
    base = floor.rows_per_s() if floor else None
    ratio = f"{rps / base:.0%}" if base else ""
    return f"  {row.variant:<44} {rps:>12,.0f} {rps * per_row / 1e6:>9,.1f} {ratio:>8}  {row.note}"


def run_bench(args: argparse.Namespace) -> int:
    from petastream.errors import PetastreamError

    frameworks = [f.strip() for f in args.frameworks.split(",") if f.strip()]
    bad = sorted(set(frameworks) - {"torch", "tf"})
    if bad or not frameworks:
        print(f"petastream bench: --frameworks {args.frameworks!r}: use 'torch', 'tf' or "
              "'torch,tf'", file=sys.stderr)
        return 2
    try:
        import petastream

        ds = petastream.open(args.url)
    except (PetastreamError, FileNotFoundError) as e:
        print(f"petastream bench: {e}", file=sys.stderr)
        return 2
    n = len(ds) if args.rows is None else min(args.rows, len(ds))
    cols = ", ".join(f"{k} {v}" for k, v in ds.columns.items())
    floors: list[Row] = []
    if not args.json:
        print(f"{args.url}: {n:,} of {len(ds):,} rows; columns: {cols}")
        print(f"shuffled epochs, batches of {args.batch_size}; best of {args.repeat} after a "
              f"warm-up epoch\n  {'variant':<44} {'rows/s':>12} {'MB/s':>9} {'of floor':>8}")

    def emit(row: Row, per_row: float) -> None:
        if row.floor:
            floors.append(row)
        if not args.json:
            print(_line(row, per_row, floors[-1] if floors else None), flush=True)

    result = measure(args.url, batch=args.batch_size, workers=args.workers,
                       frameworks=frameworks, rows=args.rows, repeat=args.repeat, emit=emit)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print("MB/s: decoded bytes. " + ", ".join(f"{k} {v}" for k, v in result["versions"].items()))
    return 0
