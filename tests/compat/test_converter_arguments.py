"""The converter's loader arguments are checked when the loader is asked for (issue #16, 6):
no Spark, no framework needed (nothing is read before ``__enter__``)."""

from __future__ import annotations

import pytest

from petastream.compat import SparkDatasetConverter
from petastream.errors import InvalidArgumentError, InvalidArgumentTypeError


@pytest.fixture
def conv():
    return SparkDatasetConverter("file:///nowhere", ["file:///nowhere/shard.00000.mds"], 10)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"batch_size": 0}, InvalidArgumentError, r"make_torch_dataloader\(batch_size=0\): batch_size must be >= 1 .*pass batch_size=32"),
    ({"batch_size": -3}, InvalidArgumentError, r"batch_size=-3"),
    ({"batch_size": 2.5}, InvalidArgumentTypeError, r"batch_size must be an integer, got 2.5 \(float\)"),
    ({"batch_size": True}, InvalidArgumentTypeError, r"got True \(bool\)"),
    ({"workers_count": -2}, InvalidArgumentError, r"workers_count=-2\): workers_count must be >= 1 .*workers_count=None \(4\)"),
    ({"workers_count": 0}, InvalidArgumentError, r"workers_count=0"),
    ({"shuffling_queue_capacity": -5}, InvalidArgumentError, r"shuffling_queue_capacity=-5\): .* >= 0 .*pass 0 for no shuffling"),
    ({"shuffling_queue_capacity": None}, TypeError, r"shuffling_queue_capacity must be an int"),
    # Petastorm's own text, which its users match on
    ({"num_epochs": 0}, ValueError, r"iterations must be positive integer or None"),
    ({"num_epochs": 1.5}, ValueError, r"num_epochs=1.5\): iterations must be positive integer or None"),
])
def test_torch_arguments(conv, kwargs, error, match):
    with pytest.raises(error, match=match):
        conv.make_torch_dataloader(**kwargs)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"batch_size": -1}, InvalidArgumentError, r"make_tf_dataset\(batch_size=-1\): batch_size must be >= 0"),
    ({"prefetch": -2}, InvalidArgumentError, r"prefetch=-2\): prefetch must be >= -1 .*prefetch=None \(AUTOTUNE\)"),
    ({"prefetch": 1.0}, InvalidArgumentTypeError, r"prefetch must be an int"),
    ({"workers_count": -2}, InvalidArgumentError, r"workers_count must be >= 1"),
    ({"shuffling_queue_capacity": -5}, InvalidArgumentError, r"shuffling_queue_capacity must be >= 0"),
    ({"num_epochs": -1}, ValueError, r"iterations must be positive integer or None"),
])
def test_tf_arguments(conv, kwargs, error, match):
    with pytest.raises(error, match=match):
        conv.make_tf_dataset(**kwargs)


def test_what_petastorm_accepts_is_accepted(conv):
    import numpy as np

    conv.make_torch_dataloader()
    conv.make_torch_dataloader(batch_size=None, num_epochs=1, workers_count=1, shuffling_queue_capacity=0)
    conv.make_torch_dataloader(batch_size=np.int64(16), num_epochs=None, shuffling_queue_capacity=100)
    conv.make_tf_dataset()
    conv.make_tf_dataset(batch_size=0, prefetch=-1, shuffling_queue_capacity=0)  # 0 -> 32, AUTOTUNE
    conv.make_tf_dataset(batch_size=8, prefetch=0, num_epochs=2, workers_count=2,
                         shuffling_queue_capacity=None)
