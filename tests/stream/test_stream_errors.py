"""Bad arguments: the message names the argument, shows the value and says what to pass."""

from __future__ import annotations

import numpy as np
import pytest

from petastream.stream import EpochOrder, StreamPlanner


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        (
            {"batch_size": 0},
            ValueError,
            r"batch_size must be >= 1 \(samples per rank per batch\), got 0; pass batch_size=1 or more",
        ),
        ({"batch_size": -3}, ValueError, r"batch_size must be >= 1 .*got -3"),
        ({"batch_size": 2.5}, TypeError, r"batch_size must be an integer, got 2.5 \(float\)"),
        ({"batch_size": True}, TypeError, r"batch_size must be an integer, got True \(bool\)"),
        (
            {"rank": 2, "world_size": 2},
            ValueError,
            r"rank must be < world_size, got rank=2 with world_size=2; ranks are numbered 0..1",
        ),
        ({"rank": -1}, ValueError, r"rank must be >= 0 .*got -1"),
        ({"world_size": 0}, ValueError, r"world_size must be >= 1 .*got 0"),
        (
            {"seed": -1},
            ValueError,
            r"seed must be >= 0 \(the shuffle seed\), got -1; pass seed=0 or more",
        ),
        ({"seed": "7"}, TypeError, r"seed must be an integer, got '7' \(str\)"),
        ({"epoch": -2}, ValueError, r"epoch must be >= 0 .*got -2"),
        (
            {"block_size": 0},
            ValueError,
            r"block_size must be >= 1 \(samples per shuffle block\), got 0",
        ),
        ({"window": 0}, ValueError, r"window must be >= 1 \(samples per shuffle window\), got 0"),
        (
            {"shard_sizes": [3, -1]},
            ValueError,
            r"shard_sizes\[1\] is -1; sample counts must be >= 0",
        ),
        (
            {"shard_sizes": [1.0, 2.0]},
            TypeError,
            r"shard_sizes must hold integers, got dtype float64",
        ),
        ({"shard_sizes": [[1, 2]]}, ValueError, r"shard_sizes must be 1-D .*got shape \(1, 2\)"),
        (
            {"shard_sizes": 10},
            TypeError,
            r"shard_sizes must be a sequence of per-shard sample counts, got int",
        ),
        ({"shard_sizes": "10"}, TypeError, r"shard_sizes must be a sequence .*got str"),
    ],
)
def test_planner_argument_errors(kwargs, exc, match):
    args = {"shard_sizes": [10, 0, 5], "batch_size": 4, **kwargs}
    with pytest.raises(exc, match=match):
        StreamPlanner(args.pop("shard_sizes"), args.pop("batch_size"), **args)


def test_numpy_integers_are_accepted():
    planner = StreamPlanner(
        np.array([10, 0, 5], dtype=np.uint32), np.int64(4), seed=np.uint64(3),
        world_size=np.int32(2), rank=np.int8(1),
    )  # fmt: skip
    assert planner.num_samples == 15 and planner.batch_size == 4 and planner.rank == 1
    assert type(planner.state_dict()["seed"]) is int  # JSON-serialisable


def test_huge_seed_is_fine():
    a = EpochOrder([50], shuffle=True, seed=2**200).window_ids(0)
    assert sorted(a.tolist()) == list(range(50))


def test_set_epoch_rejects_negative():
    with pytest.raises(ValueError, match=r"epoch must be >= 0 .*got -1"):
        StreamPlanner([4], 2).set_epoch(-1)
