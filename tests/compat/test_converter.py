"""Equivalents of Petastorm's converter tests (spec §3.2) that need Spark and torch, on MDS."""

from __future__ import annotations

import logging
import os
import pickle
import subprocess
import sys
import textwrap
from unittest import mock

import numpy as np
import pytest
import torch

from petastream.compat import SparkDatasetConverter, TransformSpec, make_spark_converter
from petastream.compat import spark_dataset_converter as sdc
from petastream.compat.pytorch import BatchedDataLoader, DataLoader

pytestmark = [pytest.mark.spark, pytest.mark.torch]


def _local(url: str) -> str:
    return url[len("file://"):] if url.startswith("file://") else url


def test_primitive_types_into_torch(primitive_df, converter_env):
    from petastream.torch import loader as loader_for

    df = primitive_df
    conv = make_spark_converter(df)
    assert len(conv) == 2
    with conv.make_torch_dataloader(num_epochs=1, shuffle_row_groups=False) as loader:
        batch = next(iter(loader))
    assert batch["bool_col"].dtype == torch.uint8 and batch["bool_col"].tolist() == [1, 0]  # as Petastorm
    native = next(iter(loader_for(conv.cache_dir_url, 2)))
    assert native["bool_col"].dtype == torch.bool and native["bool_col"].tolist() == [True, False]
    assert batch["float_col"].dtype == torch.float32 and batch["double_col"].dtype == torch.float32
    assert batch["short_col"].dtype == torch.int16 and batch["int_col"].dtype == torch.int32
    assert batch["long_col"].dtype == torch.int64 and batch["byte_col"].dtype == torch.int8
    assert batch["double_col"].tolist() == pytest.approx([1.5, -1.5])
    # Petastorm raises TypeError for these; petastream hands them over as lists
    assert batch["str_col"] == ["a", "héllo"] and batch["bin_col"] == [b"\x01", b""]


def test_delete(spark, converter_env):
    conv = make_spark_converter(spark.range(10))
    path = _local(conv.cache_dir_url)
    assert os.path.exists(os.path.join(path, "index.json"))
    conv.delete()
    assert not os.path.exists(path)


def test_atexit_deletes_the_cache(converter_env, tmp_path):
    out = tmp_path / "url.txt"
    script = textwrap.dedent(f"""
        import os, sys
        os.environ["PYSPARK_PYTHON"] = sys.executable
        from pyspark.sql import SparkSession
        from petastream.compat import make_spark_converter, SparkDatasetConverter
        spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
        spark.conf.set(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, {converter_env!r})
        conv = make_spark_converter(spark.range(20))
        open({str(out)!r}, "w").write(conv.cache_dir_url)
        assert os.path.exists(os.path.join(conv.cache_dir_url[len("file://"):], "index.json"))
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=180)
    url = out.read_text()
    assert url.startswith(converter_env) and not os.path.exists(_local(url))


def test_set_delete_handler():
    def handler(url):
        raise RuntimeError("Not implemented delete handler.")

    sdc.register_delete_dir_handler(handler)
    with pytest.raises(RuntimeError, match="Not implemented delete handler"):
        sdc._delete_dir_handler("/tmp/x")
    sdc.register_delete_dir_handler(None)
    assert sdc._delete_dir_handler is sdc._default_delete_dir_handler


@pytest.mark.parametrize("codec, stored", [(None, None), ("uncompressed", None), ("snappy", "snappy"),
                                           ("GZIP", "gz"), ("bzip2", "bz2"), ("lz4", "zstd:1")])
def test_compression_codec_maps_to_mds(spark, converter_env, codec, stored):
    import petastream

    conv = make_spark_converter(spark.range(50), compression_codec=codec)
    ds = petastream.open(conv.cache_dir_url)
    assert {s["compression"] for s in ds.shards} == {stored}
    suffix = "." + stored.split(":")[0] if stored else ".mds"
    assert all(u.endswith(suffix) for u in conv.file_urls)


def test_bad_codec_message(spark, converter_env):
    with pytest.raises(RuntimeError, match="compression_codec should be None or one of the following values"):
        make_spark_converter(spark.range(5), compression_codec="zip")


def test_df_caching(spark, converter_env, tmp_path):
    a, b = make_spark_converter(spark.range(10)), make_spark_converter(spark.range(10))
    assert a.cache_dir_url == b.cache_dir_url
    assert make_spark_converter(spark.range(20)).cache_dir_url != a.cache_dir_url
    assert make_spark_converter(spark.range(10), parquet_row_group_size_bytes=8 << 20).cache_dir_url != \
        make_spark_converter(spark.range(10), parquet_row_group_size_bytes=16 << 20).cache_dir_url
    assert make_spark_converter(spark.range(10), compression_codec="snappy").cache_dir_url != a.cache_dir_url
    other = "file://" + str(tmp_path / "other")
    spark.conf.set(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, other)
    c = make_spark_converter(spark.range(10))
    assert c.cache_dir_url != a.cache_dir_url and c.cache_dir_url.startswith(other)
    spark.conf.set(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, other + "/")
    assert make_spark_converter(spark.range(10)).cache_dir_url == c.cache_dir_url


def test_df_delete_caching_meta(spark, converter_env):
    c1, c2 = make_spark_converter(spark.range(10)), make_spark_converter(spark.range(20))
    c1.delete()
    urls = [m.cache_dir_url for m in sdc._cache_df_meta_list]
    assert c1.cache_dir_url not in urls and c2.cache_dir_url in urls
    again = make_spark_converter(spark.range(10))
    assert os.path.exists(os.path.join(_local(again.cache_dir_url), "index.json"))


def test_missing_conf_message(spark):
    spark.conf.unset(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF)
    spark.conf.unset("petastream.spark.parentCacheDirUrl")
    with pytest.raises(ValueError, match="Please set the spark config petastorm.spark.converter.parentCacheDirUrl"):
        make_spark_converter(spark.range(3))


def test_scheme_less_conf_is_refused(spark, tmp_path):
    spark.conf.set(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, str(tmp_path))
    with pytest.raises(ValueError, match="scheme-less"):
        make_spark_converter(spark.range(3))


def test_dtype_validation_message(spark, converter_env):
    with pytest.raises(ValueError, match="dtype float16 is not supported. \
            Use 'float32' or float64"):
        make_spark_converter(spark.range(3), dtype="float16")


def test_torch_pickling_remotely(spark, converter_env):
    conv = make_spark_converter(spark.range(100, 200).coalesce(1))
    assert pickle.loads(pickle.dumps(conv)).file_urls == conv.file_urls

    def first_id(_):
        with conv.make_torch_dataloader(num_epochs=1, shuffle_row_groups=False) as loader:
            return int(next(iter(loader))["id"][0])

    assert spark.sparkContext.parallelize(range(1), 1).map(first_id).collect() == [100]


def test_torch_batch_size_and_exactly_once(spark, converter_env):
    conv = make_spark_converter(spark.range(8).repartition(3))
    with conv.make_torch_dataloader(batch_size=2, num_epochs=1) as loader:
        batches = list(loader)
    assert [len(b["id"]) for b in batches] == [2] * 4
    assert sorted(int(i) for b in batches for i in b["id"]) == list(range(8))


def test_num_epochs_none_is_infinite(spark, converter_env):
    conv = make_spark_converter(spark.range(5))
    with conv.make_torch_dataloader(batch_size=2) as loader:
        it = iter(loader)
        assert len([next(it) for _ in range(20)]) == 20


def test_torch_transform_spec(spark, converter_env):
    def scale(pdf):
        pdf["id"] = pdf["id"] * 0.1
        return pdf

    from pyspark.sql.functions import col

    df = spark.range(10).select(col("id").cast("double").alias("id"))
    conv = make_spark_converter(df)
    with conv.make_torch_dataloader(transform_spec=TransformSpec(scale), num_epochs=1) as loader:
        ids = [float(v) for b in loader for v in b["id"]]
    assert len(ids) == 10 and all(0 <= v < 1 for v in ids)


def test_torch_unexpected_param(spark, converter_env):
    conv = make_spark_converter(spark.range(5))
    with pytest.raises(TypeError, match="unexpected keyword argument 'xyz'"):
        with conv.make_torch_dataloader(xyz=1):
            pass


def test_torch_data_loader_fn(spark, converter_env):
    conv = make_spark_converter(spark.range(5))
    with conv.make_torch_dataloader(data_loader_fn=BatchedDataLoader, num_epochs=1) as loader:
        assert isinstance(loader, BatchedDataLoader)
        assert sorted(int(i) for b in loader for i in b["id"]) == list(range(5))
    with conv.make_torch_dataloader(num_epochs=1) as loader:
        assert isinstance(loader, DataLoader)


def test_torch_reader_arguments_are_forwarded(spark, converter_env):
    conv = make_spark_converter(spark.range(100).repartition(3))
    with mock.patch("petastream.compat.spark_dataset_converter.make_batch_reader",
                    wraps=sdc.make_batch_reader) as reader_mock:
        with conv.make_torch_dataloader(reader_pool_type="dummy", cur_shard=1, shard_count=3):
            pass
        kwargs = reader_mock.call_args.kwargs
        assert kwargs["reader_pool_type"] == "dummy" and kwargs["cur_shard"] == 1
        assert kwargs["shard_count"] == 3 and kwargs["num_epochs"] is None and kwargs["workers_count"] == 4
        with conv.make_torch_dataloader(num_epochs=1, workers_count=2):
            pass
        assert reader_mock.call_args.kwargs["num_epochs"] == 1
        assert reader_mock.call_args.kwargs["workers_count"] == 2


def _negate(pdf):  # module level: TransformSpec functions travel to worker processes
    pdf["id"] = -pdf["id"]
    return pdf


def test_process_pool_decodes_in_worker_processes(spark, converter_env):
    import multiprocessing

    conv = make_spark_converter(spark.range(300).repartition(3))
    ids = {}
    for pool in ("thread", "process"):
        with conv.make_torch_dataloader(batch_size=16, num_epochs=1, seed=7, workers_count=2,
                                        reader_pool_type=pool, transform_spec=TransformSpec(_negate)) as loader:
            ids[pool] = [int(i) for b in loader for i in b["id"]]
    assert ids["process"] == ids["thread"] and sorted(ids["process"]) == list(range(-299, 1))
    assert not multiprocessing.active_children()


def test_shards_split_evenly_and_cover_everything(spark, converter_env):
    conv = make_spark_converter(spark.range(103))
    seen, counts = [], []
    for shard in range(3):
        with conv.make_torch_dataloader(batch_size=10, num_epochs=1, cur_shard=shard, shard_count=3) as loader:
            batches = list(loader)
        counts.append(len(batches))
        seen += [int(i) for b in batches for i in b["id"]]
    assert len(set(counts)) == 1  # Petastorm's shards can be unequal; these never are
    assert set(seen) == set(range(103))


def test_wait_file_available(converter_env, tmp_path):
    files = [tmp_path / f"f{i}" for i in range(3)]
    for f in files:
        f.write_text("x")
    sdc._wait_file_available([str(f) for f in files])
    with pytest.raises(RuntimeError, match="Timeout while waiting for all parquet-store files to appear at urls"):
        sdc._wait_file_available([str(f) for f in files] + [str(tmp_path / "missing")])


def test_check_dataset_file_median_size(tmp_path, caplog):
    files = []
    for i in range(5):
        f = tmp_path / f"f{i}"
        f.write_bytes(b"x" * 50)
        files.append(str(f))
    with caplog.at_level(logging.WARNING):
        sdc._check_dataset_file_median_size(files)
        assert "The median size" in caplog.text
        caplog.clear()
        sdc._check_dataset_file_median_size(files[:1])
        assert "The median size" not in caplog.text


def test_get_spark_session_safe_check(spark):
    def call(_):
        sdc._get_spark_session()

    with pytest.raises(Exception, match="should not be invoked from executor side"):
        spark.sparkContext.parallelize(range(1), 1).map(call).collect()


def test_make_spark_convert_from_saved_df_path(spark, converter_env, tmp_path):
    path = str(tmp_path / "saved")
    spark.range(100, 110).write.parquet("file:" + path)
    direct = make_spark_converter(path)  # a Parquet directory: read in place (issue #35)
    assert len(direct) == 10 and not direct.materialized and direct.cache_dir_url is None
    conv = make_spark_converter(path, materialize=True)  # converted to MDS
    assert len(conv) == 10 and conv.materialized
    again = make_spark_converter(conv.cache_dir_url)  # an MDS directory: used as is
    assert again.cache_dir_url == conv.cache_dir_url and len(again) == 10

    def first(_):
        with again.make_torch_dataloader(num_epochs=1, shuffle_row_groups=False) as loader:
            return sorted(int(i) for b in loader for i in b["id"])

    assert spark.sparkContext.parallelize(range(1), 1).map(first).collect() == [list(range(100, 110))]


def test_mosaic_written_dataset_as_df_path(spark, converter_env):
    from tests.conftest import FIXTURES

    conv = make_spark_converter(os.path.join(FIXTURES, "tabular-fixed"))
    assert len(conv) == 1000
    with conv.make_torch_dataloader(batch_size=100, num_epochs=1, shuffle_row_groups=False) as loader:
        batch = next(iter(loader))
    assert batch["features"].shape == (100, 16) and batch["id"].tolist() == list(range(100))


def test_spark_connect_dataframe(spark, spark_connect, converter_env):
    spark_connect.conf.set(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, converter_env)
    df = spark_connect.range(30).selectExpr("id", "cast(id as double) * 2 as x")
    conv = make_spark_converter(df)
    with conv.make_torch_dataloader(batch_size=30, num_epochs=1) as loader:
        batch = next(iter(loader))
    assert sorted(batch["id"].tolist()) == list(range(30)) and batch["x"].dtype == torch.float32
    np.testing.assert_allclose(sorted(batch["x"].tolist()), np.arange(30) * 2.0)


def test_petastorm_dataframe_helpers_stay_importable(spark, caplog):
    from pyspark.ml.linalg import Vectors

    df = spark.createDataFrame([(Vectors.dense([1.0, 2.0]), 1.5, [0.5])], ["v", "x", "a"])
    out = sdc._convert_vector(df, "float32")
    assert out.schema["v"].dataType.simpleString() == "array<float>"
    with caplog.at_level(logging.WARNING):
        out = sdc._convert_precision(out, "float32")
    assert "Converting floating-point columns to float32" in caplog.text
    assert out.schema["x"].dataType.simpleString() == "float"
    assert out.schema["a"].dataType.simpleString() == "array<float>"
    assert "Range" in sdc._get_df_plan(spark.range(3)) and "-appid-" in sdc._gen_cache_dir_name()


def test_keep_cache_conf_lets_a_new_session_reuse_the_dataset(spark, converter_env, tmp_path):
    """keepCacheAtExit=true: the dataset outlives its process and an unchanged, file-backed
    DataFrame converted again later is not materialized again."""
    source = str(tmp_path / "src")
    spark.range(40).write.parquet("file:" + source)
    out = tmp_path / "url.txt"
    script = textwrap.dedent(f"""
        import os, sys
        os.environ["PYSPARK_PYTHON"] = sys.executable
        from pyspark.sql import SparkSession
        from petastream.compat import make_spark_converter, SparkDatasetConverter
        spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
        spark.conf.set(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, {converter_env!r})
        spark.conf.set("petastream.spark.converter.keepCacheAtExit", "true")
        conv = make_spark_converter(spark.read.parquet({"file:" + source!r}), materialize=True)
        open({str(out)!r}, "w").write(conv.cache_dir_url)
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=180)
    url = out.read_text()
    assert os.path.exists(os.path.join(_local(url), "index.json"))  # kept at exit
    from petastream.spark import materialize

    again = materialize(spark.read.parquet("file:" + source), converter_env, size_limit=sdc.DEFAULT_ROW_GROUP_SIZE_BYTES,
                        compression=None)  # what compat writes on a local disk
    assert again.reused and again.url == url
    assert make_spark_converter(spark.read.parquet("file:" + source), materialize=True).cache_dir_url == url
