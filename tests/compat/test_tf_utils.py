"""``petastream.compat.tf_utils``: Petastorm's ``make_petastorm_dataset`` over make_reader (rows)
and make_batch_reader (batches), with real TensorFlow."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from petastream.compat import make_batch_reader, make_reader
from petastream.errors import InvalidArgumentError

tf = pytest.importorskip("tensorflow")

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "petastorm")


def test_rows_of_a_unischema_dataset():
    from petastream.compat.tf_utils import make_petastorm_dataset

    with make_reader(os.path.join(FIXTURES, "indexed"), schema_fields=["id", "label", "tags", "vec"]) as reader:
        dataset = make_petastorm_dataset(reader)
        rows = list(dataset)
    assert type(rows[0]).__name__ == "Indexed_view_view" and list(rows[0]._fields) == ["id", "label", "tags", "vec"]
    assert sorted(int(r.id) for r in rows) == list(range(16))
    assert rows[0].id.dtype == tf.int32 and rows[0].vec.shape == (4,) and rows[0].label.dtype == tf.string
    assert dataset.element_spec.tags.shape.as_list() == [None]


def test_decimals_and_dates_cast_as_petastorm():
    from petastream.compat.tf_utils import make_petastorm_dataset

    with make_reader(os.path.join(FIXTURES, "all_codecs"), schema_fields=["id", "price", "day", "ts"]) as reader:
        rows = sorted(make_petastorm_dataset(reader), key=lambda r: int(r.id))
    assert rows[0].price.dtype == tf.string and rows[0].ts.dtype == tf.int64 and rows[0].day.dtype == tf.int64
    # What Petastorm 0.13.1's make_petastorm_dataset gave for row 0 (days, microseconds, normalized str).
    assert (rows[0].price.numpy(), int(rows[0].day), int(rows[0].ts)) == (b"-5E+3", 10956, 1614834367000000)


def test_a_none_is_petastorms_error():
    from petastream.compat.tf_utils import make_petastorm_dataset

    with make_reader(os.path.join(FIXTURES, "indexed"), schema_fields=["id", "note"]) as reader:
        with pytest.raises(Exception, match='"note"=None'):
            list(make_petastorm_dataset(reader))


def test_batches_of_a_parquet_store(tmp_path):
    from petastream.compat.tf_utils import make_petastorm_dataset, tf_tensors

    ids = np.arange(100)
    pq.write_table(pa.table({"id": ids, "name": [f"n{i}" for i in ids]}), tmp_path / "a.parquet", row_group_size=30)
    with make_batch_reader(str(tmp_path), num_epochs=1) as reader:
        batches = list(make_petastorm_dataset(reader))
    assert sorted(int(i) for b in batches for i in b.id) == list(range(100))
    assert batches[0].name.dtype == tf.string and type(batches[0]).__name__ == "inferred_schema_view"
    with make_batch_reader(str(tmp_path)) as reader:
        assert len(tf_tensors(reader).id) > 0
        with pytest.raises(InvalidArgumentError, match="shuffling_queue_capacity"):
            tf_tensors(reader, shuffling_queue_capacity=10)


def test_a_tf1_dataset_as_petastorm_s(tmp_path):
    """Petastorm builds it with tf.compat.v1 (a DatasetV1, recorded from Petastorm 0.13.1 on
    TF 2.17): its examples call make_one_shot_iterator() in a graph."""
    from petastream.compat.tf_utils import make_petastorm_dataset

    pq.write_table(pa.table({"id": np.arange(10)}), tmp_path / "a.parquet")
    with tf.Graph().as_default():
        with make_batch_reader(str(tmp_path), num_epochs=1) as reader:
            dataset = make_petastorm_dataset(reader)
            assert isinstance(dataset, tf.compat.v1.data.Dataset)
            batch = dataset.make_one_shot_iterator().get_next()
            with tf.compat.v1.Session() as session:
                assert sorted(session.run(batch).id.tolist()) == list(range(10))


def _petastorms_way(reader, element_spec):
    """The dataset as Petastorm (and this module before batch_source) built it: from_generator
    over the reader's batches, one element per batch."""
    def flat():
        for batch in reader:
            yield tuple(getattr(batch, k) for k in batch._fields)
    specs = tuple(element_spec)
    make = type(element_spec)
    return tf.compat.v1.data.Dataset.from_generator(flat, output_signature=specs).map(lambda *v: make(*v))


def test_batch_reader_elements_are_from_generators(tmp_path):
    """The batch reader's dataset (one bare numpy_function per batch) yields exactly the elements
    from_generator did: values, dtypes, shapes, order, batch boundaries."""
    from petastream.compat.tf_utils import make_petastorm_dataset

    n = 2500
    ids = np.arange(n)
    table = pa.table({"id": ids, "x": ids * 0.5, "small": pa.array(ids % 7, pa.int16()),
                      "vec": pa.array([[float(i), i + 1.0, i + 2.0] for i in ids], pa.list_(pa.float32())),
                      "name": [f"n{i}é" for i in ids]})
    pq.write_table(table, tmp_path / "a.parquet", row_group_size=900)
    pq.write_table(table.slice(0, 130), tmp_path / "b.parquet", row_group_size=50)
    args = dict(num_epochs=2, shuffle_row_groups=False, workers_count=1)
    with pytest.warns(UnicodeWarning), make_batch_reader(str(tmp_path), **args) as reader:
        dataset = make_petastorm_dataset(reader)
        got = list(dataset)
    with make_batch_reader(str(tmp_path), **args) as reader:
        want = list(_petastorms_way(reader, dataset.element_spec))
    assert len(got) == len(want) > 2
    assert sum(len(b.id) for b in got) == 2 * (n + 130) and len({len(b.id) for b in got}) > 1  # sizes vary
    assert [s.shape.as_list() for s in dataset.element_spec] == [[None], [None], [None], [None, None], [None]]
    for g, w in zip(got, want):
        assert type(g) is type(w) and g._fields == ("id", "x", "small", "vec", "name")
        for a, b in zip(g, w):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert got[0].name.numpy()[0].decode() == "n0é" and got[0].small.dtype == tf.int16


def test_batches_grouped_in_order_and_an_error_after_them():
    """Runs of batches of one shape, stacked, in order; a batch of another length starts a new
    run; the reader's error comes after the batches read before it."""
    from petastream.compat.tf_utils import _groups

    def batches():
        for rows in (3, 3, 3, 2, 3):
            yield (np.arange(rows), np.zeros((rows, 2), np.float32))
        raise RuntimeError("the reader's error")

    groups = _groups(batches(), 2)
    shapes = [tuple(a.shape for a in next(groups)) for _ in range(4)]
    assert shapes == [((2, 3), (2, 3, 2)), ((1, 3), (1, 3, 2)), ((1, 2), (1, 2, 2)), ((1, 3), (1, 3, 2))]
    with pytest.raises(RuntimeError, match="the reader's error"):
        next(groups)
