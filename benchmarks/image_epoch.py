"""One shuffled epoch of an image-codec Unischema dataset through ``make_reader``: compat vs Petastorm.

The dataset (``benchmarks/peers/write_image_dataset.py``, written once by the real Petastorm
0.13.1 under ``.bench/data/image-png-<rows>-v<VERSION>/``): ``id`` int64, ``label`` int32,
``image`` uint8 (64, 64, 3) ``CompressedImageCodec('png')``; row groups of about 4 MB (about
480 rows) in 4 files. Rows:

* floor, decode-bound (the floor of every round): the dataset's PNG bytes in memory, each
  decoded once per epoch in a random order with the decoder compat uses
  (:func:`petastream.compat._images.decode`, Pillow), one thread: what one core pays for the
  images alone;
* floor, gather: the decoded columns in memory, numpy permutation + gather +
  ``torch.from_numpy`` in batches of 64 (:func:`petastream.bench.torch_floor`);
* compat's ``make_reader(url, num_epochs=1, workers_count=2, seed=1, shuffle_row_groups=True,
  reader_pool_type=<pool>)`` iterated row by row, and ``DataLoader(reader, batch_size=64)`` over
  it: a reader per epoch, as a training script makes them (the epoch of
  ``benchmarks/peers/make_reader_epoch.py``, run in this process);
* Petastorm's, the same script in its env (OpenCV from ``--opencv-path``), and the reference
  decode with Petastorm's own codec (OpenCV, ``benchmarks/peers/image_decode_floor.py``).

The floors and compat's rows run in interleaved rounds (:func:`benchmarks.harness.interleaved`:
a warm-up round, then ``--rounds``, each one epoch of the decode floor then one of each row); a
row's "x decode" is the median over the rounds of its rows/s over the decode floor's in the same
round, with their (min-max). Petastorm's rows run ``--peer-repeat`` epochs (default: as many as
the rounds) in one subprocess each, against the decode floor timed just before and after it, as
``torch_epoch``'s peers. "x Petastorm": a compat row's median x decode over Petastorm's of the
same mode and pool, and in brackets the least and most of its per-round ratios over Petastorm's.
``PETASTREAM_BENCH_ENVS=/work/bench-envs python -m benchmarks.image_epoch --rows 20000
--opencv-path /tmp/cv2`` (OpenCV for Petastorm's env: ``pip install --no-deps --target
/tmp/cv2 opencv-python-headless==4.10.0.84``; default: ``$PETASTREAM_BENCH_OPENCV``).
"""

from __future__ import annotations

import argparse
import functools
import glob
import json
import os
import time
from pathlib import Path

import numpy as np

from benchmarks import peer_envs
from benchmarks.harness import Result, interleaved, peer_result, save, wall_of
from benchmarks.peers.make_reader_epoch import reader_epoch
from benchmarks.workloads import DATA
from petastream import bench

NAME = "image_epoch"
BATCH = 64
VERSION = 1  # bump when the writer's rows or layout change
DECODE_FLOOR = "floor, decode-bound: compat's PNG decode of the same bytes, 1 thread"
OPENCV_REFERENCE = "reference: Petastorm's own codec decode (OpenCV), 1 thread, in its env"
GATHER_FLOOR = "floor, gather: numpy perm+gather+from_numpy of decoded arrays, batches of 64"

__all__ = ["NAME", "run", "prepare", "table"]


def prepare(n: int, args: argparse.Namespace) -> tuple[str | None, str]:
    """The dataset directory (written now with Petastorm unless already there), or None and why."""
    root = DATA / f"image-png-{n}-v{VERSION}"
    path = root / "petastorm"
    if (root / ".done").exists():
        return str(path), ""
    root.mkdir(parents=True, exist_ok=True)
    cli = ["--out", str(path), "--rows", str(n)] + (["--sys-path", args.opencv_path] if args.opencv_path else [])
    print(f"writing {n:,} image rows with Petastorm into {path} ...", flush=True)
    res = peer_envs.run_runner("write_image_dataset.py", cli, "petastorm", args.peer_timeout)
    if "error" in res:
        return None, res["error"]
    (root / "written.json").write_text(json.dumps(res))
    (root / ".done").touch()
    return str(path), ""


def load_columns(path: str) -> tuple[dict[str, np.ndarray], list[bytes]]:
    """The dataset's stored columns read with pyarrow: ids, labels, and the PNG files."""
    import pyarrow.parquet as pq

    ids, labels, images = [], [], []
    for f in sorted(glob.glob(os.path.join(path, "*.parquet"))):
        t = pq.read_table(f, columns=["id", "label", "image"])
        ids.append(t.column("id").to_numpy())
        labels.append(t.column("label").to_numpy())
        images += t.column("image").to_pylist()
    return {"id": np.concatenate(ids), "label": np.concatenate(labels)}, images


def decode_floor(images: list[bytes], seed: int = 1) -> tuple[int, float]:
    """One epoch of the decode-bound floor: every PNG decoded once, in a random order, one thread."""
    from petastream.compat._images import decode

    order = np.random.default_rng(seed).permutation(len(images))
    t = time.perf_counter()
    for i in order:
        decode(images[i], "image")
    return len(images), time.perf_counter() - t


def decoded(images: list[bytes]) -> np.ndarray:
    from petastream.compat._images import decode

    return np.stack([decode(b, "image") for b in images])


def variant(impl: str, mode: str, pool: str) -> str:
    what = "make_reader, rows" if mode == "reader" else f"make_reader + pytorch.DataLoader(batch_size={BATCH})"
    return f"{impl} {what}" + ("" if pool == "thread" else f" (reader_pool_type={pool!r})")


def compat_epochs(path: str, mode: str, pool: str, workers: int) -> bench.EpochFn:
    """Epochs of compat's ``make_reader`` (a reader per epoch), timed in this process."""
    from petastream.compat import make_reader
    from petastream.compat.pytorch import DataLoader

    rows = reader_epoch(make_reader, DataLoader, "file://" + path, mode, workers, pool, BATCH)

    def epoch() -> tuple[int, float]:
        t = time.perf_counter()
        n = rows()
        return n, time.perf_counter() - t

    return epoch


def _settings(args: argparse.Namespace) -> list[tuple[str, str]]:
    return [(pool, mode) for pool in args.pools for mode in args.modes]


def petastorm_rows(path: str, n: int, args: argparse.Namespace, floor: peer_envs.Floor) -> list[Result]:
    """Petastorm's rows, each a subprocess in its env bracketed by the decode floor."""
    repeat = args.peer_repeat or args.rounds
    opencv = ["--sys-path", args.opencv_path] if args.opencv_path else []
    base = ["--dataset", path, "--rows", str(n), "--repeat", str(repeat)]
    res = peer_envs.run_bracketed("image_decode_floor.py", ["--impl", "petastorm", *base, *opencv], "petastorm",
                                  args.peer_timeout, floor)
    out = [peer_result(NAME, n, OPENCV_REFERENCE, res,
                       peer_envs.note_for(res, "same bytes and order as the decode-bound floor"))]
    for pool, mode in _settings(args):
        cli = ["--impl", "petastorm", *base, "--mode", mode, "--batch-size", str(BATCH), "--pool", pool,
               "--workers", str(args.workers), *opencv]
        res = peer_envs.run_bracketed("make_reader_epoch.py", cli, "petastorm", args.peer_timeout, floor)
        note = f"a reader per epoch, workers_count={args.workers}; OpenCV decode"
        out.append(peer_result(NAME, n, variant("petastorm", mode, pool), res, peer_envs.note_for(res, note)))
    return out


def run(args: argparse.Namespace) -> list[Result]:
    n = args.rows
    path, why = prepare(n, args)
    if path is None:
        return [Result(NAME, "dataset", n, None, note=f"not written: {why}")]
    columns, images = load_columns(path)
    if len(images) != n:
        raise RuntimeError(f"{path} holds {len(images)} rows, expected {n}: delete {Path(path).parent}")
    data = {**columns, "image": decoded(images)}
    peers = set(args.peers) if args.peers is not None else {"petastorm", "compat"}
    decode = functools.partial(decode_floor, images)
    variants: dict[str, bench.EpochFn] = {GATHER_FLOOR: functools.partial(bench.torch_floor, data, BATCH)}
    if "compat" in peers:
        for pool, mode in _settings(args):
            variants[variant("petastream-compat", mode, pool)] = compat_epochs(path, mode, pool, args.workers)
    results = interleaved(NAME, n, (DECODE_FLOOR, decode), variants, args.rounds)
    del variants, data  # compat's parked workers and the decoded images: memory Petastorm's runs need
    if "petastorm" in peers:
        results += petastorm_rows(path, n, args, wall_of(decode))
    return results


def table(results: list[Result]) -> str:
    """rows/s, x the decode floor (median, min-max), and each compat row x Petastorm's row of the same mode."""
    by = {r.variant: r for r in results}
    w = max(len(r.variant) for r in results)
    lines = [f"{'variant':<{w}} {'rows/s':>10} {'x decode':>8} {'(min-max)':>11} {'x Petastorm':>11} "
             f"{'(min-max)':>11} {'CPU ns/row':>10}  note"]
    for r in results:
        peer = by.get(r.variant.replace("petastream-compat", "petastorm")) if "petastream-compat" in r.variant else None
        rps = f"{r.rows_per_s:,.0f}" if r.rows_per_s else "unavailable"
        x = spread = vs = vs_spread = ""
        if r.ratios and r.ratio:
            x, spread = f"{r.ratio:.3g}", f"({min(r.ratios):.3g}-{max(r.ratios):.3g})"
            if peer and peer.ratios and peer.ratio:
                vs = f"{r.ratio / peer.ratio:.2f}"
                vs_spread = f"({min(r.ratios) / max(peer.ratios):.2f}-{max(r.ratios) / min(peer.ratios):.2f})"
        cpu = f"{r.cpu_ns_per_row:,.0f}" if r.cpu_ns_per_row else ""
        lines.append(f"{r.variant:<{w}} {rps:>10} {x:>8} {spread:>11} {vs:>11} {vs_spread:>11} {cpu:>10}  {r.note}")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=20_000)
    p.add_argument("--peers", nargs="*", default=None, help="petastorm, compat (default: both)")
    p.add_argument("--rounds", type=int, default=5, help="interleaved timed rounds after a warm-up (medians)")
    p.add_argument("--peer-repeat", type=int, default=None, help="timed epochs per Petastorm run (default: --rounds)")
    p.add_argument("--pools", nargs="+", default=["thread", "process"], choices=["thread", "process", "dummy"],
                   help="reader_pool_type of the make_reader rows (default: thread, Petastorm's default, and process)")
    p.add_argument("--modes", nargs="+", default=["reader", "dataloader"], choices=["reader", "dataloader"])
    p.add_argument("--workers", type=int, default=2, help="workers_count")
    p.add_argument("--peer-timeout", type=float, default=1800.0)
    p.add_argument("--opencv-path", default=os.environ.get("PETASTREAM_BENCH_OPENCV"),
                   help="a directory with OpenCV for Petastorm's env (pip install --target)")
    args = p.parse_args()
    results = run(args)
    print(table(results))
    print(f"saved {save(NAME, results, {'loadavg': os.getloadavg()})}")


if __name__ == "__main__":
    main()
