"""One shuffled epoch of an image-codec Unischema dataset through ``make_reader``: compat vs Petastorm.

The dataset (``benchmarks/peers/write_image_dataset.py``, written once by the real Petastorm
0.13.1 under ``.bench/data/image-png-<rows>-v<VERSION>/``): ``id`` int64, ``label`` int32,
``image`` uint8 (64, 64, 3) ``CompressedImageCodec('png')``; row groups of about 4 MB (about
480 rows) in 4 files. Rows:

* floor, decode-bound: the dataset's PNG bytes in memory, each decoded once per epoch in a
  random order with the decoder compat uses (:func:`petastream.compat._images.decode`, Pillow),
  one thread: what one core pays for the images alone;
* floor, gather: the decoded columns in memory, numpy permutation + gather +
  ``torch.from_numpy`` in batches of 64 (:func:`petastream.bench.torch_floor`);
* reference: the same decode with Petastorm's codec (OpenCV), in its env
  (``benchmarks/peers/image_decode_floor.py``);
* ``make_reader(url, num_epochs=1, workers_count=2, seed=1, shuffle_row_groups=True)`` iterated
  row by row, and ``DataLoader(reader, batch_size=64)`` over it, for Petastorm (in its env,
  with OpenCV from ``--opencv-path``) and compat: the same script,
  ``benchmarks/peers/make_reader_epoch.py``, a reader per epoch, one warm-up epoch then the
  best of ``--peer-repeat``.

The floors are timed again between the rows (:class:`benchmarks.harness.Floor`).
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
from benchmarks.harness import Floor, Result, save
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


def decode_floor(images: list[bytes], seed: int = 1) -> float:
    """Seconds to decode every PNG once, in a random order, one thread."""
    from petastream.compat._images import decode

    order = np.random.default_rng(seed).permutation(len(images))
    t = time.perf_counter()
    for i in order:
        decode(images[i], "image")
    return time.perf_counter() - t


def decoded(images: list[bytes]) -> np.ndarray:
    from petastream.compat._images import decode

    return np.stack([decode(b, "image") for b in images])


def peer_rows(path: str, n: int, args: argparse.Namespace, floors: list[Floor]) -> list[Result]:
    peers = set(args.peers) if args.peers is not None else {"petastorm", "compat"}
    out = []
    if "petastorm" in peers:
        cli = ["--impl", "petastorm", "--dataset", path, "--rows", str(n)]
        res = peer_envs.run_runner("image_decode_floor.py", cli + (["--sys-path", args.opencv_path]
                                                                  if args.opencv_path else []),
                                   "petastorm", args.peer_timeout)
        secs = res.get("seconds") if "error" not in res else None
        out.append(Result(NAME, OPENCV_REFERENCE, n, secs, extra=res.get("extra") or {},
                          note=peer_envs.note_for(res, "same bytes and order as the decode-bound floor")))
        for f in floors:
            f.again()
    for pool, mode in ((pool, mode) for pool in args.pools for mode in args.modes):
        for impl, peer in (("petastorm", "petastorm"), ("petastream-compat", None)):
            if (peer or "compat") not in peers:
                continue
            cli = ["--impl", impl, "--dataset", path, "--rows", str(n), "--mode", mode,
                   "--batch-size", str(BATCH), "--repeat", str(args.peer_repeat), "--pool", pool,
                   "--workers", str(args.workers)]
            if peer and args.opencv_path:
                cli += ["--sys-path", args.opencv_path]
            res = peer_envs.run_runner("make_reader_epoch.py", cli, peer, args.peer_timeout)
            what = "make_reader, rows" if mode == "reader" else f"make_reader + pytorch.DataLoader(batch_size={BATCH})"
            what += "" if pool == "thread" else f" (reader_pool_type={pool!r})"
            note = f"a reader per epoch, workers_count={args.workers}" + ("; same script, import from petastream.compat"
                                                             if peer is None else "; OpenCV decode")
            secs = res.get("seconds") if "error" not in res else None
            out.append(Result(NAME, f"{impl} {what}", n, secs, note=peer_envs.note_for(res, note),
                              extra={**(res.get("extra") or {}), "times": res.get("times")}))
            for f in floors:
                f.again()
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
    dec = Floor(functools.partial(decode_floor, images))
    gather = Floor(lambda: bench.torch_floor(data, BATCH)[1])
    rows = peer_rows(path, n, args, [dec, gather])
    return [dec.result(NAME, DECODE_FLOOR, n), gather.result(NAME, GATHER_FLOOR, n), *rows]


def table(results: list[Result]) -> str:
    """rows/s, x each floor, and each compat row x Petastorm's row of the same mode."""
    by = {r.variant: r for r in results}
    dec, gather = by.get(DECODE_FLOOR), by.get(GATHER_FLOOR)
    w = max(len(r.variant) for r in results)
    lines = [f"{'variant':<{w}} {'rows/s':>10} {'x decode':>9} {'x gather':>9} {'x Petastorm':>12}  note"]

    def ratio(r: Result, base: Result | None) -> str:
        return f"{r.rows_per_s / base.rows_per_s:.3g}" if r.rows_per_s and base and base.rows_per_s else ""

    for r in results:
        peer = by.get(r.variant.replace("petastream-compat", "petastorm")) if "petastream-compat" in r.variant else None
        rps = f"{r.rows_per_s:,.0f}" if r.rows_per_s else "unavailable"
        lines.append(f"{r.variant:<{w}} {rps:>10} {ratio(r, dec):>9} {ratio(r, gather):>9} "
                     f"{ratio(r, peer):>12}  {r.note}")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=20_000)
    p.add_argument("--peers", nargs="*", default=None, help="petastorm, compat (default: both)")
    p.add_argument("--peer-repeat", type=int, default=3)
    p.add_argument("--pools", nargs="+", default=["thread"], choices=["thread", "process", "dummy"],
                   help="reader_pool_type of the make_reader rows (default: thread, Petastorm's default)")
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
