"""Datasets written by the real Petastorm 0.13.1 (tests/fixtures/petastorm), read by compat:
schema, row groups, every value (typed as Petastorm's make_reader yields it), predicates and
row-group selectors give what Petastorm gave (recorded in NAME.expected.json)."""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow.parquet as pq
import pytest

from petastream.compat import predicates as P
from petastream.compat import selectors as S
from petastream.compat._decode import decode_table
from petastream.compat.etl import dataset_metadata, rowgroup_indexing
from petastream.compat.etl.rowgroup_indexers import FieldNotNullIndexer, SingleFieldIndexer
from tests.compat.petastorm_read import read_rows
from tests.compat.petastorm_values import decode, same

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "petastorm")
NAMES = ["all_codecs", "indexed", "partitioned"]


def _expected(name: str) -> dict:
    with open(os.path.join(FIXTURES, f"{name}.expected.json")) as f:
        return json.load(f)


def _url(name: str) -> str:
    return os.path.join(FIXTURES, name)


@pytest.mark.parametrize("name", NAMES)
def test_schema_from_petastorm_metadata(name):
    expected = _expected(name)
    schema = dataset_metadata.get_schema(_url(name))
    assert str(schema) == expected["schema_str"]
    got = [{"name": f.name, "numpy_dtype": "bool_" if f.numpy_dtype is np.bool_ else f.numpy_dtype.__name__,
            "shape": list(f.shape), "codec": None if f.codec is None else str(f.codec), "nullable": f.nullable}
           for f in schema.fields.values()]
    assert got == expected["fields"]
    assert dataset_metadata.get_schema_from_dataset_url("file://" + _url(name)).fields == schema.fields


@pytest.mark.parametrize("name", NAMES)
def test_row_groups_in_petastorm_order(name):
    expected = _expected(name)
    pieces = dataset_metadata.load_row_groups(_url(name))
    assert [[p.path, p.row_group] for p in pieces] == expected["pieces"]
    if name == "partitioned":
        assert [dict(p.partition_keys)["split"] for p in pieces] == ["test", "test", "train", "train"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.usefixtures("image_decoder")
def test_every_value_as_petastorm_decodes_it(name):
    expected = _expected(name)["rows"]
    rows = sorted(read_rows(_url(name)), key=lambda r: int(r.id))
    assert len(rows) == len(expected)
    differences = [(int(r.id), k) for r, e in zip(rows, expected) for k, v in e.items()
                   if not same(getattr(r, k), decode(v))]
    assert differences == []
    assert type(rows[0]).__name__ == f"{_expected(name)['schema_name']}_view"


@pytest.mark.usefixtures("image_decoder")
def test_jpeg_pixels_equal_opencv_decode():
    # Lossy: what is compared is each decoder's decode of Petastorm's (OpenCV's) files with
    # OpenCV's decode of them, which make_fixtures.py recorded.
    expected = {int(decode(r["id"])): r for r in _expected("all_codecs")["rows"]}
    for row in read_rows(_url("all_codecs")):
        for field in ("jpeg_rgb", "jpeg_gray"):
            assert np.array_equal(getattr(row, field), decode(expected[int(row.id)][field]))


def test_schema_fields_by_name_and_regex():
    schema = dataset_metadata.get_schema(_url("all_codecs"))
    view = schema.create_schema_view([schema.id, "png_.*", "maybe_(int|str)"])
    assert list(view.fields) == ["id", "maybe_int", "maybe_str", "png_rgb", "png_gray", "png_u16"]
    rows = read_rows(_url("all_codecs"), view)
    assert rows[0]._fields == ("id", "maybe_int", "maybe_str", "png_rgb", "png_gray", "png_u16")


_PREDICATES = {
    "in_set_id": lambda: P.in_set({1, 4, 7, 100}, "id"),
    "in_set_name": lambda: P.in_set(["héllo1", "日本2", "nope"], "name"),
    "in_negate_in_set": lambda: P.in_negate(P.in_set([0, 1, 2], "id")),
    "in_lambda_f32": lambda: P.in_lambda(["f32"], lambda v: v > 0),
    "in_lambda_state": lambda: P.in_lambda(["id", "i32"], lambda a, b, s: (a + s) % 3 == 0, 1),
    "in_reduce_all": lambda: P.in_reduce([P.in_set({1, 2, 3, 4}, "id"), P.in_lambda(["flag"], lambda f: not f)], all),
    "in_reduce_any": lambda: P.in_reduce([P.in_set({1}, "id"), P.in_set({"s3"}, "maybe_str")], any),
    "in_intersection_labels": lambda: P.in_intersection(["dog", "x"], "labels"),
    "split_0": lambda: P.in_pseudorandom_split([0.3, 0.7], 0, "id"),
    "split_1": lambda: P.in_pseudorandom_split([0.3, 0.7], 1, "id"),
    "split_name": lambda: P.in_pseudorandom_split([0.5, 0.25, 0.25], 2, "name"),
}


@pytest.mark.parametrize("check", sorted(_PREDICATES))
def test_predicates_select_what_petastorm_selects(check):
    expected = _expected("all_codecs")["predicates"][check]
    schema = dataset_metadata.get_schema(_url("all_codecs"))
    table = pq.read_table(_url("all_codecs"))
    columns = decode_table(schema, table)
    mask = P.predicate_mask(_PREDICATES[check](), columns, table.num_rows)
    assert sorted(int(i) for i in columns["id"][mask]) == expected


_SELECTORS = {
    "label_dog": lambda: S.SingleIndexSelector("label_idx", ["dog"]),
    "label_cat_fish": lambda: S.SingleIndexSelector("label_idx", ["cat", "fish"]),
    "tags_bird": lambda: S.SingleIndexSelector("tags_idx", ["bird"]),
    "note_not_null": lambda: S.SingleIndexSelector("note_idx", ["Field is Not Null"]),
    "intersect": lambda: S.IntersectIndexSelector([S.SingleIndexSelector("label_idx", ["cat"]),
                                                   S.SingleIndexSelector("tags_idx", ["dog"])]),
    "union": lambda: S.UnionIndexSelector([S.SingleIndexSelector("label_idx", ["bird"]),
                                           S.SingleIndexSelector("tags_idx", ["fish"])]),
}


def _ids_of_row_groups(url: str, selected: list[int]) -> list[int]:
    pieces = dataset_metadata.load_row_groups(url)
    ids: list[int] = []
    for i in selected:
        table = pq.ParquetFile(os.path.join(url, pieces[i].path)).read_row_group(pieces[i].row_group, ["id"])
        ids += table.column("id").to_pylist()
    return sorted(ids)


@pytest.mark.parametrize("check", sorted(_SELECTORS))
def test_selectors_on_petastorm_index(check):
    url = _url("indexed")
    indexes = rowgroup_indexing.get_row_group_indexes(url)
    selected = S.select_row_groups(_SELECTORS[check](), indexes, range(len(dataset_metadata.load_row_groups(url))))
    assert _ids_of_row_groups(url, selected) == _expected("indexed")["selectors"][check]


def test_petastorm_index_unpickles_into_our_indexers():
    indexes = rowgroup_indexing.get_row_group_indexes(_url("indexed"))
    assert {k: type(v) for k, v in indexes.items()} == {
        "label_idx": SingleFieldIndexer, "tags_idx": SingleFieldIndexer, "note_idx": FieldNotNullIndexer}
    recorded = _expected("indexed")["rowgroup_index"]
    for name, indexer in indexes.items():
        assert {str(v): sorted(indexer.get_row_group_indexes(v)) for v in indexer.indexed_values} == recorded[name]
    # Petastorm's keys are numpy strings; plain str looks them up.
    assert indexes["label_idx"].get_row_group_indexes("dog") == {1}


def test_selector_errors_are_petastorm_s():
    indexes = rowgroup_indexing.get_row_group_indexes(_url("indexed"))
    with pytest.raises(ValueError, match="derived from RowGroupSelectorBase"):
        S.select_row_groups(object(), indexes, range(4))
    with pytest.raises(ValueError, match=r"Some of required indexes \['nope'\] are not available"):
        S.select_row_groups(S.SingleIndexSelector("nope", [1]), indexes, range(4))
    with pytest.raises(ValueError, match="Row groups index is not available"):
        rowgroup_indexing.get_row_group_indexes(_url("all_codecs"))


def test_missing_metadata_is_petastorm_metadata_error(tmp_path):
    pq.write_table(pq.read_table(_url("indexed")).select(["id"]), str(tmp_path / "part-0.parquet"))
    with pytest.raises(dataset_metadata.PetastormMetadataError, match="Could not find _common_metadata file"):
        dataset_metadata.get_schema(str(tmp_path))
    # Petastorm falls back to the footers when there is no metadata file at all.
    assert dataset_metadata.load_row_groups(str(tmp_path)) == [dataset_metadata.RowGroupPiece("part-0.parquet", 0)]
    inferred = dataset_metadata.infer_or_load_unischema(str(tmp_path))
    assert [(f.name, f.numpy_dtype, f.codec) for f in inferred.fields.values()] == [("id", np.int32, None)]


def test_infer_from_partitioned_arrow_dataset_puts_partition_keys_first():
    import pyarrow.dataset as pads

    from petastream.compat.unischema import Unischema

    inferred = Unischema.from_arrow_schema(pads.dataset(_url("partitioned"), format="parquet", partitioning="hive"))
    assert [(f.name, f.numpy_dtype, f.shape) for f in inferred.fields.values()] == [
        ("split", np.str_, ()), ("id", np.int64, ()), ("vec", np.bytes_, ())]


def test_reading_imports_no_pyspark():
    import subprocess
    import sys

    code = ("import sys\n"
            "from tests.compat.petastorm_read import read_rows\n"
            f"rows = read_rows({_url('all_codecs')!r})\n"
            "from petastream.compat.etl import rowgroup_indexing\n"
            f"rowgroup_indexing.get_row_group_indexes({_url('indexed')!r})\n"
            "print(len(rows), 'pyspark' in sys.modules)")
    root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root)
    assert out.stdout.split() == ["10", "False"]


def test_fsspec_url_file_list_and_pyarrow_filesystem():
    import fsspec
    import pyarrow.fs

    memory = fsspec.filesystem("memory")
    memory.put(_url("partitioned"), "/fixture-partitioned", recursive=True)
    try:
        url = "memory://fixture-partitioned"
        assert dataset_metadata.get_schema(url)._name == "Partitioned"
        assert [[p.path, p.row_group] for p in dataset_metadata.load_row_groups(url)] == _expected("partitioned")["pieces"]
        files = [f"{url}/{p}" for p, _ in _expected("partitioned")["pieces"]]
        assert dataset_metadata.get_schema_from_dataset_url(files)._name == "Partitioned"
    finally:
        memory.rm("/fixture-partitioned", recursive=True)
    local = pyarrow.fs.LocalFileSystem()
    assert dataset_metadata.get_schema_from_dataset_url(_url("indexed"), filesystem=local)._name == "Indexed"
    with pytest.raises(TypeError, match="filesystem: expected an fsspec filesystem or a pyarrow.fs.FileSystem"):
        dataset_metadata.get_schema_from_dataset_url(_url("indexed"), filesystem=object())
