"""Which files a URL names: Hive partitions, Spark's side files, lists, mismatched schemas."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from petastream.errors import FormatError, InvalidArgumentError
from petastream.parquet import open_parquet
from petastream.spark import NullValuesError
from tests.parquet.helpers import write_files


def _hive(root: str) -> dict[tuple, list[int]]:
    """year=<int>/cat=<str> partitions (a value needing URL escapes among them), plus Spark's
    side files; returns {(year, cat): ids}."""
    parts: dict[tuple, list[int]] = {}
    i = 0
    for year in (2020, 2021):
        for cat, escaped in (("a b", "a%20b"), ("x/y", "x%2Fy")):
            d = os.path.join(root, f"year={year}", f"cat={escaped}")
            os.makedirs(d)
            ids = list(range(i, i + 7))
            pq.write_table(pa.table({"id": np.array(ids, np.int64), "v": np.array(ids, np.float32)}),
                           os.path.join(d, "part-00000.snappy.parquet"), row_group_size=4)
            parts[(year, cat)] = ids
            i += 7
    open(os.path.join(root, "_SUCCESS"), "w").close()
    open(os.path.join(root, ".part-00000.snappy.parquet.crc"), "w").close()
    os.makedirs(os.path.join(root, "_temporary", "0"))
    open(os.path.join(root, "_temporary", "0", "part-junk"), "w").close()
    schema = pa.schema([("id", pa.int64()), ("v", pa.float32())])
    pq.write_metadata(schema, os.path.join(root, "_common_metadata"))
    return parts


def test_hive_partitions_become_columns(tmp_path):
    root = str(tmp_path / "t")
    parts = _hive(root)
    src = open_parquet(root)
    assert src.columns == {"id": "int64", "v": "float32", "year": "int32", "cat": "str"}
    assert len(src) == 28 and len(src.files) == 4
    got = src.read(np.arange(len(src)))
    for k in range(len(src)):
        (year, cat), = [key for key, ids in parts.items() if int(got["id"][k]) in ids]
        assert (int(got["year"][k]), got["cat"][k]) == (year, cat)
    assert got["year"].dtype == np.int32


def test_filters_on_partition_columns_prune_files(tmp_path):
    root = str(tmp_path / "t")
    parts = _hive(root)
    src = open_parquet(root, filters=[("year", "=", 2021), ("cat", "=", "x/y")], columns=["id", "cat"])
    assert {u.file for u in src.plan.units} == {3}
    assert sorted(src.read(np.arange(len(src)))["id"].tolist()) == parts[(2021, "x/y")]


def test_null_partition_follows_the_null_policy(tmp_path):
    root = str(tmp_path / "t")
    for year in ("2020", "__HIVE_DEFAULT_PARTITION__"):
        os.makedirs(os.path.join(root, f"year={year}"))
        pq.write_table(pa.table({"id": np.arange(3)}), os.path.join(root, f"year={year}", "p.parquet"))
    src = open_parquet(root)
    with pytest.raises(NullValuesError, match=r"column 'year' .* null partition value"):
        src.read(np.arange(6))
    filled = open_parquet(root, null_policy="fill").read(np.arange(6))
    assert sorted(filled["year"].tolist()) == [0, 0, 0, 2020, 2020, 2020]


def test_a_list_of_files_and_directories(tmp_path, data):
    paths = write_files(data, str(tmp_path / "a"), files=3)
    src = open_parquet([paths[2], paths[0]])
    ids = src.read(np.arange(len(src)), ["id"])["id"].tolist()
    first = pq.read_table(paths[0]).column("id").to_pylist()
    third = pq.read_table(paths[2]).column("id").to_pylist()
    assert ids == third + first  # the files in the order given
    other = write_files(data.slice(0, 10), str(tmp_path / "b"), files=1)
    both = open_parquet([str(tmp_path / "a"), os.path.dirname(other[0])])
    assert len(both) == data.num_rows + 10
    with pytest.raises(FormatError, match="listed twice"):
        open_parquet([paths[0], str(tmp_path / "a")])


def test_files_that_disagree_on_a_column_type(tmp_path):
    root = tmp_path / "m"
    root.mkdir()
    pq.write_table(pa.table({"id": np.arange(3), "x": np.arange(3, dtype=np.int32)}), str(root / "a.parquet"))
    pq.write_table(pa.table({"id": np.arange(3), "x": np.arange(3, dtype=np.int64)}), str(root / "b.parquet"))
    with pytest.raises(FormatError, match=r"column 'x' is int64 in .*b\.parquet and int32 in .*a\.parquet"):
        open_parquet(str(root))
    assert len(open_parquet(str(root), columns=["id"])) == 6  # the column left out: fine


def test_files_with_other_columns(tmp_path):
    root = tmp_path / "m"
    root.mkdir()
    pq.write_table(pa.table({"id": np.arange(3)}), str(root / "a.parquet"))
    pq.write_table(pa.table({"id": np.arange(3), "extra": np.arange(3)}), str(root / "b.parquet"))
    with pytest.raises(FormatError, match=r"columns \['extra'\] that .*a\.parquet lacks"):
        open_parquet(str(root))
    assert len(open_parquet(str(root), columns=["id"])) == 6
    with pytest.raises(InvalidArgumentError, match=r"columns \['extra'\] are not in .*a\.parquet"):
        open_parquet(str(root), columns=["extra"])


def test_what_is_not_parquet(tmp_path):
    root = tmp_path / "m"
    root.mkdir()
    with pytest.raises(FileNotFoundError, match="no Parquet files under"):
        open_parquet(str(root))
    (root / "_SUCCESS").touch()
    with pytest.raises(FileNotFoundError, match="no Parquet files under"):
        open_parquet(str(root))
    pq.write_table(pa.table({"id": np.arange(3)}), str(root / "a.parquet"))
    (root / "notes.txt").write_text("not parquet at all, but long enough")
    with pytest.raises(FormatError, match=r"notes\.txt.*(not a Parquet file|Parquet directory)"):
        open_parquet(str(root))
    with pytest.raises(FileNotFoundError, match="no Parquet file or directory"):
        open_parquet(str(tmp_path / "missing"))


def test_partition_columns_alone(tmp_path):
    root = str(tmp_path / "t")
    parts = _hive(root)
    src = open_parquet(root, columns=["year"], filters=[("id", ">=", 3)])
    years = src.read(np.arange(len(src)))["year"]
    assert len(src) == sum(len([i for i in ids if i >= 3]) for ids in parts.values())
    assert sorted(set(years.tolist())) == [2020, 2021]


@pytest.mark.parametrize("kind", ["fsspec", "pyarrow"])
def test_a_filesystem_object_and_hadoop_folder_markers(tmp_path, kind):
    # Petastorm's ETL API passes filesystem objects (fsspec or pyarrow.fs); Hadoop leaves
    # empty "<dir>_$folder$" objects beside directories on object stores
    import fsspec
    import pyarrow.fs

    from petastream.errors import InvalidArgumentTypeError
    from petastream.parquet.discover import discover

    for part in ("b", "a"):
        os.makedirs(tmp_path / f"k={part}")
        pq.write_table(pa.table({"id": [1]}), str(tmp_path / f"k={part}" / "x.parquet"))
        open(tmp_path / f"k={part}_$folder$", "w").close()
    given = fsspec.filesystem("file") if kind == "fsspec" else pyarrow.fs.LocalFileSystem()
    found = discover(str(tmp_path), filesystem=given)
    assert [os.path.relpath(f.path, str(tmp_path)) for f in found.files] == ["k=a/x.parquet", "k=b/x.parquet"]
    assert [f.partition for f in found.files] == [("a",), ("b",)]
    assert not found.roots[0].is_local  # read through the object given
    with pytest.raises(InvalidArgumentTypeError, match="filesystem: expected an fsspec filesystem"):
        discover(str(tmp_path), filesystem=object())
