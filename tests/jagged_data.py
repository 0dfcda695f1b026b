"""The str/bytes rows of the jagged-strings tests (torch and TensorFlow), as MDS and as Parquet.

``s``: str with empty values and multi-byte UTF-8; ``b``: bytes with empty values; ``id`` the
row number, so a test recomputes any row's values with :func:`text` and :func:`blob`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from petastream.mds.writer import write_mds


def text(i: int) -> str:
    return "" if i % 7 == 0 else "é" * (i % 5) + f"v{i}"  # empty values, multi-byte UTF-8


def blob(i: int) -> bytes:
    return b"" if i % 11 == 0 else bytes(range(i % 256))[: i % 40]


def columns(n: int, extra: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """``id``, ``s`` and ``b`` of ``n`` rows (object arrays), then the ``extra`` columns."""
    return {"id": np.arange(n), "s": np.array([text(i) for i in range(n)], dtype=object),
            "b": np.array([blob(i) for i in range(n)], dtype=object), **(extra or {})}


def write_mds_rows(path: str | Path, n: int, size_limit: int,
                   extra: Mapping[str, np.ndarray] | None = None) -> str:
    """The rows as MDS in shards of ``size_limit`` bytes (several shards: the reads cross them)."""
    write_mds(columns(n, extra), str(path), size_limit=size_limit)
    return str(path)


def write_parquet_rows(path: str | Path, n: int, row_group_size: int,
                       extra: Mapping[str, np.ndarray] | None = None) -> str:
    """The rows as one Parquet file: ``s`` string, ``b`` binary, in row groups of ``row_group_size``."""
    table = pa.table({name: pa.array(list(v), pa.binary() if name == "b" else None) if v.dtype == object else v
                      for name, v in columns(n, extra).items()})
    pq.write_table(table, str(path), row_group_size=row_group_size)
    return str(path)
