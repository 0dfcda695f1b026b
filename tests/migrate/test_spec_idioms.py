"""Before/after pairs for every real-world idiom in specs/petastorm-converter.md §4.

Each case also checks idempotence (a second run changes nothing) through assert_migrates.
"""

from __future__ import annotations

import pytest

from .conftest import assert_migrates

CASES = [
    pytest.param(
        """
        from petastorm.spark import SparkDatasetConverter, make_spark_converter
        spark.conf.set(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, "file:///dbfs/tmp/petastorm/cache")
        converter_train = make_spark_converter(df_train)
        """,
        """
        from petastream.compat import SparkDatasetConverter, make_spark_converter
        spark.conf.set(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, "file:///dbfs/tmp/petastorm/cache")
        converter_train = make_spark_converter(df_train)
        """,
        [],
        id="1-canonical-readme-databricks",
    ),
    pytest.param(
        """
        from petastorm.spark import make_spark_converter
        spark.conf.set("petastorm.spark.converter.parentCacheDirUrl", cache_dir)
        conv = make_spark_converter(df)
        """,
        """
        from petastream.compat import make_spark_converter
        spark.conf.set("petastorm.spark.converter.parentCacheDirUrl", cache_dir)
        conv = make_spark_converter(df)
        """,
        [],
        id="2-conf-literal-key-kept",
    ),
    pytest.param(
        """
        from petastorm.spark import make_spark_converter
        spark.conf.set("SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF", cache_dir)   # no-op bug
        """,
        """
        from petastream.compat import make_spark_converter
        spark.conf.set("SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF", cache_dir)   # no-op bug
        """,
        ["conf-key-bug"],
        id="2-conf-constant-name-bug-reported",
    ),
    pytest.param(
        """
        from pyspark.sql import SparkSession
        from petastorm.spark import SparkDatasetConverter, make_spark_converter

        spark = (SparkSession.builder.appName("x")
                 .config(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, f"file://{cache_dir}")
                 .getOrCreate())
        """,
        """
        from pyspark.sql import SparkSession
        from petastream.compat import SparkDatasetConverter, make_spark_converter

        spark = (SparkSession.builder.appName("x")
                 .config(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, f"file://{cache_dir}")
                 .getOrCreate())
        """,
        [],
        id="3-conf-at-session-build",
    ),
    pytest.param(
        """
        from pyspark import SparkConf
        from petastorm.spark import make_spark_converter
        conf = SparkConf(); conf.set("petastorm.spark.converter.parentCacheDirUrl", "file:///tmp/cache")
        spark = SparkSession.builder.config(conf=conf).getOrCreate()
        """,
        """
        from pyspark import SparkConf
        from petastream.compat import make_spark_converter
        conf = SparkConf(); conf.set("petastorm.spark.converter.parentCacheDirUrl", "file:///tmp/cache")
        spark = SparkSession.builder.config(conf=conf).getOrCreate()
        """,
        [],
        id="4-conf-through-sparkconf",
    ),
    pytest.param(
        """
        from petastorm.spark import SparkDatasetConverter, make_spark_converter
        dbutils.fs.rm("/tmp/petastorm", recurse=True)
        spark.conf.set(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, train_dir); conv_tr = make_spark_converter(train_df.repartition(n))
        spark.conf.set(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, test_dir);  conv_te = make_spark_converter(test_df.repartition(n))
        """,
        """
        from petastream.compat import SparkDatasetConverter, make_spark_converter
        dbutils.fs.rm("/tmp/petastorm", recurse=True)
        spark.conf.set(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, train_dir); conv_tr = make_spark_converter(train_df.repartition(n))
        spark.conf.set(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, test_dir);  conv_te = make_spark_converter(test_df.repartition(n))
        """,
        [],
        id="5-conf-switched-between-converters",
    ),
    pytest.param(
        """
        from petastorm.spark import make_spark_converter
        make_spark_converter(df, parquet_row_group_size_bytes=int(total_bytes / parallelism))
        make_spark_converter(df, dtype='float64'); make_spark_converter(df, dtype=None); make_spark_converter(df, compression_codec="snappy")
        make_spark_converter("dbfs:/path/to/saved_parquet")
        """,
        """
        from petastream.compat import make_spark_converter
        make_spark_converter(df, parquet_row_group_size_bytes=int(total_bytes / parallelism))
        make_spark_converter(df, dtype='float64'); make_spark_converter(df, dtype=None); make_spark_converter(df, compression_codec="snappy")
        make_spark_converter("dbfs:/path/to/saved_parquet")
        """,
        [],
        id="6-extra-converter-args",
    ),
    pytest.param(
        """
        from petastorm.spark import make_spark_converter
        conv_tr, conv_val = make_spark_converter(df_tr), make_spark_converter(df_val)
        """,
        """
        from petastream.compat import make_spark_converter
        conv_tr, conv_val = make_spark_converter(df_tr), make_spark_converter(df_val)
        """,
        [],
        id="7-tuple-unpacking",
    ),
    pytest.param(
        """
        from petastorm import TransformSpec
        from petastorm.spark import make_spark_converter

        with conv_tr.make_tf_dataset(transform_spec=spec, batch_size=BS) as train_ds, \\
             conv_val.make_tf_dataset(transform_spec=spec, batch_size=BS) as val_ds:
            train_ds = train_ds.map(lambda x: (x.features, x.label_index))   # namedtuple -> tuple for Keras
            model.fit(train_ds, steps_per_epoch=len(conv_tr) // BS, validation_data=val_ds,
                      validation_steps=max(1, len(conv_val) // BS), epochs=E)
        """,
        """
        from petastream.compat import TransformSpec, make_spark_converter

        with conv_tr.make_tf_dataset(transform_spec=spec, batch_size=BS) as train_ds, \\
             conv_val.make_tf_dataset(transform_spec=spec, batch_size=BS) as val_ds:
            train_ds = train_ds.map(lambda x: (x.features, x.label_index))   # namedtuple -> tuple for Keras
            model.fit(train_ds, steps_per_epoch=len(conv_tr) // BS, validation_data=val_ds,
                      validation_steps=max(1, len(conv_val) // BS), epochs=E)
        """,
        [],
        id="8-tf-multiple-context-managers-keras",
    ),
    pytest.param(
        """
        import tensorflow as tf
        from petastorm.spark import make_spark_converter

        with conv_tr.make_tf_dataset() as ds:
            ds = ds.unbatch().batch(BS).map(lambda x: (tf.reshape(x.image, (-1, 224, 224, 3)), x.labels))
        """,
        """
        import tensorflow as tf
        from petastream.compat import make_spark_converter

        with conv_tr.make_tf_dataset() as ds:
            ds = ds.unbatch().batch(BS).map(lambda x: (tf.reshape(x.image, (-1, 224, 224, 3)), x.labels))
        """,
        [],
        id="9-tf-rebatching",
    ),
    pytest.param(
        """
        import horovod.torch as hvd
        from petastorm.spark import make_spark_converter

        with conv_tr.make_tf_dataset(batch_size=BS, num_epochs=None, cur_shard=hvd.rank(), shard_count=hvd.size(),
                                     workers_count=W, prefetch=P) as ds: ...
        with conv_tr.make_torch_dataloader(cur_shard=hvd.rank(), shard_count=hvd.size(), batch_size=BS) as dl:
            it = iter(dl); steps = len(conv_tr) // (BS * hvd.size())
            for _ in range(steps): batch = next(it); batch = {k: v.to(device) for k, v in batch.items()}
        """,
        """
        import horovod.torch as hvd
        from petastream.compat import make_spark_converter

        with conv_tr.make_tf_dataset(batch_size=BS, num_epochs=None, cur_shard=hvd.rank(), shard_count=hvd.size(),
                                     workers_count=W, prefetch=P) as ds: ...
        with conv_tr.make_torch_dataloader(cur_shard=hvd.rank(), shard_count=hvd.size(), batch_size=BS) as dl:
            it = iter(dl); steps = len(conv_tr) // (BS * hvd.size())
            for _ in range(steps): batch = next(it); batch = {k: v.to(device) for k, v in batch.items()}
        """,
        [],
        id="10-horovod-sharding",
    ),
    pytest.param(
        """
        from petastorm.pytorch import BatchedDataLoader
        with conv.make_torch_dataloader(batch_size=BS, data_loader_fn=BatchedDataLoader, num_epochs=None,
                                        cache_type='local-disk', workers_count=N, reader_pool_type='process',
                                        hdfs_driver='libhdfs') as dl: ...
        """,
        """
        from petastream.compat.pytorch import BatchedDataLoader
        with conv.make_torch_dataloader(batch_size=BS, data_loader_fn=BatchedDataLoader, num_epochs=None,
                                        cache_type='local-disk', workers_count=N, reader_pool_type='process',
                                        hdfs_driver='libhdfs') as dl: ...
        """,
        [],
        id="11-data-loader-fn-and-reader-kwargs",
    ),
    pytest.param(
        """
        from petastorm.spark import make_spark_converter
        with (conv_tr.make_torch_dataloader(batch_size=32) as train_dl,
              conv_te.make_torch_dataloader(batch_size=64) as test_dl): ...
        """,
        """
        from petastream.compat import make_spark_converter
        with (conv_tr.make_torch_dataloader(batch_size=32) as train_dl,
              conv_te.make_torch_dataloader(batch_size=64) as test_dl): ...
        """,
        [],
        id="12-parenthesised-multi-context",
    ),
    pytest.param(
        """
        import pytorch_lightning as pl
        from petastorm.spark import make_spark_converter


        class DataModule(pl.LightningDataModule):
            def setup(self, stage=None):
                self.conv_tr = make_spark_converter(self.df)

            def train_dataloader(self):
                self.ctx = self.conv_tr.make_torch_dataloader(transform_spec=spec, num_epochs=1, batch_size=BS)
                return self.ctx.__enter__()          # ... later: self.ctx.__exit__(None, None, None)

            def val_dataloader(self):
                with self.conv_tr.make_torch_dataloader(num_epochs=1) as loader:
                    for batch in loader: yield batch
        """,
        """
        import pytorch_lightning as pl
        from petastream.compat import make_spark_converter


        class DataModule(pl.LightningDataModule):
            def setup(self, stage=None):
                self.conv_tr = make_spark_converter(self.df)

            def train_dataloader(self):
                self.ctx = self.conv_tr.make_torch_dataloader(transform_spec=spec, num_epochs=1, batch_size=BS)
                return self.ctx.__enter__()          # ... later: self.ctx.__exit__(None, None, None)

            def val_dataloader(self):
                with self.conv_tr.make_torch_dataloader(num_epochs=1) as loader:
                    for batch in loader: yield batch
        """,
        [],
        id="13-manual-enter-exit-and-generators",
    ),
    pytest.param(
        """
        from functools import partial

        import numpy as np
        from petastorm import TransformSpec

        def transform_row(is_train, pd_batch):
            pd_batch['features'] = pd_batch['content'].map(lambda b: preprocess(b, is_train))
            return pd_batch.drop(labels=['content'], axis=1)
        spec = TransformSpec(partial(transform_row, True),
                             edit_fields=[('features', np.float32, (3, 224, 224), False)],
                             selected_fields=['features', 'label_index'])
        spec_no_func = TransformSpec(edit_fields=[("features", np.float32, (n,), False)], selected_fields=["features", "label"])
        """,
        """
        from functools import partial

        import numpy as np
        from petastream.compat import TransformSpec

        def transform_row(is_train, pd_batch):
            pd_batch['features'] = pd_batch['content'].map(lambda b: preprocess(b, is_train))
            return pd_batch.drop(labels=['content'], axis=1)
        spec = TransformSpec(partial(transform_row, True),
                             edit_fields=[('features', np.float32, (3, 224, 224), False)],
                             selected_fields=['features', 'label_index'])
        spec_no_func = TransformSpec(edit_fields=[("features", np.float32, (n,), False)], selected_fields=["features", "label"])
        """,
        [],
        id="14-transform-spec",
    ),
    pytest.param(
        """
        from petastorm.spark import SparkDatasetConverter, make_spark_converter
        from petastorm.spark.spark_dataset_converter import SparkDatasetConverter
        from petastorm.spark.spark_dataset_converter import TorchDatasetContextManager, TFDatasetContextManager, make_spark_converter
        import petastorm.spark.spark_dataset_converter as petastorm_internal
        from petastorm.transform import TransformSpec
        from petastorm.pytorch import DataLoader as PetastormDataLoader, decimal_friendly_collate
        from petastorm.pytorch import DataLoader, BatchedDataLoader, InMemBatchedDataLoader
        """,
        """
        from petastream.compat import SparkDatasetConverter, TransformSpec, make_spark_converter
        from petastream.compat.spark_dataset_converter import SparkDatasetConverter
        from petastream.compat.spark_dataset_converter import TorchDatasetContextManager, TFDatasetContextManager, make_spark_converter
        import petastream.compat.spark_dataset_converter as petastorm_internal
        from petastream.compat.pytorch import DataLoader as PetastormDataLoader, decimal_friendly_collate
        from petastream.compat.pytorch import DataLoader, BatchedDataLoader, InMemBatchedDataLoader
        """,
        [],
        id="15-import-styles-migratable",
    ),
    pytest.param(
        """
        from petastorm import make_batch_reader, make_reader, TransformSpec
        from petastorm.tf_utils import make_petastorm_dataset
        import petastorm; petastorm.make_batch_reader(url)
        """,
        """
        from petastream.compat import make_batch_reader, make_reader, TransformSpec
        from petastream.compat.tf_utils import make_petastorm_dataset
        import petastream.compat; petastream.compat.make_batch_reader(url)
        """,
        # issue 27: the readers and tf_utils move too
        [],
        id="15-import-styles-readers",
    ),
    pytest.param(
        """
        import petastorm.spark.spark_dataset_converter as petastorm_internal
        from petastorm.spark import SparkDatasetConverter
        from petastorm.spark.spark_dataset_converter import TorchDatasetContextManager

        TorchDatasetContextManager(parquet_files, batch_size, {"num_epochs": 1, "workers_count": 2, "reader_pool_type": "thread",
                                   "transform_spec": spec, "cur_shard": r, "shard_count": s}, 0, None)
        url = petastorm_internal._cache_df_or_retrieve_cache_data_url(df, parent, petastorm_internal.DEFAULT_ROW_GROUP_SIZE_BYTES, "uncompressed", "float32")
        parent = petastorm_internal._get_parent_cache_dir_url(); spark = petastorm_internal._get_spark_session()
        petastorm_internal._check_dataset_file_median_size(urls)
        conv = SparkDatasetConverter(url, file_urls, size)              # public ctor used by hand
        converter._dataset_path = out_path                              # attribute poking (ignored)
        """,
        """
        import petastream.compat.spark_dataset_converter as petastorm_internal
        from petastream.compat import SparkDatasetConverter
        from petastream.compat.spark_dataset_converter import TorchDatasetContextManager

        TorchDatasetContextManager(parquet_files, batch_size, {"num_epochs": 1, "workers_count": 2, "reader_pool_type": "thread",
                                   "transform_spec": spec, "cur_shard": r, "shard_count": s}, 0, None)
        url = petastorm_internal._cache_df_or_retrieve_cache_data_url(df, parent, petastorm_internal.DEFAULT_ROW_GROUP_SIZE_BYTES, "uncompressed", "float32")
        parent = petastorm_internal._get_parent_cache_dir_url(); spark = petastorm_internal._get_spark_session()
        petastorm_internal._check_dataset_file_median_size(urls)
        conv = SparkDatasetConverter(url, file_urls, size)              # public ctor used by hand
        converter._dataset_path = out_path                              # attribute poking (ignored)
        """,
        # a note: compat's context manager reads only a converter's files, and these come
        # from outside the call; then the two helpers that hand out cache files
        ["files-unchecked", "cache-layout", "cache-layout"],
        id="16-internals",
    ),
    pytest.param(
        """
        import petastorm.spark.spark_dataset_converter

        petastorm.spark.spark_dataset_converter.make_spark_converter = patched_fn   # monkeypatch
        """,
        """
        import petastream.compat.spark_dataset_converter

        petastream.compat.spark_dataset_converter.make_spark_converter = patched_fn   # monkeypatch
        """,
        [],
        id="16-monkeypatch-by-attribute",
    ),
    pytest.param(
        """
        from unittest import mock
        from unittest.mock import patch

        @patch("petastorm.spark.make_spark_converter")
        def test_it(fake):
            with mock.patch('petastorm.spark.spark_dataset_converter.make_batch_reader') as reader:
                run()
        """,
        """
        from unittest import mock
        from unittest.mock import patch

        @patch("petastream.compat.make_spark_converter")
        def test_it(fake):
            with mock.patch('petastream.compat.spark_dataset_converter.make_batch_reader') as reader:
                run()
        """,
        [],
        id="17-mock-patch-targets",
    ),
    pytest.param(
        """
        from petastorm.spark import make_spark_converter
        converter = make_spark_converter(df)
        print(converter.file_urls, converter.dataset_size, len(converter), converter.cache_dir_url)
        # converter.delete()
        """,
        """
        from petastream.compat import make_spark_converter
        converter = make_spark_converter(df)
        print(converter.file_urls, converter.dataset_size, len(converter), converter.cache_dir_url)
        # converter.delete()
        """,
        [],
        id="18-introspection",
    ),
    pytest.param(
        """
        import tensorflow as tf
        from petastorm import make_batch_reader
        from petastorm.pytorch import DataLoader as PetastormDataLoader
        from petastorm.tf_utils import make_petastorm_dataset

        with make_batch_reader("file://" + path, num_epochs=None, cur_shard=hvd.rank(), shard_count=hvd.size()) as reader:
            ds = make_petastorm_dataset(reader).map(lambda x: (tf.reshape(x.features, [-1, 8]), tf.reshape(x.label, [-1, 1])))
        with PetastormDataLoader(make_batch_reader(url, num_epochs=1, transform_spec=spec), batch_size=BS) as loader: ...
        make_petastorm_dataset(reader).apply(tf.data.experimental.unbatch()).shuffle(3 * BS).batch(BS, drop_remainder=True)
        delta_files = [f.replace("dbfs:", "file:///dbfs") for f in spark.table(t).inputFiles()]
        """,
        """
        import tensorflow as tf
        from petastream.compat import make_batch_reader
        from petastream.compat.pytorch import DataLoader as PetastormDataLoader
        from petastream.compat.tf_utils import make_petastorm_dataset

        with make_batch_reader("file://" + path, num_epochs=None, cur_shard=hvd.rank(), shard_count=hvd.size()) as reader:
            ds = make_petastorm_dataset(reader).map(lambda x: (tf.reshape(x.features, [-1, 8]), tf.reshape(x.label, [-1, 1])))
        with PetastormDataLoader(make_batch_reader(url, num_epochs=1, transform_spec=spec), batch_size=BS) as loader: ...
        make_petastorm_dataset(reader).apply(tf.data.experimental.unbatch()).shuffle(3 * BS).batch(BS, drop_remainder=True)
        delta_files = [f.replace("dbfs:", "file:///dbfs") for f in spark.table(t).inputFiles()]
        """,
        # issue 27: reader on Parquet, its loader and its TF helper move as one pipeline
        [],
        id="19-co-occurring-reader-idioms",
    ),
]


@pytest.mark.parametrize(("before", "after", "items"), CASES)
def test_spec_idiom(before: str, after: str, items: list[str]) -> None:
    assert_migrates(before, after, items)
