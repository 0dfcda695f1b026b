"""``converter.make_tf_dataset()`` over Parquet read in place (``DirectRead``, no Spark here):
list columns handed to TensorFlow several batches at a time, with Petastorm's semantics kept
(dense per batch, its error for a batch of unequal lengths, dtype casts, partial last batch,
``num_epochs``), and the uniform-column grouping of :class:`petastream.tf.TFLoader` under it."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tensorflow as tf

import petastream.tf as ptf
from petastream.compat import _source_reuse
from petastream.compat._direct import DirectRead
from petastream.compat.spark_dataset_converter import SparkDatasetConverter
from petastream.errors import InvalidArgumentError
from petastream.parquet import ParquetSource
from petastream.tf import TFLoader

pytestmark = pytest.mark.tf
N = 1000  # not a multiple of the batch sizes below: a short last batch


@pytest.fixture(autouse=True)
def _nothing_kept():
    _source_reuse.forget()
    yield
    _source_reuse.forget()


def _converter(tmp_path, table: pa.Table, casts: dict[str, str] | None = None) -> SparkDatasetConverter:
    path = str(tmp_path / "part-0.parquet")
    pq.write_table(table, path, row_group_size=300)
    columns = tuple(sorted(table.column_names))
    return SparkDatasetConverter(None, [path], table.num_rows,
                                 direct=DirectRead("parquet", (path,), columns, None, dict(casts or {}), table.num_rows))


def _fixed(n: int = N) -> pa.Table:
    ids = np.arange(n)
    features = (ids[:, None] * 10 + np.arange(4)).astype(np.float32)
    return pa.table({"id": ids, "features": pa.array(list(features), pa.list_(pa.float32())),
                     "weight": ids * 0.5})


def _epochs(conv: SparkDatasetConverter, **kwargs) -> list:
    with conv.make_tf_dataset(**kwargs) as ds:
        return [{k: v.numpy() for k, v in b._asdict().items()} for b in ds]


@pytest.mark.parametrize("workers_count", [1, 2])
def test_list_column_comes_dense_in_order_with_a_short_last_batch(tmp_path, workers_count):
    conv = _converter(tmp_path, _fixed())
    with conv.make_tf_dataset(batch_size=64, num_epochs=1, shuffle_row_groups=False,
                              workers_count=workers_count) as ds:
        # the first batch's arrays' length, as Petastorm's transform path (and the materialized
        # path's fixed-size encoding) types them: Keras layers want a known last dimension
        assert ds.element_spec.features == tf.TensorSpec((None, 4), tf.float32)
        batches = [{k: v.numpy() for k, v in b._asdict().items()} for b in ds]
    assert [len(b["id"]) for b in batches] == [64] * 15 + [40]
    ids = np.concatenate([b["id"] for b in batches])
    assert ids.tolist() == list(range(N))
    features = np.concatenate([b["features"] for b in batches])
    assert features.dtype == np.float32 and features.shape == (N, 4)
    np.testing.assert_array_equal(features, (ids[:, None] * 10 + np.arange(4)).astype(np.float32))


def test_shuffled_epochs_and_num_epochs(tmp_path):
    conv = _converter(tmp_path, _fixed())
    two = _epochs(conv, batch_size=100, num_epochs=2, seed=3)
    ids = np.concatenate([b["id"] for b in two])
    assert sorted(ids.tolist()) == sorted(list(range(N)) * 2)
    for b in two:  # every row's features still its own
        np.testing.assert_array_equal(b["features"], (b["id"][:, None] * 10 + np.arange(4)).astype(np.float32))
    with conv.make_tf_dataset(batch_size=100, num_epochs=None) as ds:
        assert sum(1 for _ in ds.take(25)) == 25  # past one epoch's 10 batches


def test_dtype_casts_doubles_without_a_transform(tmp_path):
    ids = np.arange(N)
    table = pa.table({"id": ids, "x": ids * 0.25, "v": pa.array(list(np.c_[ids, ids] * 1.5), pa.list_(pa.float64()))})
    conv = _converter(tmp_path, table, casts={"x": "float32", "v": "float32"})
    batches = _epochs(conv, batch_size=128, num_epochs=1, shuffle_row_groups=False)
    assert {b["x"].dtype for b in batches} == {b["v"].dtype for b in batches} == {np.dtype(np.float32)}
    np.testing.assert_array_equal(np.concatenate([b["x"] for b in batches]), (ids * 0.25).astype(np.float32))
    np.testing.assert_array_equal(np.concatenate([b["v"] for b in batches]),
                                  (np.c_[ids, ids] * 1.5).astype(np.float32))


def _varying(n: int = 64) -> pa.Table:
    """Rows whose arrays' length changes every 4 rows: batches of 4 (and of 1) are each uniform."""
    ids = np.arange(n)
    return pa.table({"id": ids, "v": pa.array([[float(i)] * (i // 4 % 3 + 1) for i in ids], pa.list_(pa.float64()))})


def test_arrays_whose_length_changes_past_the_first_batch(tmp_path):
    """The first batch's length is the declared one (as before batches went over in groups);
    a later batch of one other length raises, naming it (a varying first batch declares none)."""
    conv = _converter(tmp_path, _varying())
    seen = []
    with conv.make_tf_dataset(batch_size=4, num_epochs=1, shuffle_row_groups=False) as ds:
        assert ds.element_spec.v == tf.TensorSpec((None, 1), tf.float64)
        with pytest.raises(tf.errors.OpError, match="column 'v' are expected to be 1 .*got arrays of length 2"):
            for b in ds:
                seen.append(b.v.numpy())
    assert [s.shape for s in seen] == [(4, 1)]
    with conv.make_tf_dataset(batch_size=8, num_epochs=1, shuffle_row_groups=False) as ds:
        assert ds.element_spec.v == tf.TensorSpec((None, None), tf.float64)


def test_a_batch_of_unequal_lengths_raises_petastorms_error_after_the_batches_before_it(tmp_path):
    ids = np.arange(64)  # arrays of 2 values up to row 40, then of 1 and 2 in turn
    v = [[float(i)] * (2 if i < 40 else i % 2 + 1) for i in ids]
    conv = _converter(tmp_path, pa.table({"id": ids, "v": pa.array(v, pa.list_(pa.float64()))}))
    seen = []
    with conv.make_tf_dataset(batch_size=8, num_epochs=1, shuffle_row_groups=False) as ds:
        with pytest.raises(tf.errors.OpError, match="Length of all values in column 'v' are expected to be the "
                                                    "same length. Got the following set of lengths: '1, 2'"):
            for b in ds:
                seen.append(b.id.numpy()[0])
    assert seen == [0, 8, 16, 24, 32]


@pytest.mark.parametrize("worker_type", ["thread", "process"])
def test_uniform_columns_go_over_in_groups_and_are_cut_where_lengths_differ(tmp_path, worker_type):
    path = str(tmp_path / "v.parquet")
    pq.write_table(_varying(), path)
    loader = TFLoader(ParquetSource([path]), 2, ragged="uniform", worker_type=worker_type, batches_per_call=8)
    assert loader.group == 8
    shapes = [tuple(b["v"].shape) for b in loader.as_dataset()]
    assert shapes == [(2, i // 2 % 3 + 1) for i in range(32)]
    fixed = str(tmp_path / "fixed.parquet")
    pq.write_table(_fixed(), fixed)
    loader = TFLoader(ParquetSource([fixed]), 64, ragged="uniform", worker_type=worker_type)
    got = [b["features"].numpy() for b in loader.as_dataset()]
    assert [g.shape for g in got] == [(64, 4)] * 15 + [(40, 4)]


def test_widths_argument(tmp_path):
    path = str(tmp_path / "v.parquet")
    pq.write_table(_varying(), path)
    loader = TFLoader(ParquetSource([path]), 4, ragged="uniform", widths={"v": 1}, worker_type="thread")
    assert loader.element_spec["v"] == tf.TensorSpec((None, 1), tf.float64)
    with pytest.raises(tf.errors.OpError, match="expected to be 1 .*got arrays of length 2"):
        list(loader.as_dataset())
    with pytest.raises(InvalidArgumentError, match=r"widths\['id'\]=3: give an int >= 0 for a variable-length"):
        TFLoader(ParquetSource([path]), 4, ragged="uniform", widths={"id": 3})


def test_dtypes_argument(tmp_path):
    path = str(tmp_path / "fixed.parquet")
    pq.write_table(_fixed(), path)
    batch = next(iter(ptf.dataset(ParquetSource([path]), 8, dtypes={"weight": "float32", "id": np.int32},
                                  worker_type="thread")))
    assert batch["weight"].dtype == tf.float32 and batch["id"].dtype == tf.int32
    with pytest.raises(InvalidArgumentError, match=r"dtypes\['weight'\]='int64': column 'weight' is float64"):
        TFLoader(ParquetSource([path]), 8, dtypes={"weight": "int64"})
    with pytest.raises(InvalidArgumentError, match=r"dtypes\['nope'\]: only numeric columns read can be cast"):
        TFLoader(ParquetSource([path]), 8, dtypes={"nope": "int64"})
    with pytest.raises(InvalidArgumentError, match="with a transform or output_signature"):
        TFLoader(ParquetSource([path]), 8, dtypes={"id": "int32"}, transform=_identity)


def _identity(batch):
    return batch
