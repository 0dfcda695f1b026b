"""Delta tables written by deltalake (delta-rs) itself, plus deletion vectors from our own
writer (tests/delta/dv_writer.py): delta-rs reads deletion vectors but does not write them."""

from __future__ import annotations

import pyarrow as pa
import pytest

pytest.importorskip("deltalake")  # the 'delta' extra (in 'dev': CI has it)


def rows(start: int, stop: int) -> pa.Table:
    ids = pa.array(range(start, stop), pa.int64())
    return pa.table({"id": ids, "x": pa.array([float(i) / 2 for i in range(start, stop)]),
                     "label": pa.array([i % 3 for i in range(start, stop)], pa.int32())})


def issue_table(path: str) -> str:
    """The issue's table: 1,000 rows (v0), 500 appended (v1), then ``DELETE id < 100`` (v2,
    delta-rs rewrites the files it touches)."""
    from deltalake import DeltaTable, write_deltalake

    write_deltalake(path, rows(0, 1000))
    write_deltalake(path, rows(1000, 1500), mode="append")
    DeltaTable(path).delete("id < 100")
    return path


@pytest.fixture(scope="module")
def issue(tmp_path_factory) -> str:
    return issue_table(str(tmp_path_factory.mktemp("delta") / "issue"))


def add_paths(table: str) -> list[str]:
    from deltalake import DeltaTable

    return sorted(pa.table(DeltaTable(table).get_add_actions()).column("path").to_pylist())


def deltalake_ids(table: str, version: int | None = None) -> list[int]:
    """The ids deltalake's own query engine reads (deletion vectors applied)."""
    from deltalake import DeltaTable, QueryBuilder

    dt = DeltaTable(table, version=version)
    out = pa.table(QueryBuilder().register("t", dt).execute("select id from t").read_all())
    return sorted(out.column("id").to_pylist())
