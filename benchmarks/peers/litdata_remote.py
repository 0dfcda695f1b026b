"""LitData (``litdata``) for the remote benchmark, in its own env: write the same rows with its
``optimize``, upload them to S3, then read two epochs through the throttling proxy.

``--write``: ``optimize(fn=row, inputs=range(n), output_dir=<local>, chunk_bytes=..., compression=
'zstd')`` then every file uploaded with boto3 straight to the S3 server (not throttled).
``--read``: ``StreamingDataset('s3://...', cache_dir=<empty dir>, shuffle=True, seed=1,
storage_options={'endpoint_url': <proxy>})`` (obstore told ``allow_http``: see ``read``) in a ``StreamingDataLoader(batch_size=B,
num_workers=W)``; epoch 1 downloads every chunk, epoch 2 reads the local copies. Prints one JSON
line: ``{"epochs": [s, s], "rows": [...], "stored_bytes": ...}`` or ``{"error": ...}``.
"""

from __future__ import annotations

import argparse
import os
import time

from _common import describe, emit
from _remote_rows import make_rows

_ROWS: dict = {}


def _row(item: tuple[int, int]) -> dict:
    i, n = item
    if not _ROWS:  # optimize's worker processes build the (deterministic) rows themselves
        _ROWS.update(make_rows(n))
    return {"id": int(_ROWS["id"][i]), "label": int(_ROWS["label"][i]),
            "features": _ROWS["features"][i], "payload": _ROWS["payload"][i].tobytes()}


def write(args: argparse.Namespace) -> dict:
    import boto3
    from litdata import optimize

    optimize(fn=_row, inputs=[(i, args.rows) for i in range(args.rows)], output_dir=args.out, chunk_bytes=args.chunk_bytes,
             compression="zstd", num_workers=1, mode="overwrite")
    bucket, _, prefix = args.remote[len("s3://"):].partition("/")
    s3 = boto3.client("s3", endpoint_url=args.upload_endpoint)
    stored = 0
    for name in sorted(os.listdir(args.out)):
        path = os.path.join(args.out, name)
        s3.upload_file(path, bucket, f"{prefix}/{name}")
        stored += os.path.getsize(path) if name.startswith("chunk") else 0
    return {"stored_bytes": stored, "files": len(os.listdir(args.out))}


def read(args: argparse.Namespace) -> dict:
    from litdata import StreamingDataLoader, StreamingDataset
    from litdata.streaming import downloader

    # LitData fetches chunks through obstore, whose client refuses a plain-http endpoint unless
    # told (allow_http); the loopback proxy speaks http. One option, so LitData keeps its fast
    # path (forked DataLoader workers inherit it).
    downloader._OBSTORE_CLIENT_OPTIONS = {**downloader._OBSTORE_CLIENT_OPTIONS, "allow_http": True}

    ds = StreamingDataset(args.remote, cache_dir=args.cache, shuffle=True, seed=1,
                          storage_options={"endpoint_url": args.endpoint})
    loader = StreamingDataLoader(ds, batch_size=args.batch, num_workers=args.workers)
    epochs, seen = [], []
    for _ in range(2):
        t = time.perf_counter()
        rows = sum(len(b["id"]) for b in loader)
        epochs.append(time.perf_counter() - t)
        seen.append(rows)
    out: dict = {"epochs": epochs, "rows": seen}
    if any(r != args.rows for r in seen):
        out["error"] = f"failed: epochs of {seen} rows, expected {args.rows}"
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--write", action="store_true")
    p.add_argument("--remote", required=True)
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--out", help="--write: local optimize output directory")
    p.add_argument("--chunk-bytes", type=int, default=20_000_000)
    p.add_argument("--upload-endpoint", help="--write: the S3 server itself")
    p.add_argument("--cache", help="--read: empty cache directory")
    p.add_argument("--endpoint", help="--read: the throttling proxy")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    try:
        out = write(args) if args.write else read(args)
    except Exception as e:  # noqa: BLE001 - reported, not raised
        out = {"error": f"failed: {describe(e)}"}
    emit(**out)


if __name__ == "__main__":
    main()
