"""Logical dtypes from petastream.json reach every adapter (Spark booleans stored as uint8)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import petastream
from petastream.mds.sidecar import SIDECAR, dump_sidecar
from petastream.mds.writer import write_mds
from petastream.pipeline import BatchLoader
from tests.conftest import FIXTURES


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("logical") / "ds")
    n = 40
    flags = np.empty(n, dtype=object)
    flags[:] = [np.array([i % 2, 1, 0][: i % 3 + 1], np.uint8) for i in range(n)]
    write_mds({"id": np.arange(n), "b": (np.arange(n) % 3 == 0).astype(np.uint8), "flags": flags},
              path, columns={"id": "int64", "b": "uint8", "flags": "ndarray:uint8"}, size_limit=256)
    with open(f"{path}/{SIDECAR}", "wb") as f:
        f.write(dump_sidecar({"id": {"source_type": "bigint"}, "b": {"source_type": "boolean", "dtype": "bool"},
                              "flags": {"source_type": "array<boolean>", "dtype": "bool"}}))
    return path


def test_dataset_reads_the_sidecar_and_mosaic_datasets_have_none(url):
    assert petastream.open(url).logical_dtypes == {"b": "bool", "flags": "bool"}
    mosaic = next(p.parent for p in Path(FIXTURES).rglob("index.json"))
    assert petastream.open(str(mosaic)).column_info == {}


def test_batch_loader_views_booleans_unless_asked_not_to(url):
    batch = next(iter(BatchLoader(url, 6)))
    assert batch["b"].dtype == np.bool_ and batch["b"].tolist() == [True, False, False, True, False, False]
    assert batch["flags"].values.dtype == np.bool_ and batch["flags"][1].tolist() == [True, True]
    raw = next(iter(BatchLoader(url, 6, logical_types=False)))
    assert raw["b"].dtype == np.uint8 and raw["flags"].values.dtype == np.uint8


@pytest.mark.torch
def test_torch_gets_bool_tensors(url):
    import torch

    from petastream.torch import loader

    for kwargs in ({}, {"worker_type": "process", "num_workers": 2}):
        batch = next(iter(loader(url, 6, **kwargs)))
        assert batch["b"].dtype == torch.bool and batch["flags"][2].dtype == torch.bool


@pytest.mark.tf
def test_tensorflow_gets_tf_bool(url):
    import tensorflow as tf

    import petastream.tf as ptf

    ds = ptf.dataset(url, 6)
    assert ds.element_spec["b"].dtype == tf.bool and ds.element_spec["flags"].dtype == tf.bool
    batch = next(iter(ds))
    assert batch["b"].numpy().tolist() == [True, False, False, True, False, False]
    assert batch["flags"][1].numpy().tolist() == [True, True]
    assert ptf.dataset(url, 6, logical_types=False).element_spec["b"].dtype == tf.uint8
