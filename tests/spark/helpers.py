"""Reading a materialized dataset back for comparison with ``df.collect()``; the session and
``functions`` module of a test parametrized over classic and Connect."""

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


def session_for(request: Any, mode: str) -> Any:
    """The classic (``"classic"``) or Spark Connect session fixture of a parametrized test."""
    return request.getfixturevalue("spark" if mode == "classic" else "spark_connect")


def functions_for(mode: str) -> Any:
    """``pyspark.sql.functions`` of that kind of session (Connect has its own module)."""
    if mode == "classic":
        from pyspark.sql import functions as F
    else:
        from pyspark.sql.connect import functions as F
    return F
