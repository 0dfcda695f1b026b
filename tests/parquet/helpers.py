"""Shared helpers of the Parquet source tests: tables, files, and exact column comparison."""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal
from typing import Any

import numpy as np

from petastream.columns.ragged import Ragged


def table(n: int, start: int = 0) -> Any:
    """Rows ``start .. start+n-1`` of every supported Arrow type (values follow the row id)."""
    import pyarrow as pa

    ids = np.arange(start, start + n)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "i8": pa.array((ids % 200 - 100).astype(np.int8)),
        "u16": pa.array((ids % 60000).astype(np.uint16)),
        "f32": pa.array(ids.astype(np.float32) / 3),
        "f64": pa.array(ids / 7.0),
        "flag": pa.array(ids % 3 == 0),
        "s": pa.array([f"text-{i}-é" for i in ids], pa.string()),
        "raw": pa.array([bytes([i % 256, 0, 255]) * (i % 4) for i in ids], pa.binary()),
        "dec": pa.array([Decimal(int(i)) / 8 for i in ids], pa.decimal128(12, 3)),
        "day": pa.array([dt.date(1969, 12, 30) + dt.timedelta(days=int(i) * 3) for i in ids], pa.date32()),
        "ts": pa.array([dt.datetime(2021, 3, 4, 5, 6, 7, 123456) + dt.timedelta(hours=int(i) * 13)
                        for i in ids], pa.timestamp("us", tz="UTC")),
        "vec": pa.FixedSizeListArray.from_arrays(pa.array(np.repeat(ids, 4).astype(np.float32)), 4),
        "ragged": pa.array([list(range(int(i) % 5 + 1)) for i in ids], pa.list_(pa.int32())),
        "tags": pa.array([[f"t{i}"] * (int(i) % 3) for i in ids], pa.list_(pa.string())),
    })


def write_files(tab: Any, root: str, files: int = 3, row_group_size: int = 40) -> list[str]:
    """``tab`` split into ``files`` Parquet files ``part-<k>.parquet`` under ``root``."""
    import pyarrow.parquet as pq

    os.makedirs(root, exist_ok=True)
    bounds = np.linspace(0, tab.num_rows, files + 1).astype(int)
    paths = []
    for k in range(files):
        path = os.path.join(root, f"part-{k:05d}.parquet")
        pq.write_table(tab.slice(bounds[k], bounds[k + 1] - bounds[k]), path, row_group_size=row_group_size)
        paths.append(path)
    return paths


def assert_same(got: dict[str, Any], want: dict[str, Any]) -> None:
    """Exactly the same columns: names, types, dtypes, shapes and values."""
    assert list(got) == list(want) or set(got) == set(want), (list(got), list(want))
    for name in want:
        g, w = got[name], want[name]
        assert type(g) is type(w), (name, type(g), type(w))
        if isinstance(w, Ragged):
            assert g.values.dtype == w.values.dtype, name
            np.testing.assert_array_equal(g.offsets, w.offsets, err_msg=name)
            np.testing.assert_array_equal(g.values, w.values, err_msg=name)
            continue
        assert g.dtype == w.dtype and g.shape == w.shape, (name, g.dtype, w.dtype, g.shape, w.shape)
        if w.dtype == object:
            for a, b in zip(g.tolist(), w.tolist()):
                assert type(a) is type(b) and a == b, (name, a, b)
                if isinstance(b, Decimal):
                    assert a.as_tuple() == b.as_tuple(), (name, a, b)
        else:
            np.testing.assert_array_equal(g, w, err_msg=name)


def column_of(tab: Any, name: str, rows: np.ndarray) -> list:
    return tab.column(name).take(rows).to_pylist()
