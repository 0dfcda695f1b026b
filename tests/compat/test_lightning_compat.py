"""Lightning on the compat converter, as Databricks notebooks write it (examples/lightning)."""

from __future__ import annotations

import os
import sys

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.torch, pytest.mark.timeout(600),
              pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]
pytest.importorskip("pytorch_lightning")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "lightning"))
from compat_datamodule import train  # noqa: E402


def test_databricks_style_datamodule_trains_two_epochs(spark, converter_env):
    model = train(spark, rows=300, batch_size=32, epochs=2)
    steps = 240 // 32  # training rows (id % 5 != 0) // batch size
    assert len(model.seen) == 2 * steps and all(len(b) == 32 for b in model.seen)
    for epoch in (model.seen[:steps], model.seen[steps:]):  # a fresh loader each epoch
        ids = [i for b in epoch for i in b]
        assert all(i % 5 != 0 for i in ids) and len(set(ids)) == len(ids) == steps * 32
    validated = [i for b in model.validated for i in b]  # one whole pass per validation run
    assert sorted(validated) == sorted(2 * list(range(0, 300, 5)))
