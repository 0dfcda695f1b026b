"""The planner's order decoded in bulk: exactly once, in order, values intact."""

from __future__ import annotations

import numpy as np
import pytest

import petastream
from petastream.batches import iter_batches
from petastream.mds.writer import write_mds
from petastream.stream import StreamPlanner


@pytest.fixture
def dataset(tmp_path):
    n = 3000
    write_mds({"id": np.arange(n), "x": np.arange(n * 4, dtype=np.float32).reshape(n, 4),
               "s": np.array([f"s{i}" for i in range(n)], dtype=object)},
              str(tmp_path / "ds"), size_limit=8192, compression="zstd")
    return petastream.open(str(tmp_path / "ds"))


@pytest.mark.parametrize("num_workers", [1, 3])
@pytest.mark.parametrize("shuffle", [False, True])
def test_every_sample_once_in_plan_order(dataset, num_workers, shuffle):
    planner = StreamPlanner(dataset.shard_sizes, 64, shuffle=shuffle, seed=7, window=500, block_size=100)
    plan = planner.begin_pass()
    batches = {}
    for w in range(num_workers):
        for t, cols in iter_batches(dataset, plan, w, num_workers):
            batches[t] = cols
    assert sorted(batches) == list(range(plan.num_batches))
    ids = np.concatenate([batches[t]["id"] for t in sorted(batches)])
    assert sorted(ids.tolist()) == list(range(len(dataset)))
    expected = np.concatenate([plan.batch(t) for t in range(plan.num_batches)])
    np.testing.assert_array_equal(ids, expected)
    for cols in batches.values():
        np.testing.assert_array_equal(cols["x"][:, 0], cols["id"] * 4.0)
        assert list(cols["s"]) == [f"s{i}" for i in cols["id"]]
    assert (ids[: len(ids) // 2] != np.arange(len(ids) // 2)).any() == shuffle
