"""``petastream bench URL``: how fast is the data path on this machine?

Times shuffled epochs of the native loaders (``petastream.torch.loader`` and
``petastream.tf.dataset``) over any MDS dataset (ours or Mosaic's, local or remote), next to
the in-memory floor: the same rows read once into memory (``petastream.open(url).read(ids)``),
then batched with a random permutation and handed to the framework (``torch.from_numpy`` /
``tf.convert_to_tensor``) — what a loader would cost if reading and decoding were free.
A framework that is not installed gets a row saying so, not an error.

Per framework, interleaved rounds: one warm-up round (it builds each loader and fills the
local shard cache of a remote or compressed dataset), then ``--rounds`` rounds of one epoch of
the floor and one of each loader, in turn; each loader is built once and iterated once per
epoch, as a training loop does. A row reports its median epoch's rows/s, and its "x floor": the
median over the rounds of its rows/s over the floor's in the same round, with their min-max.
CPU ns/row counts this process and its worker processes. An epoch that does not deliver every
row is reported, never timed. MB/s counts decoded bytes (numeric columns' ``nbytes``, str/bytes
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
from dataclasses import asdict
from typing import Any

import numpy as np

from petastream._cpu_clock import CpuSnapshot, cpu_between, snapshot
from petastream._rounds import Epoch, EpochFn, Timed, failure_note, interleaved, measured

__all__ = ["EpochFn", "Epoch", "Timed", "interleaved", "measured", "failure_note", "CpuSnapshot",
           "snapshot", "cpu_between", "read_floor_data", "decoded_bytes", "torch_floor", "tf_floor",
           "torch_epochs", "tf_epochs", "epochs", "measure", "table", "add_bench_arguments", "run_bench"]


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

    return epochs(build, limit)


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

    return epochs(build, limit)


def epochs(build: Callable[[], Any], limit: int | None = None) -> EpochFn:
    """Epochs of the loader ``build()`` returns (the first ``limit`` rows of each): the first
    call builds it, each call iterates it once, as a training loop does per epoch."""
    built: list[Any] = []

    def epoch() -> tuple[int, float]:
        t = time.perf_counter()
        if not built:
            built.append(build())
        rows = _count(built[0], limit, _batch_rows)
        return rows, time.perf_counter() - t

    return epoch


# -- the command ---------------------------------------------------------------------------------

ROUNDS = 5  # timed rounds by default: a median of 5 and its spread (issue 36's method)


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
    p.description = "\n\n".join((__doc__ or "").split("\n\n")[1:3]).replace("``", "'")  # what, and how
    p.add_argument("url", help="MDS dataset: path or fsspec URL (ours or Mosaic-written)")
    p.add_argument("--batch-size", type=_positive, default=1024, help="rows per batch (1024)")
    p.add_argument("--workers", type=_workers, default=default_workers(),
                   help=f"decode threads to try, comma-separated (default {default_workers()})")
    p.add_argument("--frameworks", default="torch,tf",
                   help="which loaders: 'torch', 'tf' or 'torch,tf' (default)")
    p.add_argument("--rows", type=_positive, default=None,
                   help="time the first N rows of each epoch (default: the whole dataset)")
    # --repeat: the option's name when it kept the best of N epochs; scripts that pass it still run
    p.add_argument("--rounds", "--repeat", dest="rounds", type=_positive, default=ROUNDS,
                   help=f"timed rounds after the warm-up round, medians over them ({ROUNDS})")
    p.add_argument("--json", action="store_true", help="print the results as JSON")


PLANS = {"torch": ("floor: in memory -> torch.from_numpy", torch_floor, "petastream.torch.loader",
                   torch_epochs, "thread"),
         "tf": ("floor: in memory -> tf.convert_to_tensor", tf_floor, "petastream.tf.dataset",
                tf_epochs, "worker")}


def _not_timed(e: Exception) -> str:
    """A row's note when its epoch raised: a framework that is not installed names its extra."""
    from petastream._extras import EXTRAS

    if isinstance(e, ImportError):
        top = (e.name or "").split(".")[0]
        what, how = EXTRAS.get(top, (e.name or str(e), "install it"))
        return f"skipped: {what} is not installed ({how})"
    return failure_note(e)


def measure(url: str, *, batch: int = 1024, workers: Iterable[int] = (1,),
            frameworks: Iterable[str] = ("torch", "tf"), rows: int | None = None, rounds: int = ROUNDS,
            emit: Callable[[list[Timed], float], None] = lambda group, per_row: None) -> dict[str, Any]:
    """Measure and return ``{"url", "rows", "bytes_per_row", "batch_size", "rounds", "results",
    "versions"}``. Per framework, the floor and a loader per worker count in interleaved rounds
    (:func:`interleaved`); ``emit(group, bytes_per_row)`` is called with each framework's rows
    (its floor first) as soon as its rounds are done."""
    data = read_floor_data(url, rows)
    n = len(next(iter(data.values()))) if data else 0
    per_row = decoded_bytes(data) / n if n else 0.0
    results: list[dict[str, Any]] = []
    for fw in frameworks:
        floor_name, floor_fn, name, epoch_fn, unit = PLANS[fw]
        variants = {f"{name}, {w} {unit}{'s' if w > 1 else ''}": epoch_fn(url, batch, w, limit=rows)
                    for w in workers}
        try:
            group = interleaved(n, (floor_name, functools.partial(floor_fn, data, batch)), variants,
                                rounds, describe=_not_timed)
        except Exception as e:  # noqa: BLE001 - the floor raised (its framework is missing): a row says so
            note = _not_timed(e)
            group = [Timed(floor_name, n, note=note),
                     Timed(name, n, note="skipped: see above" if note.startswith("skipped") else note)]
        del variants  # their loaders (worker processes, buffers) go before the next framework's
        emit(group, per_row)
        results += [asdict(t) | {"framework": fw, "floor": i == 0, "rows_per_s": t.rows_per_s,
                                 "ratio": t.ratio, "cpu_ns_per_row": t.cpu_ns_per_row}
                    for i, t in enumerate(group)]
    return {"url": url, "rows": n, "bytes_per_row": per_row, "batch_size": batch, "rounds": rounds,
            "results": results, "versions": versions()}


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


HEADER = (f"  {'variant':<44} {'rows/s':>12} {'MB/s':>9} {'x floor':>7} {'(min-max)':>11} "
          f"{'CPU ns/row':>10}  note")


def table(group: list[Timed], per_row: float) -> list[str]:
    """The lines of one framework's rows (``group[0]`` its floor), under :data:`HEADER`: rows/s
    and MB/s of the median epoch, the median per-round ratio to the floor with its (min-max),
    the median epoch's CPU ns per row, and why a row was not timed or not every epoch was."""
    lines = []
    for i, t in enumerate(group):
        notes = [t.note] if t.note else []
        if t.incomplete:
            notes.append(f"INCOMPLETE epochs: {t.incomplete} rows, expected {t.rows}")
        if i == 0 and t.times:
            notes.append(f"epochs {min(t.times):.3g}-{max(t.times):.3g} s")
        rps, ratio, spread = t.rows_per_s, t.ratio, t.spread
        if rps is None or ratio is None or spread is None:
            lines.append(f"  {t.variant:<44} {'-':>12} {'-':>9} {'':>7} {'':>11} {'':>10}  {'; '.join(notes)}")
            continue
        x, lo_hi = ("1", "") if i == 0 else (_x(ratio), f"({_x(spread[0])}-{_x(spread[1])})")
        cpu = f"{t.cpu_ns_per_row:,.0f}" if t.cpu_ns_per_row is not None else ""
        lines.append(f"  {t.variant:<44} {rps:>12,.0f} {rps * per_row / 1e6:>9,.1f} {x:>7} {lo_hi:>11} "
                     f"{cpu:>10}  {'; '.join(notes)}".rstrip())
    return lines


def _x(ratio: float) -> str:
    # two decimals, or two significant digits below 0.1 (a slow path over a tiny dataset: 0.0031)
    return f"{ratio:.2f}" if ratio >= 0.1 else f"{ratio:.2g}"


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
    if not args.json:
        print(f"{args.url}: {n:,} of {len(ds):,} rows; columns: {cols}")
        print(f"shuffled epochs, batches of {args.batch_size}; a warm-up round, then medians of "
              f"{args.rounds} rounds (each: one epoch of the floor, then of each loader)\n{HEADER}",
              flush=True)

    def emit(group: list[Timed], per_row: float) -> None:
        if not args.json:
            print("\n".join(table(group, per_row)), flush=True)

    result = measure(args.url, batch=args.batch_size, workers=args.workers,
                     frameworks=frameworks, rows=args.rows, rounds=args.rounds, emit=emit)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print("x floor: rows/s over the floor's in the same round, median (min-max) over the rounds; "
              "CPU ns/row: this process and its workers; MB/s: decoded bytes.")
        print(", ".join(f"{k} {v}" for k, v in result["versions"].items()))
    return 0
