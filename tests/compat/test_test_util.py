"""petastream.compat.test_util's stand-ins for the two helpers of Petastorm's own test suite
that its examples' tests import (SyntheticDataset, create_tf_graph)."""

import pytest

from petastream.compat.test_util import SyntheticDataset, create_tf_graph


def test_synthetic_dataset_fields():
    dataset = SyntheticDataset(url="file:///tmp/x", path="/tmp/x", data=[{"id": 1}])
    assert dataset._fields == ("url", "data", "path")


@pytest.mark.tf
def test_create_tf_graph_runs_in_a_new_graph_and_keeps_the_signature():
    import inspect

    tf = pytest.importorskip("tensorflow")

    @create_tf_graph
    def body(tmpdir, value=3):
        return tf.executing_eagerly(), tf.compat.v1.get_default_graph(), tmpdir, value

    eager, graph, tmpdir, value = body("d")
    assert (eager, tmpdir, value) == (False, "d", 3)
    assert graph is not tf.compat.v1.get_default_graph()
    assert list(inspect.signature(body).parameters) == ["tmpdir", "value"]  # pytest's fixtures
