"""One shuffled epoch through Mosaic Streaming's StreamingDataset, into a torch DataLoader.

Run by ``benchmarks.peer_envs`` with the Mosaic env's python (no petastream there). Reads the
workload's MDS dataset (written by petastream, byte-compatible with Mosaic's) in place:
``StreamingDataset(local=mds, shuffle=True, shuffle_seed=1, batch_size=1024)`` +
``torch.utils.data.DataLoader(batch_size=1024, num_workers=W)`` with default collation; rows
counted via ``id``. One process per ``num_workers`` setting (Mosaic keys shared memory on the
local directory).
"""

from __future__ import annotations

import argparse

from _common import BATCH, describe, emit, timed_epochs


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mds", required=True)
    p.add_argument("--rows", type=int, required=True, help="rows expected in one epoch")
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--warmup", type=int, default=1)
    args = p.parse_args()
    try:
        from streaming import StreamingDataset
        from streaming.base.util import clean_stale_shared_memory
        from torch.utils.data import DataLoader

        clean_stale_shared_memory()
        ds = StreamingDataset(local=args.mds, shuffle=True, shuffle_seed=1, batch_size=BATCH)
        loader = DataLoader(ds, batch_size=BATCH, num_workers=args.workers,
                            persistent_workers=False)

        def epoch() -> int:
            return sum(len(b["id"]) for b in loader)

        out = timed_epochs(epoch, args.rows, args.repeat, args.warmup)
    except Exception as e:  # noqa: BLE001 - reported, not raised
        out = {"error": f"failed: {describe(e)}"}
    emit(**out, extra={"num_workers": args.workers})


if __name__ == "__main__":
    main()
