"""Opening a table without reading every data file's footer: files whose row count the log
records are planned as whole-file units, their footers read when first loaded (see
petastream.parquet.plan), serving exactly the rows an eager plan serves."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from petastream.delta import DeltaSource
from petastream.errors import FormatError
from petastream.parquet.convert import NullValuesError
from petastream.parquet.plan import WHOLE_FILE
from petastream.pipeline.loader import BatchLoader
from tests.delta.conftest import add_paths, deltalake_ids, rows
from tests.delta.dv_writer import delete_rows


def _appended(path: str, parts: int = 5, per: int = 40) -> str:
    from deltalake import write_deltalake

    for k in range(parts):
        write_deltalake(path, rows(per * k, per * k + per), mode="append")
    return path


def _footerless(src: DeltaSource) -> list[bool]:
    return [u.row_group == WHOLE_FILE for u in src.plan.units]


def test_files_are_planned_from_the_log_and_read_the_same_rows(tmp_path):
    path = _appended(str(tmp_path / "t"))
    paths = add_paths(path)
    delete_rows(path, {paths[1]: [0, 5, 39], paths[3]: range(10, 30)})
    src = DeltaSource(path)
    # One footer read (the first file's: the columns' types); the other files from the log.
    assert _footerless(src) == [False] + [True] * 4
    assert [f.footer_bytes for f in src.plan.files][1:] == [0] * 4
    want = deltalake_ids(path)
    assert len(want) == 200 - 23 and sorted(src.read(np.arange(len(src)), ["id"])["id"].tolist()) == want
    got = sorted(int(i) for b in BatchLoader(path, batch_size=16, shuffle=True, seed=3,
                                             dataset_options={"rows_per_shard": 7}) for i in b["id"])
    assert got == want
    x = src.read(np.arange(len(src)), ["id", "x"])
    np.testing.assert_array_equal(x["x"], x["id"] / 2)


def test_filters_and_row_group_fetches_plan_from_footers(tmp_path):
    path = _appended(str(tmp_path / "t"), parts=3)
    assert not any(_footerless(DeltaSource(path, filters=[("id", ">=", 10)])))
    assert not any(_footerless(DeltaSource(path, fetch="row_group")))
    assert sorted(DeltaSource(path, filters=[("id", ">=", 10)]).read(np.arange(110), ["id"])["id"].tolist()) == \
        list(range(10, 120))


def test_column_mapped_files_plan_from_the_logs_physical_null_counts(tmp_path):
    from deltalake import write_deltalake

    path = str(tmp_path / "m")
    config = {"delta.columnMapping.mode": "name", "delta.minReaderVersion": "2", "delta.minWriterVersion": "5"}
    for k in range(3):
        t = rows(10 * k, 10 * k + 10).rename_columns(["id", "my value", "label"])
        write_deltalake(path, t, mode="append", configuration=config if k == 0 else None)
    src = DeltaSource(path)
    assert _footerless(src) == [False, True, True]
    got = src.read(np.arange(30), ["id", "my value"])
    np.testing.assert_array_equal(got["my value"], got["id"] / 2)


def test_nulls_the_log_counts_are_still_an_error_at_open(tmp_path):
    from deltalake import write_deltalake

    path = _appended(str(tmp_path / "t"), parts=2)
    with_nulls = pa.table({"id": pa.array([90, 91], pa.int64()), "x": pa.array([None, 1.5], pa.float64()),
                           "label": pa.array([0, 1], pa.int32())})
    write_deltalake(path, with_nulls, mode="append")
    with pytest.raises(NullValuesError, match="'x'"):
        DeltaSource(path)
    src = DeltaSource(path, null_policy="fill")
    assert all(_footerless(src)[1:]) and len(src) == 82
    assert np.isnan(src.read(np.arange(82), ["id", "x"])["x"]).sum() == 1


def test_a_file_without_a_column_read_is_an_error_when_first_loaded(tmp_path):
    from deltalake import write_deltalake

    path = str(tmp_path / "evolved")
    old = rows(0, 10).append_column("k", pa.array(["b"] * 10))
    write_deltalake(path, old, partition_by=["k"])
    new = rows(10, 20).append_column("y", pa.array([1.0] * 10)).append_column("k", pa.array(["a"] * 10))
    write_deltalake(path, new, partition_by=["k"], mode="append", schema_mode="merge")
    # The log has no null count for 'y' in k=b's file: its footer is read at open, and the
    # error is raised there.
    with pytest.raises(FormatError, match="k=b.*has no column 'y'"):
        DeltaSource(path)
    # With no null check, k=b's file is planned from the log; its footer, read when first
    # loaded, fails the same check then.
    src = DeltaSource(path, null_policy="fill")  # k=a's file (with 'y') is read first
    assert _footerless(src) == [False, True]
    with pytest.raises(FormatError, match="k=b.*has no column 'y'"):
        src.read(np.arange(20), ["id", "y"])
    assert len(DeltaSource(path, columns=["id", "x"]).read(np.arange(20), ["id"])["id"]) == 20


def test_log_statistics_and_partition_values_per_file(tmp_path):
    """What the snapshot takes from each add action, read a column at a time
    (delta.log.open_snapshot), against the log's own records: row counts and top-level null
    counts where the log has statistics (a struct column's are not kept), none for a file
    committed without statistics (planned from its footer), null partition values as None."""
    import json
    import os
    import shutil

    from deltalake import DeltaTable, write_deltalake

    from petastream.delta.log import open_snapshot
    from petastream.storage.location import resolve

    path = str(tmp_path / "s")
    t = pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "x": pa.array([None, 1.0, 2.0, None]),
                  "s": pa.array([{"a": 1}, None, {"a": 3}, {"a": None}], pa.struct([("a", pa.int64())])),
                  "k": pa.array(["p", None, "p", "q"]), "j": pa.array([1, 1, None, 2], pa.int32())})
    write_deltalake(path, t, partition_by=["k", "j"])
    # A copy of one file, committed by hand without statistics (writers may omit them).
    copied = "k=p/extra.parquet"
    source = add_paths(path)[0]
    shutil.copy(os.path.join(path, source), os.path.join(path, copied))
    add = {"path": copied, "partitionValues": {"k": "p", "j": "1"}, "size": os.path.getsize(os.path.join(path, copied)),
           "modificationTime": 0, "dataChange": True}
    with open(os.path.join(path, "_delta_log", f"{1:020d}.json"), "w") as f:
        f.write(json.dumps({"add": add}) + "\n")
    log = {a["path"]: a for a in pa.table(DeltaTable(path).get_add_actions(flatten=False)).to_pylist()}
    snap = open_snapshot(resolve(path, None))
    assert [n for n, _ in snap.partition_fields] == ["k", "j"] and len(snap.files) == len(log) == 5
    for f in snap.files:
        want = log[f.path]
        assert f.partition == (want["partition"]["k"], want["partition"]["j"])
        if f.path == copied:
            assert f.num_records is None and f.null_counts == () and f.partition == ("p", 1)
            continue
        assert f.num_records == want["num_records"]
        assert dict(f.null_counts) == {"id": want["null_count"]["id"], "x": want["null_count"]["x"]}  # 's': nested
    assert sorted((f.partition for f in snap.files), key=repr) == sorted(
        [("p", 1), ("p", 1), (None, 1), ("p", None), ("q", 2)], key=repr)
    assert {f.null_counts for f in snap.files if f.partition == ("q", 2)} == {(("id", 0), ("x", 1))}
    # Read whole: the copied file's rows (from its footer) and every partition value.
    src = DeltaSource(path, columns=["id", "k", "j"], null_policy="fill")  # 's': a struct, not served
    got = src.read(np.arange(len(src)))
    copy_ids = pq.read_table(os.path.join(path, source)).column("id").to_pylist()
    assert len(src) == 5 and sorted(got["id"].tolist()) == sorted([1, 2, 3, 4, *copy_ids])
    assert {(int(i), str(k), int(j)) for i, k, j in zip(got["id"], got["k"], got["j"])} >= {(4, "q", 2)}

