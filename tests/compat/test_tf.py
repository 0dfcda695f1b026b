"""make_tf_dataset: Petastorm's TensorFlow converter tests (spec §3.2 #1, #2, #11, #12, #13, #15, #16, #17;
§3.3 test_tf_autograph), plus Petastorm's element form for arrays, transforms and a stopped reader."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from petastream.compat import make_spark_converter

pytestmark = [pytest.mark.spark, pytest.mark.tf]


def test_primitive(primitive_df, converter_env):
    df = primitive_df
    conv = make_spark_converter(df)
    with conv.make_tf_dataset(num_epochs=1, shuffle_row_groups=False) as dataset:
        batch = next(iter(dataset))
    assert type(batch).__name__ == "inferred_schema_view"
    assert batch.float_col.dtype == tf.float32 and batch.double_col.dtype == tf.float32
    assert batch.short_col.dtype == tf.int16 and batch.int_col.dtype == tf.int32
    assert batch.long_col.dtype == tf.int64 and batch.byte_col.dtype == tf.int8
    assert batch.str_col.dtype == tf.string and batch.bin_col.dtype == tf.string
    assert [s.decode() for s in batch.str_col.numpy()] == ["a", "héllo"]
    assert list(batch.bin_col.numpy()) == [b"\x01", b""]
    assert batch.bool_col.dtype == tf.bool and batch.bool_col.numpy().tolist() == [True, False]
    np.testing.assert_allclose(batch.double_col.numpy(), [1.5, -1.5])


def test_array_field_and_batch_size(spark, converter_env):
    df = spark.range(100).selectExpr("id", "array_repeat(cast(id as float), 10) as v").repartition(2)
    conv = make_spark_converter(df)
    with conv.make_tf_dataset(batch_size=4, num_epochs=1) as dataset:
        batch = next(iter(dataset))
    assert batch.v.shape == (4, 10)
    with conv.make_tf_dataset(batch_size=30) as dataset:
        assert len(next(iter(dataset)).id) == 30


def test_dtype_and_vectors(spark, converter_env):
    from pyspark.ml.linalg import Vectors

    df = spark.createDataFrame([(1, Vectors.dense([1.0, 2.0, 3.0]), 0.5)], ["id", "vec", "x"])
    conv = make_spark_converter(df)
    with conv.make_tf_dataset(num_epochs=1) as dataset:
        batch = next(iter(dataset))
    assert batch.vec.dtype == tf.float32 and batch.vec.shape == (1, 3) and batch.x.dtype == tf.float32
    conv64 = make_spark_converter(df, dtype="float64")
    with conv64.make_tf_dataset(num_epochs=1) as dataset:
        assert next(iter(dataset)).x.dtype == tf.float64


def test_graph_mode_one_shot_iterator(spark, converter_env):
    conv = make_spark_converter(spark.range(10))
    with tf.Graph().as_default():
        with conv.make_tf_dataset(batch_size=10, num_epochs=1, shuffle_row_groups=False) as dataset:
            tensor = tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()
            method = dataset.make_one_shot_iterator().get_next()  # tf.compat.v1 Dataset method
            with tf.compat.v1.Session() as sess:
                assert sess.run(tensor).id.tolist() == list(range(10))
                assert sess.run(method).id.tolist() == list(range(10))
    # The graph that context parked belongs to that tf.Graph: eager code (and another graph)
    # gets one of its own.
    with conv.make_tf_dataset(batch_size=10, num_epochs=1, shuffle_row_groups=False) as dataset:
        assert next(iter(dataset)).id.numpy().tolist() == list(range(10))
    with tf.Graph().as_default():
        with conv.make_tf_dataset(batch_size=10, num_epochs=1, shuffle_row_groups=False) as dataset:
            tensor = tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()
            with tf.compat.v1.Session() as sess:
                assert sess.run(tensor).id.tolist() == list(range(10))


def test_autograph_eager_iteration_and_stopped_reader(spark, converter_env):
    """Petastorm's test_tf_autograph: eager iteration logs no AutoGraph failure; reading after
    the context manager exits raises Petastorm's error."""
    import logging

    messages = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())
    tf.get_logger().addHandler(handler)
    try:
        conv = make_spark_converter(spark.range(100))
        with conv.make_tf_dataset(num_epochs=1) as dataset:
            ids = [int(i) for batch in dataset for i in batch.id]
    finally:
        tf.get_logger().removeHandler(handler)
    assert sorted(ids) == list(range(100))
    assert not [m for m in messages if "AutoGraph could not transform" in m]
    with pytest.raises(tf.errors.OpError, match="make_reader/make_batch_reader has stopped"):
        next(iter(dataset))


def test_variable_length_arrays_follow_petastorm(spark, converter_env):
    """Dense when a batch's arrays have one length; Petastorm's RuntimeError text when not."""
    df = spark.range(6).selectExpr("id", "array_repeat(cast(id as float), cast(id % 3 + 1 as int)) as v")
    conv = make_spark_converter(df.coalesce(1))
    with conv.make_tf_dataset(batch_size=1, num_epochs=1, shuffle_row_groups=False) as dataset:
        assert [tuple(b.v.shape) for b in dataset] == [(1, 1), (1, 2), (1, 3)] * 2
    with conv.make_tf_dataset(batch_size=3, num_epochs=1) as dataset:
        with pytest.raises(tf.errors.OpError, match="Length of all values in column 'v' are expected"):
            list(dataset)


def test_transform_spec(spark, converter_env):
    from petastream.compat import TransformSpec

    def add_half(df):
        return df.assign(half=df.id / 2.0)

    spec = TransformSpec(add_half, edit_fields=[("half", np.float64, (), False)])
    conv = make_spark_converter(spark.range(8).coalesce(1))
    with conv.make_tf_dataset(batch_size=8, num_epochs=1, transform_spec=spec,
                              shuffle_row_groups=False) as dataset:
        batch = next(iter(dataset))
    assert type(batch).__name__ == "inferred_schema_transformed_view" and batch._fields == ("id", "half")
    assert batch.half.dtype == tf.float64 and batch.half.numpy().tolist() == [i / 2 for i in range(8)]


def test_keras_fit(spark, converter_env):
    df = spark.range(256).selectExpr("array_repeat(cast(id as float) / 256, 4) as features",
                                     "cast(id % 2 as long) as label")
    conv = make_spark_converter(df)
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    with conv.make_tf_dataset(batch_size=32) as dataset:
        history = model.fit(dataset.map(lambda x: (x.features, x.label)), steps_per_epoch=len(conv) // 32,
                            epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_tf_pickling_remotely(spark, converter_env):
    conv = make_spark_converter(spark.range(100, 120).coalesce(1))

    def first_id(_):
        with conv.make_tf_dataset(num_epochs=1, shuffle_row_groups=False) as dataset:
            return int(next(iter(dataset)).id[0])

    assert spark.sparkContext.parallelize(range(1), 1).map(first_id).collect() == [100]


def test_tf_dataset_petastorm_args(spark, converter_env):
    """§3.2 #13: reader arguments reach make_batch_reader, with Petastorm's overrides."""
    from unittest import mock

    from petastream.compat import spark_dataset_converter as sdc

    conv = make_spark_converter(spark.range(100).repartition(2))
    with mock.patch.object(sdc, "make_batch_reader", wraps=sdc.make_batch_reader) as reader_mock:
        with conv.make_tf_dataset(reader_pool_type="dummy", cur_shard=1, shard_count=4):
            pass
        kwargs = reader_mock.call_args.kwargs
        assert kwargs["reader_pool_type"] == "dummy" and kwargs["cur_shard"] == 1 and kwargs["shard_count"] == 4
        assert kwargs["num_epochs"] is None and kwargs["workers_count"] == 4
        with conv.make_tf_dataset(num_epochs=1, workers_count=2):
            pass
        assert reader_mock.call_args.kwargs["num_epochs"] == 1
        assert reader_mock.call_args.kwargs["workers_count"] == 2


def test_process_reader_pool_decodes_in_worker_processes(spark, converter_env):
    """reader_pool_type='process' (Petastorm's process pool) decodes in petastream's worker
    processes, and so does 'thread' (the default) without a TransformSpec: the same stream as
    one decode thread ('dummy'); a context per epoch reuses the workers, and they stop when
    released. With a TransformSpec, 'thread' keeps threads (the function runs here)."""
    from petastream.compat import TransformSpec
    from petastream.pipeline.procpool.parking import shutdown_idle

    conv = make_spark_converter(spark.range(500).selectExpr("id", "cast(id as float) * 2 as x").repartition(3))
    streams, pools = {}, []
    for pool in ("dummy", "process", "thread"):
        context = conv.make_tf_dataset(batch_size=64, num_epochs=2, seed=7, reader_pool_type=pool, workers_count=2)
        with context as dataset:
            streams[pool] = [(b.id.numpy().tolist(), b.x.numpy().tolist()) for b in dataset]
            pools += [loader.executor.pool for loader in context.reader.worker_loaders]
        assert not context.reader.worker_loaders  # the exit released them
        assert sorted(i for ids, _ in streams[pool] for i in ids) == sorted(list(range(500)) * 2)
    assert streams["process"] == streams["dummy"] == streams["thread"]
    assert len(pools) == 2 and pools[0] is pools[1]  # the second context took the first one's workers
    # one worker decodes in a process too, as petastream.tf.dataset's default for one worker
    one = conv.make_tf_dataset(batch_size=64, num_epochs=1, seed=7, workers_count=1)
    with one as dataset:
        assert [loader.worker_type for loader in one.reader.worker_loaders] == ["process"]
        assert [b.id.numpy().tolist() for b in dataset] == [ids for ids, _ in streams["dummy"][:8]]
    spec = TransformSpec(_double_x)
    context = conv.make_tf_dataset(batch_size=64, num_epochs=1, seed=7, workers_count=2, transform_spec=spec)
    with context as dataset:
        assert not context.reader.worker_loaders  # threads: the transform runs in this process
        assert [b.x.numpy().tolist() for b in dataset] == [[2 * v for v in x] for _, x in streams["dummy"][:8]]
    shutdown_idle()
    for proc in pools[0]._procs:
        assert proc.wait(timeout=10) is not None


def _double_x(df):
    return df.assign(x=df.x * 2)


def test_context_per_epoch_reuses_the_graph(spark, converter_env):
    """A context per epoch (Petastorm scripts' shape) takes over the previous context's
    tf.data graph instead of tracing a new one, and reads its own reader's plan through it:
    the same stream as a first context with the same seed, the stopped-reader error while the
    graph is parked, and a fresh graph when another context holds it or the arguments differ."""
    conv = make_spark_converter(spark.range(300).selectExpr("id", "cast(id as float) / 2 as x").repartition(3))

    def epoch(seed=5):
        context = conv.make_tf_dataset(batch_size=32, num_epochs=1, seed=seed)
        with context as dataset:
            return dataset, [b.id.numpy().tolist() for b in dataset]

    first, stream = epoch()
    assert sorted(i for ids in stream for i in ids) == list(range(300))
    with pytest.raises(tf.errors.OpError, match="make_reader/make_batch_reader has stopped"):
        next(iter(first))  # parked: no reader behind it
    second, again = epoch()
    assert second is first and again == stream  # same graph; the new reader's plan (same seed)
    other, shuffled = epoch(seed=6)
    assert other is first and shuffled != stream  # a seed is the reader's, not the graph's
    assert sorted(i for ids in shuffled for i in ids) == list(range(300))
    with conv.make_tf_dataset(batch_size=16, num_epochs=1) as smaller:
        assert smaller is not first and len(next(iter(smaller)).id) == 16
    with conv.make_tf_dataset(batch_size=32, num_epochs=1, seed=5) as outer:
        with conv.make_tf_dataset(batch_size=32, num_epochs=1, seed=5) as inner:
            assert outer is first and inner is not outer  # one context holds a graph at a time
            assert [b.id.numpy().tolist() for b in inner] == stream
            assert [b.id.numpy().tolist() for b in outer] == stream


@pytest.mark.cloud
def test_contexts_per_epoch_over_s3_share_workers_graph_and_cache(s3_bucket, tmp_path, monkeypatch):
    """Petastorm's shape over object storage: a reader and a make_tf_dataset context per epoch
    on zstd shards in S3 (moto). Every epoch is whole and matches one decode thread; the
    second context reuses the first one's workers, graph and open dataset (not sent to the
    workers again), and each shard is downloaded once into the node's cache."""
    from petastream.compat._tf import make_tf_dataset
    from petastream.compat.reader import make_batch_reader
    from petastream.mds.writer import write_mds
    from petastream.pipeline.procpool import parking
    from petastream.pipeline.procpool import pool as processes

    url = f"{s3_bucket}/compat-epochs"
    n = 900
    write_mds({"id": np.arange(n), "s": np.array([f"r{i}" for i in range(n)], dtype=object),
               "x": np.arange(n * 2, dtype=np.float32).reshape(n, 2)}, url, size_limit=4000, compression="zstd")
    monkeypatch.setenv("PETASTREAM_CACHE_DIR", str(tmp_path / "cache"))
    sent = []
    start_pass = processes.WorkerPool.start_pass

    def counting(pool, work, strings=False):
        send = pool._send
        pool._send = lambda w, msg: (sent.append(msg[0]), send(w, msg))
        try:
            return start_pass(pool, work, strings)
        finally:
            pool._send = send

    monkeypatch.setattr(processes.WorkerPool, "start_pass", counting)

    def epoch(pool_type):
        reader = make_batch_reader(url, reader_pool_type=pool_type, workers_count=2, seed=11, num_epochs=1)
        with reader:
            dataset = make_tf_dataset(reader, batch_size=64, prefetch=None, shuffling_queue_capacity=0)
            batches = [(b.id.numpy().tolist(), [v.decode() for v in b.s.numpy()]) for b in dataset]
            pools = [loader.executor.pool for loader in reader.worker_loaders]
        return dataset, batches, pools, reader.dataset

    _, want, none, _ = epoch("dummy")
    assert not none and sorted(i for ids, _ in want for i in ids) == list(range(n))
    first, got, pools, opened = epoch("thread")
    second, again, more, _ = epoch("thread")
    assert got == want and again == want
    assert second is first and more == pools and len(pools) == 1
    assert sent.count("dataset") == 2  # once per worker, by the first context only
    assert opened.num_shards > 3 and opened.cache.usage().entries == opened.num_shards
    parking.shutdown_idle()
