"""The converter's direct path (issue #35) on real local Spark DataFrames, classic and Spark
Connect: a plain scan of Parquet files (or of a Delta table, on Connect) is read in place,
nothing written, and serves what the materialized path serves over the same DataFrame: the same
rows in the same order (shuffling off), column order, dtypes (the ``dtype`` casts included),
values; what the two paths would serve differently (nulls, structs, ...) materializes, with the
reason. Spark work is kept small: one Spark-written Parquet directory per module."""

from __future__ import annotations

import datetime
import decimal
import logging
import os
import pickle

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from petastream.compat import spark_dataset_converter as sdc
from petastream.errors import InvalidArgumentError
from tests.spark.helpers import functions_for as _functions
from tests.spark.helpers import session_for as _session

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def typed(spark, tmp_path_factory) -> str:
    """Every type both paths serve, written by Spark itself (one file: collect() order is
    the file's order), 40 rows."""
    from pyspark.sql import types as T

    schema = T.StructType([
        T.StructField(n, t) for n, t in [
            ("i", T.IntegerType()), ("l", T.LongType()), ("f", T.FloatType()), ("d", T.DoubleType()),
            ("s", T.StringType()), ("b", T.BinaryType()), ("flag", T.BooleanType()),
            ("arr", T.ArrayType(T.DoubleType())), ("varr", T.ArrayType(T.IntegerType())),
            ("farr", T.ArrayType(T.FloatType())), ("dec", T.DecimalType(10, 2)), ("dt", T.DateType()),
            ("ts", T.TimestampType()), ("sh", T.ShortType()), ("by", T.ByteType()),
            ("sarr", T.ArrayType(T.StringType()))]])
    rows = [(k, 10 * k, k / 4, k / 8, f"s{k}", bytes([k]), k % 2 == 0, [k * 1.5, 2.0, 3.0],
             list(range(k % 3 + 1)), [k / 3], decimal.Decimal(k) / 4, datetime.date(2020, 1, 1 + k % 28),
             datetime.datetime(2020, 1, 1, k % 24, 0, 0), k, k, ["a", str(k)]) for k in range(40)]
    path = str(tmp_path_factory.mktemp("direct") / "typed")
    spark.createDataFrame(rows, schema).coalesce(1).write.parquet(path)
    return path


@pytest.fixture
def env(converter_env, tmp_path):
    """The parent cache dir conf set; yields the cache directory's path (must stay empty)."""
    return tmp_path / "cache"


def _written(cache) -> list[str]:
    return [os.path.join(r, f) for r, _, fs in os.walk(cache) for f in fs] if os.path.exists(cache) else []


def _torch(conv, **kw):
    with conv.make_torch_dataloader(batch_size=16, num_epochs=1, shuffle_row_groups=False, **kw) as loader:
        return [{k: (v.numpy() if hasattr(v, "numpy") else v) for k, v in b.items()} for b in loader]


def _same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert list(g) == list(w)  # column order
        for name in w:
            a, b = g[name], w[name]
            if isinstance(b, np.ndarray):
                assert isinstance(a, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape, name
                np.testing.assert_array_equal(a, b)
            else:
                assert type(a) is type(b), name
                assert [np.asarray(x).tolist() for x in a] == [np.asarray(x).tolist() for x in b], name


@pytest.mark.parametrize("mode", ["classic", "connect"])
def test_direct_serves_what_materializing_serves(request, typed, env, mode, caplog):
    spark, F = _session(request, mode), _functions(mode)
    spark.conf.set(sdc.SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, request.getfixturevalue("converter_env"))
    frames = {"whole": spark.read.parquet(typed),
              "selected, filtered": spark.read.parquet(typed).where(F.col("i") >= 5).select(
                  "s", "d", "arr", "i", "flag").where(~F.col("s").isin("s7", "s9"))}
    for (what, df), dtype in zip(frames.items(), ("float32", "float64")):
        before = _written(env)
        with caplog.at_level(logging.INFO, logger="petastream.compat.spark_dataset_converter"):
            direct = sdc.make_spark_converter(df, dtype=dtype)
        assert not direct.materialized and "a scan of 1 parquet file" in direct.reason, direct.reason
        assert "reading the DataFrame's 1 Parquet files directly" in caplog.text
        assert _written(env) == before and direct.cache_dir_url is None
        assert [os.path.basename(u) for u in direct.file_urls] == [
            os.path.basename(f) for f in os.listdir(typed) if f.endswith(".parquet")]
        want = sdc.make_spark_converter(df, dtype=dtype, materialize=True)
        assert want.materialized and len(want) == len(direct) == df.count(), what
        _same(_torch(direct), _torch(want))
        want.delete()
    tf = pytest.importorskip("tensorflow") if mode == "classic" else None
    if tf is not None:  # TF once: its import and graph are slow on a loaded machine
        df = frames["whole"].drop("sarr", "varr")  # lists of str and ragged arrays have no TF type
        direct, want = sdc.make_spark_converter(df), sdc.make_spark_converter(df, materialize=True)
        batches = []
        for conv in (direct, want):
            with conv.make_tf_dataset(batch_size=8, num_epochs=1, shuffle_row_groups=False) as ds:
                batches.append([{k: v.numpy() for k, v in b._asdict().items()} for b in ds])
        _same(*batches)


def test_what_would_be_served_otherwise_materializes_with_its_reason(spark, env, tmp_path):
    from pyspark.ml.linalg import Vectors

    from petastream.compat._direct import choose

    root = tmp_path / "refused"
    cases = {
        "nulls": (pa.table({"id": [1, 2], "s": ["a", None]}), "column 's'"),
        "empty arrays": (pa.table({"id": [1, 2], "a": [[1.0], []]}), "column 'a'"),
        "unsigned": (pa.table({"id": pa.array([1, 2], pa.uint16())}), "column 'id'"),
        "struct": (pa.table({"id": [1, 2], "st": [{"x": 1}, {"x": 2}]}), "column 'st'"),
    }
    for name, (table, reason) in cases.items():
        os.makedirs(root / name)
        pq.write_table(table, root / name / "part-0.parquet")
        read, why = choose(spark.read.parquet(str(root / name)), "float32")
        assert read is None and reason in why, (name, why)
    vectors = spark.createDataFrame([(1, Vectors.dense([1.0, 2.0]))], ["id", "v"])
    vectors.write.parquet(str(root / "vectors"))  # a VectorUDT column is a struct in the files
    assert "column 'v'" in choose(spark.read.parquet(str(root / "vectors")), "float32")[1]
    # A filter that leaves the nulls out still materializes (footers count them): the same rows.
    conv = sdc.make_spark_converter(spark.read.parquet(str(root / "nulls")).where("s is not null"))
    assert conv.materialized and "column 's'" in conv.reason and len(conv) == 1
    conv.delete()


def test_materialize_argument_and_conf(spark, typed, env):
    df = spark.read.parquet(typed).select("i")
    conf = sdc.SparkDatasetConverter.MATERIALIZE_CONF
    assert conf == "petastream.spark.converter.materialize"
    try:
        spark.conf.set(conf, "always")
        conv = sdc.make_spark_converter(df)
        assert conv.materialized and "asked to" in conv.reason and len(_written(env)) > 0
        conv.delete()
        assert not sdc.make_spark_converter(df, materialize=False).materialized
        spark.conf.set(conf, "sometimes")
        with pytest.raises(InvalidArgumentError, match="petastream.spark.converter.materialize.*'auto', 'always'"):
            sdc.make_spark_converter(df)
        with pytest.raises(InvalidArgumentError, match="materialize='yes'"):
            sdc.make_spark_converter(df, materialize="yes")
    finally:
        spark.conf.unset(conf)
    assert not sdc.make_spark_converter(df).materialized


def test_files_in_sparks_split_order_pickles_and_deletes_nothing(spark, env, tmp_path):
    root = tmp_path / "sizes"
    os.makedirs(root)
    for name, n in (("a", 20), ("b", 300), ("c", 5), ("d", 300), ("e", 60)):  # b and d: one size
        pq.write_table(pa.table({"id": pa.array(range(len(name) * 1000, len(name) * 1000 + n), pa.int64()),
                                 "tag": [name] * n}), root / f"{name}.parquet")
    df = spark.read.parquet(str(root))
    conv = sdc.make_spark_converter(df)
    assert not conv.materialized
    assert [os.path.basename(u) for u in conv.file_urls] == ["b.parquet", "d.parquet", "e.parquet",
                                                             "a.parquet", "c.parquet"]
    want = [(r["id"], r["tag"]) for r in df.collect()]
    served = [(int(i), t) for b in _torch(conv) for i, t in zip(b["id"], b["tag"])]
    assert served == want
    again = pickle.loads(pickle.dumps(conv))  # a Spark task's copy: plans again, same rows
    assert again.direct.plan is None and len(again) == len(conv)
    assert [(int(i), t) for b in _torch(again) for i, t in zip(b["id"], b["tag"])] == want
    conv.delete()
    assert sorted(os.listdir(root)) == ["a.parquet", "b.parquet", "c.parquet", "d.parquet", "e.parquet"]
    assert _written(env) == []
    # A filter: len() counts the rows it keeps.
    F = __import__("pyspark.sql.functions", fromlist=["col"])
    kept = sdc.make_spark_converter(df.where(F.col("tag").isin("b", "c")))
    assert not kept.materialized and len(kept) == 305
    copy = pickle.loads(pickle.dumps(kept))  # the filter travels too
    assert sorted({t for b in _torch(copy) for t in b["tag"]}) == ["b", "c"] and len(copy) == 305


def test_a_delta_table_on_connect_is_read_at_its_pinned_version(spark_connect, converter_env, tmp_path):
    """A Connect DataFrame of ``format("delta")``: recognised from the client's plan alone (the
    server here has no Delta jars), read at the version pinned at creation, deletion vectors
    applied; rows = what deltalake reads at that version."""
    pytest.importorskip("deltalake")
    from deltalake import write_deltalake

    from tests.delta.conftest import add_paths, deltalake_ids, rows
    from tests.delta.dv_writer import delete_rows

    spark_connect.conf.set(sdc.SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, converter_env)
    F = _functions("connect")
    path = str(tmp_path / "table")
    write_deltalake(path, rows(0, 300))
    write_deltalake(path, rows(300, 500), mode="append")  # v1
    first = add_paths(path)[0]
    v2 = delete_rows(path, {first: [0, 5, 7]})  # deletion vectors
    conv = sdc.make_spark_converter(spark_connect.read.format("delta").load(path))
    assert not conv.materialized and f"at version {v2}" in conv.reason, conv.reason
    write_deltalake(path, rows(500, 600), mode="append")  # after creation: not served
    ids = sorted(int(i) for b in _torch(conv) for i in b["id"])
    assert ids == deltalake_ids(path, v2) and len(ids) == len(conv) == 497
    copy = pickle.loads(pickle.dumps(conv))  # a worker's copy opens the same version again
    assert sorted(int(i) for b in _torch(copy) for i in b["id"]) == ids
    old = sdc.make_spark_converter(spark_connect.read.format("delta").option("versionAsOf", 0).load(path)
                                   .where(F.col("label") == 1).select("id", "x"))
    assert not old.materialized and len(old) == 100
    batch = _torch(old)[0]
    assert list(batch) == ["id", "x"] and batch["x"].dtype == np.float32  # dtype='float32' on the table's doubles
    assert sorted(int(i) for b in _torch(old) for i in b["id"]) == [i for i in deltalake_ids(path, 0) if i % 3 == 1]
    latest = sdc.make_spark_converter(path)  # a Delta table's directory given as a path
    assert not latest.materialized and len(latest) == 597 and "Delta table" in latest.reason
    latest.delete()
    assert os.path.exists(os.path.join(path, first)) and os.path.isdir(os.path.join(path, "_delta_log"))
