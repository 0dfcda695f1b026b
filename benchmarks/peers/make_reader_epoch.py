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

from _common import describe, emit, timed_epochs


def main() -> None:
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
        url = "file://" + args.dataset

        def open_reader():
            return make_reader(url, num_epochs=1, workers_count=args.workers, seed=1, shuffle_row_groups=True,
                               reader_pool_type=args.pool)

        def reader_epoch() -> int:
            with open_reader() as reader:
                return sum(1 for _ in reader)

        def loader_epoch() -> int:
            with DataLoader(open_reader(), batch_size=args.batch_size) as loader:
                return sum(len(b["id"]) for b in loader)

        out = timed_epochs(reader_epoch if args.mode == "reader" else loader_epoch, args.rows, args.repeat)
    except Exception as e:  # noqa: BLE001 - reported, not raised
        out = {"error": f"failed: {describe(e)}"}
    emit(**out, extra={"impl": args.impl, "mode": args.mode, "workers_count": args.workers, "pool": args.pool,
                       "batch_size": args.batch_size if args.mode == "dataloader" else None})


if __name__ == "__main__":
    main()
