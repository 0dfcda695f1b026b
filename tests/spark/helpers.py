"""Reading a materialized dataset back for comparison with ``df.collect()``."""

from __future__ import annotations

from typing import Any

import numpy as np

import petastream


def read_rows(url: str, key: str = "id") -> list[dict[str, Any]]:
    """All samples of the dataset at ``url`` as dicts, sorted by ``key``."""
    ds = petastream.open(url)
    rows = [ds[i] for i in range(len(ds))]
    return sorted(rows, key=lambda r: int(r[key]))


def collect_sorted(df: Any, key: str = "id") -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in sorted(df.collect(), key=lambda r: r[key])]


def as_list(value: Any) -> list:
    return np.asarray(value).tolist()
