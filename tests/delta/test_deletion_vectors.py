"""Deletion vectors: our fixture writer (tests/delta/dv_writer.py) checked against deltalake, and
DeltaSource serving exactly the rows deltalake's own reader serves; features we do not honour."""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from petastream.delta import DeltaSource, UnsupportedFeatureError
from petastream.pipeline.loader import BatchLoader
from tests.delta.conftest import add_paths, deltalake_ids, rows
from tests.delta.dv_writer import bitmap, delete_rows, z85


def test_z85_and_bitmap_layout():
    # Z85's reference vector (the ZeroMQ spec): 0x86 0x4F 0xD2 0x6F 0xB5 0x59 0xF7 0x5B -> "HelloWorld".
    assert z85(bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])) == "HelloWorld"
    blob = bitmap([3, 1, 2**32 + 5])
    assert int.from_bytes(blob[:4], "little") == 1681511377  # the RoaringBitmapArray magic
    assert int.from_bytes(blob[4:12], "little") == 2  # two 32-bit bitmaps (high keys 0 and 1)


def _written(tmp_path, name: str, row_group_size: int = 64):
    """A 1,000-row table in two files (partitions 'a' and 'b'), small row groups."""
    from deltalake import write_deltalake

    path = str(tmp_path / name)
    t = rows(0, 1000).append_column("part", pa.array(["a", "b"] * 500))
    write_deltalake(path, t, partition_by=["part"],
                    writer_properties=_small_row_groups(row_group_size))
    return path


def _small_row_groups(n: int):
    from deltalake import WriterProperties

    return WriterProperties(max_row_group_size=n)


@pytest.mark.parametrize("inline", [False, True], ids=["file", "inline"])
def test_deleted_rows_are_never_served(tmp_path, inline):
    path = _written(tmp_path, "dv")
    files = add_paths(path)
    assert pq.ParquetFile(os.path.join(path, files[0])).num_row_groups > 1  # deletions span row groups
    deleted = {files[0]: [0, 1, 63, 64, 65, 200, 499], files[1]: list(range(100, 300))}
    version = delete_rows(path, deleted, inline=inline)
    from deltalake import DeltaTable

    dvs = pa.table(DeltaTable(path).deletion_vectors().read_all()).to_pydict()
    assert sorted(len(v) - sum(v) for v in dvs["selection_vector"]) == [7, 200]  # deltalake reads ours
    expect = deltalake_ids(path)
    assert len(expect) == 1000 - 207
    src = DeltaSource(path)
    assert src.version == version and src.deleted_rows == 207
    got = src.read(np.arange(len(src)))
    assert sorted(got["id"].tolist()) == expect
    assert len(DeltaSource(path, version=version - 1)) == 1000  # before the delete
    # Sliced shards, filters and a shuffled loader see the same rows.
    sliced = DeltaSource(path, rows_per_shard=30, filters=[("part", "=", "a")])
    assert sorted(sliced.read(np.arange(len(sliced)))["id"].tolist()) == [i for i in expect if i % 2 == 0]
    served = sorted(int(i) for b in BatchLoader(path, batch_size=100, shuffle=True, seed=2) for i in b["id"])
    assert served == expect


def test_the_issue_case_with_deletion_vectors(tmp_path):
    """1,000 rows, 500 appended, then DELETE id < 100 as a deletion vector (what Databricks
    writes): 1,400 rows."""
    from deltalake import write_deltalake

    path = str(tmp_path / "t")
    write_deltalake(path, rows(0, 1000))
    write_deltalake(path, rows(1000, 1500), mode="append")
    first = [p for p in add_paths(path)
             if pq.read_table(os.path.join(path, p), columns=["id"]).column("id")[0].as_py() == 0][0]
    delete_rows(path, {first: range(100)})
    assert deltalake_ids(path) == list(range(100, 1500))
    src = DeltaSource(path)
    assert len(src) == 1400 and sorted(src.read(np.arange(1400))["id"].tolist()) == list(range(100, 1500))


def test_a_file_wholly_deleted_serves_nothing(tmp_path):
    path = _written(tmp_path, "all")
    files = add_paths(path)
    delete_rows(path, {files[1]: range(500)}, inline=True)
    src = DeltaSource(path)
    assert sorted(src.read(np.arange(len(src)))["id"].tolist()) == list(range(0, 1000, 2)) == deltalake_ids(path)


def _commit_protocol(path: str, readers: list[str]) -> None:
    log = os.path.join(path, "_delta_log")
    version = max(int(n.split(".")[0]) for n in os.listdir(log) if n.endswith(".json")) + 1
    with open(os.path.join(log, f"{version:020d}.json"), "x") as f:
        f.write(json.dumps({"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                                         "readerFeatures": readers, "writerFeatures": readers}}) + "\n")


def test_a_reader_feature_we_do_not_honour_is_refused_at_open(tmp_path):
    from deltalake import write_deltalake

    path = str(tmp_path / "t")
    write_deltalake(path, rows(0, 10))
    _commit_protocol(path, ["typeWidening"])  # older files may hold narrower types
    with pytest.raises(UnsupportedFeatureError, match=r"at version 1 needs reader feature\(s\) \['typeWidening'\]"):
        DeltaSource(path)
    assert len(DeltaSource(path, version=0)) == 10  # the version before it is fine
    _commit_protocol(path, ["madeUpFeature"])  # one delta-rs itself does not know
    with pytest.raises(UnsupportedFeatureError, match="madeUpFeature"):
        DeltaSource(path)


def test_escaped_partition_directories_get_their_deletion_vectors(tmp_path):
    """The log URL-encodes paths whose directory names are already escaped (k=x%2Fy); delta-rs
    reports deletion vectors by encoded URI: each must still find its file."""
    from deltalake import write_deltalake

    path = str(tmp_path / "t")
    keys = ["a b", "x/y", "c%d", "é=1"]
    write_deltalake(path, pa.table({"id": pa.array(range(8)), "k": pa.array(keys * 2)}), partition_by=["k"])
    delete_rows(path, {p: [0] for p in add_paths(path)})
    src = DeltaSource(path)
    got = src.read(np.arange(len(src)))
    assert sorted(zip(got["id"].tolist(), got["k"].tolist())) == [(4 + i, k) for i, k in enumerate(keys)]
    assert sorted(got["id"].tolist()) == deltalake_ids(path)
    assert len(DeltaSource(path, filters=[("k", "=", "x/y")])) == 1


@pytest.mark.parametrize("strings", ["objects", "ragged"])
def test_deleted_rows_leave_every_column_aligned(tmp_path, strings):
    """A row group keeping most of its rows is loaded whole and read through its kept rows'
    positions (parquet.load.WHOLE_AT), one keeping few is copied: either way each served row's
    strings, bytes, lists and partition value are its own (checked against the id they derive
    from), in plain reads, sliced shards and a shuffled loader."""
    from deltalake import write_deltalake

    path = str(tmp_path / "dv")
    n = 1000
    ids = np.arange(n)
    t = pa.table({"id": pa.array(ids, pa.int64()), "name": pa.array([f"n{i}" for i in ids]),
                  "blob": pa.array([bytes([i % 251]) * (i % 7) for i in ids], pa.binary()),
                  "vals": pa.array([[float(i)] * (i % 4) for i in ids], pa.list_(pa.float64())),
                  "part": pa.array(["a" if i % 2 == 0 else "b" for i in ids])})
    write_deltalake(path, t, partition_by=["part"], writer_properties=_small_row_groups(100))
    files = add_paths(path)
    # File 'a': a few rows of each row group (loaded whole); file 'b': most rows (copied).
    deleted = {files[0]: [j for j in range(500) if j % 50 == 7], files[1]: [j for j in range(500) if j % 4]}
    delete_rows(path, deleted)
    expect = deltalake_ids(path)
    assert len(expect) == 1000 - 10 - 375

    def check(batch) -> None:
        got_ids = [int(i) for i in batch["id"]]
        # strings="ragged": each value's bytes as a uint8 array; "objects" (the loader's): str / bytes
        names, parts = ([v if isinstance(v, str) else bytes(v).decode() for v in (batch[c][k] for k in range(len(got_ids)))]
                        for c in ("name", "part"))
        blobs = [bytes(batch["blob"][k]) for k in range(len(got_ids))]
        assert list(names) == [f"n{i}" for i in got_ids]
        assert [bytes(b) for b in blobs] == [bytes([i % 251]) * (i % 7) for i in got_ids]
        assert [list(batch["vals"][k]) for k in range(len(got_ids))] == [[float(i)] * (i % 4) for i in got_ids]
        assert list(parts) == ["a" if i % 2 == 0 else "b" for i in got_ids]

    for src in (DeltaSource(path), DeltaSource(path, rows_per_shard=30)):
        src.strings = strings  # as a loader sets it
        everything = src.read(np.arange(len(src)))
        assert sorted(int(i) for i in everything["id"]) == expect
        check(everything)
        check(src.read(np.random.default_rng(3).permutation(len(src))[:200]))
        check(src.read_shard(1))  # a shard whole: its rows as a slice of the row group's kept rows
    served = []
    for batch in BatchLoader(DeltaSource(path), batch_size=64, shuffle=True, seed=2):
        check(batch)
        served += [int(i) for i in batch["id"]]
    assert sorted(served) == expect
