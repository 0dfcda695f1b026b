"""One epoch of a Parquet directory through ``make_batch_reader`` + ``BatchedDataLoader``.

Run by ``benchmarks.peer_envs`` with the Petastorm env's python (``--impl petastorm``) or with
petastream's (``--impl petastream-compat``): the code below is the same for both, only the
import differs. Each epoch makes a reader (``num_epochs=1``, default ``shuffle_row_groups``,
``workers_count``, the thread pool) and a ``BatchedDataLoader(batch_size=1024)`` over it, as a
training script does; rows counted via ``id``. ``--cache-dir``: ``cache_type="local-disk"`` there
(the epochs after the first read decoded row groups from it, in both).
"""

from __future__ import annotations

import argparse

from _common import BATCH, describe, emit, timed_epochs


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--impl", choices=["petastorm", "petastream-compat"], default="petastorm")
    p.add_argument("--parquet", required=True)
    p.add_argument("--rows", type=int, required=True, help="rows expected in one epoch")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--cache-dir", default=None, help="cache_type='local-disk' at this directory")
    args = p.parse_args()
    try:
        if args.impl == "petastorm":
            from petastorm import make_batch_reader
            from petastorm.pytorch import BatchedDataLoader
        else:
            from petastream.compat import make_batch_reader
            from petastream.compat.pytorch import BatchedDataLoader
        url = "file://" + args.parquet if args.impl == "petastorm" else args.parquet

        cache = {} if args.cache_dir is None else {
            "cache_type": "local-disk", "cache_location": args.cache_dir, "cache_size_limit": 10 << 30,
            "cache_row_size_estimate": 512}

        def epoch() -> int:
            reader = make_batch_reader(url, num_epochs=1, workers_count=args.workers, seed=1, **cache)
            with BatchedDataLoader(reader, batch_size=BATCH) as loader:
                return sum(len(b["id"]) for b in loader)

        out = timed_epochs(epoch, args.rows, args.repeat)
    except Exception as e:  # noqa: BLE001 - reported, not raised
        out = {"error": f"failed: {describe(e)}"}
    emit(**out, extra={"impl": args.impl, "workers_count": args.workers, "cache_dir": args.cache_dir})


if __name__ == "__main__":
    main()
