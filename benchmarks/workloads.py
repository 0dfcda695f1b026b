"""The two workloads of the epoch benchmarks, written once per (workload, rows) for every reader.

'tabular': id (int64), 16 float32 features as one array column, label (int32).
'binary': the same plus a 256-byte payload (bytes) and a short string.

``prepare`` writes the same rows as an uncompressed MDS dataset (read by petastream and, being
byte-compatible, by Mosaic's StreamingDataset) and as Parquet (read by Spark for the Petastorm
converter), under ``.bench/data/<workload>-<rows>-v<VERSION>/``; a finished copy is reused.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("PETASTREAM_BENCH_DATA", ROOT / ".bench" / "data"))
VERSION = 2  # bump when make_data or the files written change
PARQUET_ROW_GROUP = 65_536  # rows: lets Spark split the input over its 2 local cores
WORKLOADS = ("tabular", "binary")


def make_data(workload: str, n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    data: dict[str, np.ndarray] = {
        "id": np.arange(n, dtype=np.int64), "features": rng.random((n, 16), dtype=np.float32),
        "label": rng.integers(0, 10, n).astype(np.int32)}
    if workload == "binary":
        payload = rng.integers(0, 256, (n, 256), dtype=np.uint8)
        data["payload"] = np.array([row.tobytes() for row in payload], dtype=object)
        data["name"] = np.array([f"item-{i % 1000}" for i in range(n)], dtype=object)
    return data


def _arrow_table(data: dict[str, np.ndarray]) -> pa.Table:
    import pyarrow as pa

    cols = {}
    for name, v in data.items():
        if v.ndim == 2:  # list<float>: Spark reads it as array<float>
            offsets = np.arange(0, v.size + 1, v.shape[1], dtype=np.int32)
            cols[name] = pa.ListArray.from_arrays(pa.array(offsets), pa.array(v.reshape(-1)))
        elif v.dtype == object:
            cols[name] = pa.array(list(v), type=pa.binary() if isinstance(v[0], bytes) else pa.string())
        else:
            cols[name] = pa.array(v)
    return pa.table(cols)


def prepare(workload: str, n: int, data: dict[str, np.ndarray] | None = None) -> dict[str, str]:
    """Paths of the workload as MDS and as Parquet, written now unless already there."""
    import pyarrow.parquet as pq

    from petastream.mds.writer import write_mds

    root = DATA / f"{workload}-{n}-v{VERSION}"
    paths = {"root": str(root), "mds": str(root / "mds"), "parquet": str(root / "parquet")}
    if (root / ".done").exists():
        return paths
    shutil.rmtree(root, ignore_errors=True)
    data = make_data(workload, n) if data is None else data
    write_mds(data, paths["mds"], compression=None)
    os.makedirs(paths["parquet"])
    pq.write_table(_arrow_table(data), os.path.join(paths["parquet"], "part-0.parquet"),
                   row_group_size=PARQUET_ROW_GROUP)
    (root / ".done").touch()
    return paths
