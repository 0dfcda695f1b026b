"""group_by_shard: one group per shard touched, each in the chunk's order, scatter positions."""

from __future__ import annotations

import numpy as np
import pytest

from petastream.stream import group_by_shard, shard_offsets


def _naive(ids, sizes):
    offsets = shard_offsets(sizes)
    out = {}
    for pos, i in enumerate(ids.tolist()):
        s = int(np.searchsorted(offsets, i, side="right") - 1)
        out.setdefault(s, []).append((i - int(offsets[s]), pos))
    return {s: sorted(v) for s, v in sorted(out.items())}


def test_matches_a_naive_grouping(rng, sizes_from):
    for _ in range(300):
        sizes = sizes_from(rng)
        n = sum(sizes)
        if n == 0:
            continue
        ids = rng.integers(0, n, int(rng.integers(0, 3 * n)))  # duplicates too (padding)
        groups = group_by_shard(ids, shard_offsets(sizes))
        assert [g.shard for g in groups] == sorted({g.shard for g in groups})
        got = {g.shard: sorted(zip(g.local_ids.tolist(), g.positions.tolist())) for g in groups}
        assert got == _naive(ids, sizes), sizes
        for g in groups:
            assert sizes[g.shard] > 0
            assert np.all(np.diff(g.positions) > 0)  # the chunk's order, kept within a shard
            assert np.array_equal(ids[g.positions], g.local_ids + shard_offsets(sizes)[g.shard])
        # the caller's shard numbers and ascending ids (cut into runs) give the same groups
        known = group_by_shard(ids, shard_offsets(sizes),
                               np.searchsorted(shard_offsets(sizes), ids, side="right") - 1)
        assert _as_lists(known) == _as_lists(groups)
        asc = np.sort(ids)
        assert _as_lists(group_by_shard(asc, shard_offsets(sizes))) == _as_lists(
            group_by_shard(asc, shard_offsets(sizes), np.searchsorted(shard_offsets(sizes), asc, side="right") - 1))


def _as_lists(groups):
    return [(g.shard, g.local_ids.tolist(), g.positions.tolist()) for g in groups]


def test_scatter_rebuilds_the_order():
    sizes = [4, 0, 3, 0, 5]
    ids = np.array([11, 0, 5, 4, 7, 3, 8])
    groups = group_by_shard(ids, shard_offsets(sizes))
    assert [(g.shard, g.local_ids.tolist(), g.positions.tolist()) for g in groups] == [
        (0, [0, 3], [1, 5]),
        (2, [1, 0], [2, 3]),
        (4, [4, 0, 1], [0, 4, 6]),
    ]


def test_empty_ids_and_offsets_dtype():
    assert group_by_shard(np.zeros(0, dtype=np.int64), shard_offsets([3])) == []
    assert shard_offsets([]).tolist() == [0]
    assert shard_offsets([2, 0, 3]).tolist() == [0, 2, 2, 5]


@pytest.mark.parametrize(
    ("ids", "offsets", "match"),
    [
        ([5], [0, 5], r"sample id 5 is outside the dataset \[0, 5\)"),
        ([-1, 2], [0, 5], r"sample id -1 is outside the dataset"),
        ([1], [[0, 5]], "shard_offsets must be a 1-D integer array of length num_shards"),
        ([1], [0.0, 5.0], "shard_offsets must be a 1-D integer array"),
        ([1.5], [0, 5], "ids must be a 1-D integer array, got shape"),
    ],
)
def test_bad_input(ids, offsets, match):
    with pytest.raises(ValueError, match=match):
        group_by_shard(np.array(ids), np.array(offsets))


def test_many_shards_few_ids_and_few_shards_many_ids_agree():
    sizes = [3, 0, 2] * 40  # 120 shards
    offsets = shard_offsets(sizes)
    few = np.array([199, 4, 0, 198, 3])
    many = np.tile(few, 100)
    shard_of = {i: int(np.searchsorted(offsets, i, side="right") - 1) for i in few.tolist()}
    expected = sorted(set(shard_of.values()))
    for ids in (few, many):
        groups = group_by_shard(ids, offsets)
        assert [g.shard for g in groups] == expected
        for g in groups:
            assert np.array_equal(ids[g.positions], g.local_ids + offsets[g.shard])
            assert np.all(np.diff(g.positions) > 0)


def test_more_shards_than_a_16_bit_key():
    sizes = [1] * 70_000 + [5]
    offsets = shard_offsets(sizes)
    ids = np.array([70_003, 69_999, 1, 70_000, 0, 69_999])
    assert _as_lists(group_by_shard(ids, offsets)) == [
        (0, [0], [4]), (1, [0], [2]), (69_999, [0, 0], [1, 5]), (70_000, [3, 0], [0, 3])]


def test_ids_of_one_shard_are_one_group_in_their_order(rng):
    sizes = [0, 5, 0, 7, 3, 0]
    offsets = shard_offsets(sizes)
    for s in (1, 3, 4):
        ids = rng.integers(offsets[s], offsets[s + 1], 20)  # shuffled, with repeats
        groups = group_by_shard(ids, offsets)
        assert _as_lists(groups) == [(s, (ids - offsets[s]).tolist(), list(range(20)))]
        assert _as_lists(groups) == _as_lists(group_by_shard(ids, offsets, np.full(20, s)))
