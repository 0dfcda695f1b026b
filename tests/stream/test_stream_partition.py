"""Partition: global batches -> ranks, equal batch counts, the padding rule, elasticity."""

from __future__ import annotations

import numpy as np
import pytest

from petastream.stream import StreamPlanner, count_batches, petastorm_shard_to_rank


@pytest.mark.parametrize(
    ("n", "bs", "ws", "drop_last", "start", "expected"),
    [
        (10, 3, 1, False, 0, 4),
        (10, 3, 1, True, 0, 3),
        (10, 2, 2, False, 0, 3),
        (10, 2, 2, True, 0, 2),
        (8, 2, 2, True, 0, 2),
        (8, 2, 2, False, 0, 2),
        (3, 2, 4, False, 0, 1),  # N < world_size: one padded batch each
        (3, 2, 4, True, 0, 0),
        (3, 8, 1, False, 0, 1),  # N < batch_size
        (0, 4, 2, False, 0, 0),
        (10, 2, 2, False, 6, 1),
        (10, 2, 2, True, 6, 1),
        (10, 2, 2, False, 10, 0),
    ],
)
def test_count_batches(n, bs, ws, drop_last, start, expected):
    assert count_batches(n, bs, ws, drop_last, start) == expected


def _epoch(sizes, bs, ws, drop_last, shuffle=True, seed=7, block=5, window=13):
    """Every rank's batches, their planners, and G."""
    planners = [
        StreamPlanner(
            sizes,
            bs,
            shuffle=shuffle,
            seed=seed,
            block_size=block,
            window=window,
            world_size=ws,
            rank=r,
            drop_last=drop_last,
        )  # fmt: skip
        for r in range(ws)
    ]
    plans = [p.plan() for p in planners]
    order = planners[0].plan().order
    return plans, order


def test_every_sample_once_across_ranks_plus_documented_padding(rng, sizes_from, materialise):
    for _ in range(200):
        sizes = sizes_from(rng)
        n = sum(sizes)
        bs, ws = int(rng.integers(1, 7)), int(rng.integers(1, 6))
        drop_last = bool(rng.random() < 0.5)
        plans, order = _epoch(sizes, bs, ws, drop_last, seed=int(rng.integers(0, 1000)))
        g = materialise(order)
        gbs = bs * ws
        counts = {p.num_batches for p in plans}
        assert len(counts) == 1, ("ranks disagree on the batch count", sizes, bs, ws)
        t_count = counts.pop()
        seen = []
        for t in range(t_count):
            per_rank = [p.batch(t) for p in plans]
            sizes_t = {len(b) for b in per_rank}
            if ws > 1 or drop_last or t < t_count - 1:
                assert sizes_t == {bs}, (sizes, bs, ws, drop_last, t)
            glob = np.concatenate(per_rank)
            assert np.array_equal(glob, plans[0].global_batch(t))
            seen.append(glob)
        seen = np.concatenate(seen) if seen else np.zeros(0, dtype=np.int64)
        cfg = (sizes, bs, ws, drop_last)
        if drop_last:
            assert t_count == n // gbs
            assert np.array_equal(seen, g[: t_count * gbs]), cfg  # the tail of G is dropped
        elif ws == 1:
            assert t_count == -(-n // bs)
            assert np.array_equal(seen, g), cfg  # no padding: each sample exactly once
        else:
            assert t_count == -(-n // gbs)
            pad = t_count * gbs - n
            assert 0 <= pad < gbs, cfg
            expected = np.concatenate([g, np.resize(g, pad)]) if n else g
            assert np.array_equal(seen, expected), cfg  # padding wraps to the start of G


def test_global_batches_do_not_depend_on_world_size(materialise):
    """Global batch t (rank slices concatenated in rank order) is G[t*GBS:(t+1)*GBS] for every
    world size with the same GBS; only the last, short global batch differs: world_size 1
    leaves it short, larger world sizes complete it from the start of G."""
    sizes, gbs = [37, 0, 120, 5, 64], 12
    for drop_last in (False, True):
        reference = None
        for ws in (1, 2, 3, 4, 6, 12):
            plans, order = _epoch(sizes, gbs // ws, ws, drop_last)
            g = materialise(order)
            batches = [
                np.concatenate([p.batch(t) for p in plans]) for t in range(plans[0].num_batches)
            ]
            full = len(g) // gbs
            for t in range(full):
                assert np.array_equal(batches[t], g[t * gbs : (t + 1) * gbs])
            if reference is None:
                reference = batches[:full]
            assert all(np.array_equal(a, b) for a, b in zip(reference, batches[:full]))
            if not drop_last:
                tail = g[full * gbs :]
                assert np.array_equal(batches[-1][: len(tail)], tail)
                assert len(batches[-1]) == (len(tail) if ws == 1 else gbs)


def test_rank_batch_is_its_slice_of_the_global_batch():
    plans, _ = _epoch([50, 0, 50], 4, 3, False)
    for t in range(plans[0].num_batches):
        glob = plans[0].global_batch(t)
        for r, p in enumerate(plans):
            assert np.array_equal(p.batch(t), glob[r * 4 : (r + 1) * 4])


def test_unshuffled_is_sequential_in_rank_slices():
    plans, _ = _epoch([5, 0, 5], 2, 2, False, shuffle=False)
    assert [p.batch(0).tolist() for p in plans] == [[0, 1], [2, 3]]
    assert [p.batch(2).tolist() for p in plans] == [[8, 9], [0, 1]]  # padding from the start


def test_tiny_datasets_fewer_samples_than_ranks():
    plans, order = _epoch([2, 0, 1], 2, 4, False, shuffle=False)
    assert [p.num_batches for p in plans] == [1, 1, 1, 1]
    assert np.concatenate([p.batch(0) for p in plans]).tolist() == [0, 1, 2, 0, 1, 2, 0, 1]
    plans, _ = _epoch([2, 0, 1], 2, 4, True)
    assert [p.num_batches for p in plans] == [0, 0, 0, 0]


def test_tiny_dataset_fewer_samples_than_batch_size():
    plans, order = _epoch([3], 8, 1, False)
    assert plans[0].num_batches == 1 and sorted(plans[0].batch(0).tolist()) == [0, 1, 2]
    plans, _ = _epoch([3], 8, 1, True)
    assert plans[0].num_batches == 0


@pytest.mark.parametrize("sizes", [[], [0], [0, 0, 0]])
def test_empty_datasets_have_no_batches(sizes):
    for ws in (1, 3):
        plans, _ = _epoch(sizes, 2, ws, False)
        assert all(p.num_batches == 0 and list(p.chunks()) == [] for p in plans)


def test_batch_index_out_of_range():
    plans, _ = _epoch([10], 4, 1, False)
    with pytest.raises(IndexError, match="batch 3 is out of range; this pass has 3 batches"):
        plans[0].batch(3)


def test_petastorm_sharding_is_rank_and_world_size():
    assert petastorm_shard_to_rank(None, None) == (0, 1)
    assert petastorm_shard_to_rank(2, 5) == (2, 5)
    rank, ws = petastorm_shard_to_rank(1, 3)
    direct = StreamPlanner([10, 20], 4, world_size=3, rank=1, shuffle=True)
    via = StreamPlanner([10, 20], 4, world_size=ws, rank=rank, shuffle=True)
    assert np.array_equal(direct.plan().batch(0), via.plan().batch(0))


@pytest.mark.parametrize(
    ("cur", "count", "match"),
    [
        (0, None, "cur_shard and shard_count go together, got cur_shard=0 and shard_count=None"),
        (None, 2, "cur_shard and shard_count go together"),
        (3, 3, r"cur_shard must be in \[0, shard_count\), got cur_shard=3 with shard_count=3"),
        (-1, 3, r"cur_shard must be in \[0, shard_count\), got cur_shard=-1"),
        (0, 0, "shard_count must be >= 1, got 0"),
    ],
)
def test_petastorm_sharding_errors(cur, count, match):
    with pytest.raises(ValueError, match=match):
        petastorm_shard_to_rank(cur, count)
