"""One shuffled epoch of a Unischema dataset through ``make_reader`` (rows), or through
``DataLoader(reader, batch_size=64)`` over it.

Run by ``benchmarks.image_epoch`` with the Petastorm env's python (``--impl petastorm``; OpenCV
for its image codec on ``--sys-path``) or with petastream's (``--impl petastream-compat``): the
code below is the same for both, only the import differs. Each epoch makes
``make_reader(url, num_epochs=1, workers_count=2, seed=1, shuffle_row_groups=True)`` (the thread
pool, Petastorm's default) as a training script does, and either iterates the reader
(``--mode reader``: rows counted) or wraps it in ``<impl>.pytorch.DataLoader`` with its default
collate (``--mode dataloader``: rows counted via ``id``); the context manager stops and joins
the reader's workers.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any


def reader_epoch(make_reader: Callable[..., Any], data_loader: Callable[..., Any], url: str, mode: str = "reader",
                 workers: int = 2, pool: str = "thread", batch_size: int = 64) -> Callable[[], int]:
    """One epoch (its rows) of a fresh ``make_reader``, iterated row by row or under
    ``data_loader(reader, batch_size)``: the same for Petastorm's and compat's (``benchmarks.image_epoch``
    times compat's in its own process with this function)."""
    def open_reader() -> Any:
        return make_reader(url, num_epochs=1, workers_count=workers, seed=1, shuffle_row_groups=True,
                           reader_pool_type=pool)

    def rows() -> int:
        with open_reader() as reader:
            return sum(1 for _ in reader)

    def batches() -> int:
        with data_loader(open_reader(), batch_size=batch_size) as loader:
            return sum(len(b["id"]) for b in loader)

    return rows if mode == "reader" else batches


def main() -> None:
    # run as a script, with the peers' folder on sys.path (and importable without it, for reader_epoch)
    from _common import describe, emit, timed_epochs

    p = argparse.ArgumentParser()
    p.add_argument("--impl", choices=["petastorm", "petastream-compat"], default="petastorm")
    p.add_argument("--dataset", required=True, help="the dataset directory")
    p.add_argument("--rows", type=int, required=True, help="rows expected in one epoch")
    p.add_argument("--mode", choices=["reader", "dataloader"], default="reader")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--pool", choices=["thread", "process", "dummy"], default="thread", help="reader_pool_type")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--sys-path", default=None, help="a directory put first on sys.path (OpenCV)")
    args = p.parse_args()
    if args.sys_path:
        sys.path.insert(0, args.sys_path)
    try:
        if args.impl == "petastorm":
            from petastorm import make_reader
            from petastorm.pytorch import DataLoader
        else:
            from petastream.compat import make_reader
            from petastream.compat.pytorch import DataLoader
        epoch = reader_epoch(make_reader, DataLoader, "file://" + args.dataset, args.mode, args.workers,
                             args.pool, args.batch_size)
        out = timed_epochs(epoch, args.rows, args.repeat)
    except Exception as e:  # noqa: BLE001 - reported, not raised
        out = {"error": f"failed: {describe(e)}"}
    emit(**out, extra={"impl": args.impl, "mode": args.mode, "workers_count": args.workers, "pool": args.pool,
                       "batch_size": args.batch_size if args.mode == "dataloader" else None})


if __name__ == "__main__":
    main()
