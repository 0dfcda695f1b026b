"""Two epochs of Mosaic Streaming's StreamingDataset from S3 (through the throttling proxy).

Run by ``benchmarks.remote`` with the Mosaic env's python: ``StreamingDataset(remote=s3://...,
local=<empty dir>, shuffle=True, shuffle_seed=1, batch_size=B)`` in a ``torch.utils.data.
DataLoader(batch_size=B, num_workers=W)``; ``S3_ENDPOINT_URL`` points boto3 at the proxy.
Epoch 1 downloads (and decompresses) every shard; epoch 2 reads the local copies. Prints one
JSON line: ``{"epochs": [seconds, seconds], "rows": N}`` or ``{"error": ...}``.
"""

from __future__ import annotations

import argparse
import time

from _common import describe, emit


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--remote", required=True)
    p.add_argument("--local", required=True)
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    try:
        from streaming import StreamingDataset
        from streaming.base.util import clean_stale_shared_memory
        from torch.utils.data import DataLoader

        clean_stale_shared_memory()
        ds = StreamingDataset(remote=args.remote, local=args.local, shuffle=True, shuffle_seed=1,
                              batch_size=args.batch)
        loader = DataLoader(ds, batch_size=args.batch, num_workers=args.workers)
        epochs, seen = [], []
        for _ in range(2):
            t = time.perf_counter()
            rows = sum(len(b["id"]) for b in loader)
            epochs.append(time.perf_counter() - t)
            seen.append(rows)
        out = {"epochs": epochs, "rows": seen}
        if any(r != args.rows for r in seen):
            out["error"] = f"failed: epochs of {seen} rows, expected {args.rows}"
    except Exception as e:  # noqa: BLE001 - reported, not raised
        out = {"error": f"failed: {describe(e)}"}
    emit(**out)


if __name__ == "__main__":
    main()
