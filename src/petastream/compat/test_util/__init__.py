"""``petastorm.test_util``: helpers Petastorm ships for users' own tests (a mock reader, and
shuffling analysis over a small dataset), plus the two helpers of Petastorm's own test suite
that its examples' tests import (``petastorm.tests.conftest.SyntheticDataset`` and
``petastorm.tests.test_tf_utils.create_tf_graph``; migrate points those here)."""

from __future__ import annotations

import functools
from collections import namedtuple
from collections.abc import Callable
from typing import Any

__all__ = ["SyntheticDataset", "create_tf_graph"]

# a test dataset: its URL, the rows written (dicts), its local path
SyntheticDataset = namedtuple("SyntheticDataset", ["url", "data", "path"])


def create_tf_graph(func: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``func`` inside a fresh TensorFlow graph (``with tf.Graph().as_default():``), for
    TF1-style tests; the signature is kept (pytest fixtures and parametrize see it)."""

    @functools.wraps(func)
    def in_new_graph(*args: Any, **kwargs: Any) -> Any:
        import tensorflow as tf

        with tf.Graph().as_default():
            return func(*args, **kwargs)

    return in_new_graph
