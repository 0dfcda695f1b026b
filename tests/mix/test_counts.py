"""Per-stream counts per epoch (petastream.mix.stream): the rounding rules, and the checks."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from petastream import Stream
from petastream.errors import InvalidArgumentError
from petastream.mix import epoch_counts
from petastream.mix.stream import largest_remainder


def test_choose_and_repeat_round_half_up():
    streams = [Stream("a", choose=7), Stream("b", repeat=0.5), Stream("c", repeat=2.25), Stream("d")]
    # 0.5 * 5 = 2.5 -> 3 (half up); 2.25 * 10 = 22.5 -> 23; no count: the whole stream once
    assert epoch_counts(streams, [3, 5, 10, 4]) == [7, 3, 23, 4]


def test_weights_split_the_sum_of_sizes_by_largest_remainder():
    # sizes add up to 10; quotas 10/3 each: floors 3, 3, 3, the one left to the first (tie)
    assert epoch_counts([Stream("a", weight=1), Stream("b", weight=1), Stream("c", weight=1)], [1, 2, 7]) == [4, 3, 3]
    assert epoch_counts([Stream("a", weight=3), Stream("b", weight=1)], [10, 10], epoch_size=7) == [5, 2]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.01, 100), min_size=1, max_size=6), st.integers(0, 10_000))
def test_weighted_counts_add_up_and_stay_within_one_of_the_quota(weights, total):
    counts = epoch_counts([Stream(str(i), weight=w) for i, w in enumerate(weights)], [1] * len(weights), total)
    assert sum(counts) == total
    whole = sum(Fraction(w) for w in weights)
    for c, w in zip(counts, weights):
        assert abs(c - Fraction(w) * total / whole) < 1


def test_largest_remainder_of_zero_quotas():
    assert largest_remainder(5, [Fraction(0), Fraction(0)]) == [0, 0]


@pytest.mark.parametrize("streams, epoch_size, match", [
    ([Stream("a", weight=1), Stream("b")], None, r"streams \[1\] have no weight"),
    ([Stream("a"), Stream("b")], 10, "epoch_size=10 splits an epoch by weight"),
    ([Stream("a", weight=0)], None, "weights add up to 0"),
])
def test_bad_mixtures_name_the_problem(streams, epoch_size, match):
    with pytest.raises(InvalidArgumentError, match=match):
        epoch_counts(streams, [5] * len(streams), epoch_size)


@pytest.mark.parametrize("kwargs, match", [
    ({"weight": 1, "choose": 2}, "has weight and choose: give at most one"),
    ({"repeat": -1}, "repeat must be a finite number >= 0, got -1"),
    ({"choose": 1.5}, "choose must be an int >= 0"),
    ({"weight": float("nan")}, "weight must be a finite number"),
])
def test_bad_streams_name_the_argument(kwargs, match):
    with pytest.raises(InvalidArgumentError, match=match):
        Stream("a", **kwargs)
