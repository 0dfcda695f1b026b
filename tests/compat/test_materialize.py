"""materialize_dataset and build_rowgroup_index with real local Spark: the fixtures' schemas and
rows re-written by compat read back as Petastorm read its own; the metadata is Petastorm's shape.
(That real Petastorm 0.13.1 reads these datasets is checked by
tests/fixtures/petastorm/check_compat_output.py, which CI cannot run.)"""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow.parquet as pq
import pytest

from petastream.compat import selectors as S
from petastream.compat.codecs import NdarrayCodec, ScalarCodec
from petastream.compat.etl import dataset_metadata, rowgroup_indexing
from petastream.compat.etl.dataset_metadata import materialize_dataset
from petastream.compat.etl.rowgroup_indexers import FieldNotNullIndexer, SingleFieldIndexer
from petastream.compat.unischema import Unischema, UnischemaField, dict_to_spark_row
from tests.compat.petastorm_read import read_rows
from tests.compat.petastorm_values import as_input, decode, same
from tests.compat.test_metadata_pickle import globals_named

pytestmark = pytest.mark.spark

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "petastorm")
_CONF_KEYS = ("parquet.block.size", "parquet.summary.metadata.level", "parquet.block.size.row.check.min",
              "parquet.page.size.row.check.min")


def _fixture(name):
    with open(os.path.join(FIXTURES, f"{name}.expected.json")) as f:
        expected = json.load(f)
    return dataset_metadata.get_schema(os.path.join(FIXTURES, name)), expected


def _rewrite(spark, name, url, files, partition_by=None, **options):
    schema, expected = _fixture(name)
    rows = [{k: as_input(decode(v)) for k, v in row.items()} for row in expected["rows"]]
    with materialize_dataset(spark, url, schema, **options):
        df = spark.createDataFrame([dict_to_spark_row(schema, r) for r in rows], schema.as_spark_schema())
        writer = df.repartitionByRange(files, "id").write.mode("overwrite")
        if partition_by:
            writer = writer.partitionBy(partition_by)
        writer.parquet(url)
    return schema, expected


@pytest.mark.parametrize("name,files,partition_by", [("all_codecs", 2, None), ("partitioned", 2, "split")])
def test_rewritten_fixture_reads_back_as_petastorm_read_it(spark, tmp_path, name, files, partition_by):
    url = "file://" + str(tmp_path / name)
    schema, expected = _rewrite(spark, name, url, files, partition_by, row_group_size_mb=1)
    assert str(dataset_metadata.get_schema(url)) == expected["schema_str"]
    rows = sorted(read_rows(url), key=lambda r: int(r.id))
    # JPEG is lossy: re-encoding Petastorm's decoded pixels is a second generation; compared below.
    differences = [(int(r.id), k) for r, e in zip(rows, expected["rows"]) for k, v in e.items()
                   if not k.startswith("jpeg") and not same(getattr(r, k), decode(v))]
    assert len(rows) == len(expected["rows"]) and differences == []
    for r, e in zip(rows, expected["rows"]):
        for k in (k for k in e if k.startswith("jpeg")):
            want = decode(e[k])
            assert getattr(r, k).shape == want.shape
            assert np.abs(getattr(r, k).astype(int) - want).mean() < 2

    # The metadata Petastorm reads: its pickle vocabulary, and row groups of every file.
    written = pq.read_schema(str(tmp_path / name / "_common_metadata")).metadata
    theirs = pq.read_schema(os.path.join(FIXTURES, name, "_common_metadata")).metadata
    assert globals_named(written[dataset_metadata.UNISCHEMA_KEY]) == globals_named(theirs[dataset_metadata.UNISCHEMA_KEY])
    counts = json.loads(written[dataset_metadata.ROW_GROUPS_PER_FILE_KEY])
    pieces = dataset_metadata.load_row_groups(url)
    assert sorted(counts) == sorted({p.path for p in pieces})
    assert len(counts) == len(expected["row_groups_per_file"])  # as many files as Petastorm's write made
    assert all(pq.ParquetFile(str(tmp_path / name / p)).num_row_groups == n for p, n in counts.items())
    assert b"org.apache.spark.sql.parquet.row.metadata" in written  # the Parquet schema Spark wrote


def test_row_group_size_is_applied_and_the_conf_restored(spark, tmp_path):
    schema = Unischema("Big", [UnischemaField("id", np.int64, (), ScalarCodec(_spark_types().LongType()), False),
                               UnischemaField("blob", np.uint8, (200_000,), NdarrayCodec(), False)])
    before = {k: spark.conf.get(k, None) for k in _CONF_KEYS}
    url = "file://" + str(tmp_path / "big")
    rng = np.random.default_rng(0)
    with materialize_dataset(spark, url, schema, row_group_size_mb=1):
        assert spark.conf.get("parquet.block.size") == str(1024 * 1024)
        rows = [dict_to_spark_row(schema, {"id": np.int64(i), "blob": rng.integers(0, 255, 200_000, dtype=np.uint8)})
                for i in range(24)]
        spark.createDataFrame(rows, schema.as_spark_schema()).coalesce(1).write.parquet(url)
    assert {k: spark.conf.get(k, None) for k in _CONF_KEYS} == before
    pieces = dataset_metadata.load_row_groups(url)
    assert len({p.path for p in pieces}) == 1 and len(pieces) >= 3  # ~4.8 MB in 1 MB row groups
    assert sorted(int(r.id) for r in read_rows(url)) == list(range(24))


def test_failed_block_writes_no_metadata_and_restores_the_conf(spark, tmp_path):
    schema, _ = _fixture("indexed")
    before = {k: spark.conf.get(k, None) for k in _CONF_KEYS}
    url = "file://" + str(tmp_path / "failed")
    with pytest.raises(RuntimeError, match="ETL failed"):
        with materialize_dataset(spark, url, schema, row_group_size_mb=8):
            spark.range(3).write.parquet(url)
            raise RuntimeError("ETL failed")
    assert {k: spark.conf.get(k, None) for k in _CONF_KEYS} == before
    assert not (tmp_path / "failed" / "_common_metadata").exists()


def test_nothing_written_is_a_clear_error(spark, tmp_path):
    schema, _ = _fixture("indexed")
    with pytest.raises(dataset_metadata.PetastormMetadataGenerationError, match="no Parquet files under"):
        with materialize_dataset(spark, str(tmp_path / "empty"), schema):
            pass


def test_rowgroup_index_built_by_compat_selects_what_petastorm_selected(spark, tmp_path):
    url = "file://" + str(tmp_path / "indexed")
    _, expected = _rewrite(spark, "indexed", url, 4)
    rowgroup_indexing.build_rowgroup_index(url, spark.sparkContext, [
        SingleFieldIndexer("label_idx", "label"), SingleFieldIndexer("tags_idx", "tags"),
        FieldNotNullIndexer("note_idx", "note")])
    indexes = rowgroup_indexing.get_row_group_indexes(url)
    assert {n: {str(v): sorted(i.get_row_group_indexes(v)) for v in i.indexed_values} for n, i in indexes.items()} \
        == expected["rowgroup_index"]
    from tests.compat.test_petastorm_fixtures import _SELECTORS

    pieces = dataset_metadata.load_row_groups(url)
    for check, make in _SELECTORS.items():
        selected = S.select_row_groups(make(), indexes, range(len(pieces)))
        ids = sorted(int(r.id) for i in selected for r in _rows_of(url, pieces[i]))
        assert ids == expected["selectors"][check], check
    # The index joined the schema in _common_metadata; the schema is still there.
    assert dataset_metadata.get_schema(url).fields == dataset_metadata.get_schema(os.path.join(FIXTURES, "indexed")).fields


def _rows_of(url, piece):
    table = pq.ParquetFile(url[len("file://"):] + "/" + piece.path).read_row_group(piece.row_group, ["id"])
    return [type("R", (), {"id": v}) for v in table.column("id").to_pylist()]


def test_spark_connect_session(tmp_path):
    from tests import spark_session

    connect = spark_session.connect()
    schema, expected = _fixture("partitioned")
    url = "file://" + str(tmp_path / "connect")
    rows = [{k: as_input(decode(v)) for k, v in row.items()} for row in expected["rows"]]
    with materialize_dataset(connect, url, schema, row_group_size_mb=1):
        assert connect.conf.get("parquet.block.size") == str(1024 * 1024)
        spark_rows = [dict_to_spark_row(schema, r) for r in rows]
        connect.createDataFrame(spark_rows, schema.as_spark_schema()).write.parquet(url)
    assert sorted(int(r.id) for r in read_rows(url)) == list(range(6))
    assert connect.conf.get("parquet.block.size", None) is None


def _spark_types():
    import pyspark.sql.types as T

    return T


def test_use_summary_metadata(spark, tmp_path):
    url = "file://" + str(tmp_path / "summary")
    _rewrite(spark, "indexed", url, 4, use_summary_metadata=True)
    written = pq.read_schema(str(tmp_path / "summary" / "_common_metadata")).metadata
    assert dataset_metadata.UNISCHEMA_KEY in written
    pieces = dataset_metadata.load_row_groups(url)
    assert len(pieces) == 4
    # Spark wrote the _metadata summary listing the row groups, or (if this Spark does not) the
    # counts went into _common_metadata as without the option.
    assert (tmp_path / "summary" / "_metadata").exists() != (dataset_metadata.ROW_GROUPS_PER_FILE_KEY in written)


def test_filesystem_factory(spark, tmp_path):
    import fsspec

    schema, _ = _fixture("indexed")
    url = str(tmp_path / "factory")
    with materialize_dataset(spark, url, schema, filesystem_factory=lambda: fsspec.filesystem("file")):
        spark.createDataFrame([dict_to_spark_row(schema, {"id": np.int32(1), "label": "a", "tags": np.array(["x"]),
                                                          "vec": np.zeros(4, np.float32)})],
                              schema.as_spark_schema()).write.parquet(url)
    assert [int(r.id) for r in read_rows(url)] == [1]
    with pytest.raises(TypeError, match=r"filesystem_factory\(\): expected an fsspec filesystem"):
        with materialize_dataset(spark, url, schema, filesystem_factory=lambda: "hdfs"):
            pass
