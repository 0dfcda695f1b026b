"""``petastream.compat.tf_utils`` as Petastorm 0.13.1's: n-gram elements, the ``tf.compat.v1``
dataset in graphs and sessions, ``tf_tensors`` (graph tensors fed by the reader, its shuffling
queue, eager values), the re-read warning. Expected values were recorded from Petastorm 0.13.1
reading the same fixture (tests/fixtures/petastorm/indexed: 4 row groups of 4 rows, ids 0-15)
with ``shuffle_row_groups=False, reader_pool_type='dummy'``."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from petastream.compat import make_batch_reader, make_reader
from petastream.compat.ngram import NGram
from petastream.compat.tf_utils import (
    RANDOM_SHUFFLING_QUEUE_SIZE,
    make_petastorm_dataset,
    tf_tensors,
)

tf = pytest.importorskip("tensorflow")
tf1 = tf.compat.v1
pytestmark = [pytest.mark.tf, pytest.mark.filterwarnings("ignore:Tensorflow will convert all unicode:UnicodeWarning")]

URL = "file://" + os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "petastorm", "indexed")
# Petastorm 0.13.1's windows of NGram({-1: [id, vec], 1: [id, label, tags]}) over the fixture, as (id at -1, id at 1).
WINDOWS = [(0, 2), (1, 3), (4, 6), (5, 7), (8, 10), (9, 11), (12, 14), (13, 15)]
RESET_WARNING = "Running multiple iterations over make_petastorm_dataset is not recommend for performance issue"


def _ngram_reader(**kwargs):
    with make_reader(URL) as reader:
        fields = reader.schema.fields
    ngram = NGram({-1: [fields["id"], fields["vec"]], 1: [fields["id"], fields["label"], fields["tags"]]},
                  100, fields["id"])
    return make_reader(URL, schema_fields=ngram, shuffle_row_groups=False, reader_pool_type="dummy", **kwargs)


def _rows_reader():
    return make_reader(URL, schema_fields=["id", "label", "tags", "vec"], shuffle_row_groups=False,
                       reader_pool_type="dummy")


def _check_ngram_structure(structure, leaf):
    """Petastorm's n-gram element: every offset from the first to the last, an offset without
    fields an empty namedtuple, each the n-gram's schema view at that offset."""
    assert sorted(structure) == [-1, 0, 1]
    assert {type(v).__name__ for v in structure.values()} == {"Indexed_view_view_view"}
    assert structure[0]._fields == ()
    assert leaf(structure[-1].id) == ([], tf.int32) and leaf(structure[-1].vec) == ([4], tf.float32)
    assert leaf(structure[1].label) == ([], tf.string) and leaf(structure[1].tags) == ([None], tf.string)


def test_ngram_dataset_eagerly():
    with _ngram_reader() as reader:
        dataset = make_petastorm_dataset(reader)
        _check_ngram_structure(dataset.element_spec, lambda s: (s.shape.as_list(), s.dtype))
        elements = list(dataset)
    assert [(int(e[-1].id), int(e[1].id)) for e in elements] == WINDOWS
    first = elements[0]
    assert first[1].label.numpy() == b"cat" and first[1].tags.numpy().tolist() == []
    np.testing.assert_allclose(first[-1].vec.numpy(), [0.00123015, 0.29874554, -0.27413785, -0.89059186], atol=1e-7)


def test_ngram_dataset_in_a_graph_with_a_session():
    with tf1.Graph().as_default(), _ngram_reader() as reader:
        dataset = make_petastorm_dataset(reader)
        shapes, types = dataset.output_shapes, dataset.output_types
        assert shapes[-1].vec.as_list() == [4] and shapes[1].tags.as_list() == [None] and types[1].label == tf.string
        next_element = dataset.make_one_shot_iterator().get_next()
        got = []
        with tf1.Session() as sess:
            with pytest.raises(tf.errors.OutOfRangeError):
                while True:
                    value = sess.run(next_element)
                    got.append((int(value[-1].id), int(value[1].id)))
    assert got == WINDOWS


def test_tf_tensors_of_an_ngram_reader_in_a_graph():
    with tf1.Graph().as_default(), _ngram_reader() as reader:
        tensors = tf_tensors(reader)
        _check_ngram_structure(tensors, lambda t: (t.shape.as_list(), t.dtype))
        with tf1.Session() as sess:
            first = sess.run(tensors)
            # Each run takes the reader's next window; a second tf_tensors reads on from the same reader.
            second = sess.run(tf_tensors(reader))
            rest = []
            with pytest.raises(tf.errors.OutOfRangeError):
                while True:
                    value = sess.run(tensors)
                    rest.append((int(value[-1].id), int(value[1].id)))
    assert (int(first[-1].id), int(first[1].id)) == WINDOWS[0]
    assert (int(second[-1].id), int(second[1].id)) == WINDOWS[1]
    assert rest == WINDOWS[2:]
    assert first[1].label == b"cat" and first[0] == type(first[0])()


def test_tf_tensors_eagerly_is_the_next_element():
    with _ngram_reader() as reader:
        windows = [tf_tensors(reader) for _ in range(2)]
    assert [(int(w[-1].id), int(w[1].id)) for w in windows] == WINDOWS[:2]
    assert isinstance(windows[0][1].label, tf.Tensor) and windows[0][1].label.numpy() == b"cat"
    with _rows_reader() as reader:
        rows = [tf_tensors(reader) for _ in range(3)]
    assert [int(r.id) for r in rows] == [0, 1, 2] and rows[0].vec.shape == (4,)


def test_tf_tensors_through_a_shuffling_queue():
    with tf1.Graph().as_default() as graph, _rows_reader() as reader:
        tensors = tf_tensors(reader, shuffling_queue_capacity=10, min_after_dequeue=5)
        assert [t.shape.as_list() for t in tensors] == [[], [], [None], [4]]
        assert type(tensors).__name__ == "Indexed_view_view"
        size = graph.get_tensor_by_name(RANDOM_SHUFFLING_QUEUE_SIZE + ":0")
        assert len(graph.get_collection(tf1.GraphKeys.QUEUE_RUNNERS)) == 1
        with tf1.Session() as sess:
            coord = tf1.train.Coordinator()
            threads = tf1.train.start_queue_runners(sess=sess, coord=coord)
            rows = [sess.run(tensors) for _ in range(12)]
            assert 0 <= sess.run(size) <= 10
            coord.request_stop()
            coord.join(threads)
    ids = [int(r.id) for r in rows]
    assert len(set(ids)) == 12 and set(ids) <= set(range(16))
    with _rows_reader() as plain:  # values travel with their row through the queue (any 12 rows)
        want = {int(r.id): (r.label.encode(), [t.encode() for t in r.tags], r.vec.tolist()) for r in plain}
    for r in rows:
        assert (r.label, r.tags.tolist(), r.vec.tolist()) == want[int(r.id)]


def test_shuffling_queue_eagerly_is_tensorflows_error():
    with _rows_reader() as reader, pytest.raises(RuntimeError, match="QueueRunners are not supported when eager"):
        tf_tensors(reader, shuffling_queue_capacity=10, min_after_dequeue=5)


def _parquet(tmp_path):
    ids = np.arange(40)
    pq.write_table(pa.table({"id": ids.astype(np.int32), "name": [f"n{i}" for i in ids],
                             "fixed": [[int(i), 1, 2] for i in ids]}), tmp_path / "a.parquet", row_group_size=16)
    return "file://" + str(tmp_path)


def test_batch_reader_shapes_and_queue_refused(tmp_path):
    url = _parquet(tmp_path)
    with make_batch_reader(url, shuffle_row_groups=False, workers_count=1) as reader:
        # Petastorm's inferred schema leaves every dimension of a batch unknown.
        spec = make_petastorm_dataset(reader).element_spec
        assert [s.shape.as_list() for s in spec] == [[None], [None], [None, None]]
        with pytest.raises(ValueError, match="shuffling_queue_capacity can not be used with a reader that produces "
                                             "batched_output"):
            tf_tensors(reader, 100, 90)
    with tf1.Graph().as_default(), make_batch_reader(url, shuffle_row_groups=False, workers_count=1) as reader:
        tensors = tf_tensors(reader)
        assert [t.shape.as_list() for t in tensors] == [[None], [None], [None, None]]
        with tf1.Session() as sess:
            batch = sess.run(tensors)
    assert sorted(batch.id.tolist())[:3] == [0, 1, 2] and batch.fixed.shape[1] == 3


def _resets(caught):
    return [w for w in caught if issubclass(w.category, UserWarning) and RESET_WARNING in str(w.message)]


def test_a_second_pass_warns_and_rereads():
    # tf.data may read ahead (an injected prefetch), so the warning is caught over the whole read.
    with _rows_reader() as reader, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset = make_petastorm_dataset(reader)
        first = [int(r.id) for r in dataset]
        assert not _resets(caught)
        second = [int(r.id) for r in dataset]
    assert first == second == list(range(16)) and len(_resets(caught)) == 1
    with tf1.Graph().as_default(), _rows_reader() as reader, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        next_row = make_petastorm_dataset(reader).repeat(2).make_one_shot_iterator().get_next()
        with tf1.Session() as sess:
            ids = [int(sess.run(next_row).id) for _ in range(32)]
            with pytest.raises(tf.errors.OutOfRangeError):
                sess.run(next_row)
    assert ids == list(range(16)) * 2 and len(_resets(caught)) == 1


def test_cache_then_repeat_does_not_reread():
    with tf1.Graph().as_default(), _rows_reader() as reader:
        next_row = make_petastorm_dataset(reader).cache().repeat(3).make_one_shot_iterator().get_next()
        with tf1.Session() as sess, warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            ids = [int(sess.run(next_row).id) for _ in range(48)]
            with pytest.raises(tf.errors.OutOfRangeError):
                sess.run(next_row)
    assert ids == list(range(16)) * 3


def test_unicode_fields_warn_as_petastorm():
    with _rows_reader() as reader, pytest.warns(UnicodeWarning, match="convert all unicode strings back to bytes"):
        make_petastorm_dataset(reader)
    with make_reader(URL, schema_fields=["id", "vec"]) as reader, warnings.catch_warnings():
        warnings.simplefilter("error", UnicodeWarning)
        make_petastorm_dataset(reader)
