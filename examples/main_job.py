"""The main job, end to end (``make demo``).

Today: an MDS round trip — write a tabular dataset with petastream's bulk writer, inspect and
verify it with the CLI, read it back in bulk and per sample, and check every value. The
converter issues grow this into Spark DataFrame -> converter -> PyTorch and TensorFlow steps.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa

import petastream


def main() -> None:
    n = 200_000
    rng = np.random.default_rng(0)
    table = pa.table({
        "id": pa.array(np.arange(n)),
        "features": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 16, dtype=np.float32)), 16),
        "label": pa.array(rng.integers(0, 10, n).astype(np.int32)),
        "name": pa.array([f"row-{i}" for i in range(n)]),
    })
    out = os.path.join(tempfile.mkdtemp(prefix="petastream-demo-"), "tabular")

    t = time.perf_counter()
    petastream.write_mds(table, out, compression="zstd", hashes=["xxh64"], size_limit="8mb")
    print(f"wrote {n:,} rows to {out} in {time.perf_counter() - t:.2f}s")

    exe = [sys.executable, "-m", "petastream.cli"]
    subprocess.run([*exe, "inspect", out], check=True)
    subprocess.run([*exe, "verify", out], check=True)

    ds = petastream.open(out, validate_hash="xxh64")
    t = time.perf_counter()
    cols = ds.read(np.arange(len(ds)))
    print(f"bulk read {len(ds):,} rows in {time.perf_counter() - t:.2f}s (first pass: decompress + verify)")
    assert np.array_equal(cols["id"], np.arange(n))
    assert np.array_equal(cols["features"], table["features"].combine_chunks().flatten().to_numpy().reshape(n, 16))
    assert list(cols["name"][:3]) == ["row-0", "row-1", "row-2"]
    sample = ds[12345]
    assert sample["id"] == 12345 and sample["name"] == "row-12345"
    print("round trip OK: every value matches")


if __name__ == "__main__":
    main()
