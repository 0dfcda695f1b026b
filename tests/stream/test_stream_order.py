"""EpochOrder: G is a seeded permutation, layout-free, built from blocks and windows."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from petastream.stream import EpochOrder
from petastream.stream.grouping import shard_offsets


def test_unshuffled_order_is_identity():
    order = EpochOrder([3, 0, 5, 2], shuffle=False, window=4)
    assert np.concatenate(list(order)).tolist() == list(range(10))
    assert order.take(np.array([9, 0, 4])).tolist() == [9, 0, 4]


def test_every_sample_exactly_once_random_configs(rng, sizes_from, materialise):
    for _ in range(400):
        sizes = sizes_from(rng)
        cfg = dict(
            seed=int(rng.integers(0, 2**40)),
            epoch=int(rng.integers(0, 5)),
            block_size=int(rng.integers(1, 25)),
            window=int(rng.integers(1, 70)),
        )
        order = EpochOrder(sizes, shuffle=True, **cfg)
        g = materialise(order)
        n = sum(sizes)
        assert np.array_equal(np.sort(g), np.arange(n)), (sizes, cfg)
        if n:
            pos = rng.integers(0, n, 40)
            assert np.array_equal(order.take(pos), g[pos]), (sizes, cfg)
            for k in range(order.num_windows):
                assert np.array_equal(order.window_ids(k), g[k * order.window :][: order.window])


def test_same_seed_and_epoch_give_the_same_order(materialise):
    a = EpochOrder([100, 0, 250, 37], shuffle=True, seed=5, epoch=3, block_size=16, window=64)
    b = EpochOrder([100, 0, 250, 37], shuffle=True, seed=5, epoch=3, block_size=16, window=64)
    assert np.array_equal(materialise(a), materialise(b))


@pytest.mark.parametrize("change", [{"epoch": 4}, {"seed": 6}, {"block_size": 8}, {"window": 32}])
def test_other_epoch_seed_or_shape_gives_another_order(change, materialise):
    cfg = dict(seed=5, epoch=3, block_size=16, window=64)
    a = materialise(EpochOrder([100, 0, 250, 37], shuffle=True, **cfg))
    b = materialise(EpochOrder([100, 0, 250, 37], shuffle=True, **{**cfg, **change}))
    assert not np.array_equal(a, b)
    # and not just a little: most positions differ
    assert np.mean(a != b) > 0.9


def test_order_is_pinned():
    """G is part of the checkpoint contract: a state saved by one version must resume the same
    order in the next. Changing this list is a breaking change (bump STATE_VERSION)."""
    order = EpochOrder([7, 0, 12, 5, 9], shuffle=True, seed=9176, epoch=2, block_size=4, window=8)
    assert np.concatenate(list(order)).tolist() == [
        10, 9, 8, 7, 5, 6, 4, 23, 22, 17, 20, 19, 21, 18, 15, 16, 1,
        0, 3, 2, 11, 32, 13, 12, 25, 26, 31, 24, 30, 29, 28, 14, 27,
    ]  # fmt: skip


def test_windows_are_made_of_whole_blocks(materialise):
    """With shards and window multiples of block_size, each window holds whole blocks: runs of
    block_size consecutive ids, each starting at a block boundary of its shard."""
    sizes, block = [40, 0, 24, 16, 32], 8
    order = EpochOrder(sizes, shuffle=True, seed=1, block_size=block, window=3 * block)
    offsets = shard_offsets(sizes)
    for k in range(order.num_windows):
        ids = np.sort(order.window_ids(k))
        starts = ids[::block]
        assert np.array_equal(ids, (starts[:, None] + np.arange(block)).ravel())
        shard = np.searchsorted(offsets, starts, side="right") - 1
        assert np.all((starts - offsets[shard]) % block == 0)


def test_block_size_is_cut_at_shard_ends(materialise):
    # block_size far above every shard: blocks are whole shards, still a permutation
    sizes = [3, 0, 1, 9, 2]
    order = EpochOrder(sizes, shuffle=True, seed=2, block_size=1 << 20, window=2)
    assert order.num_blocks == 4
    assert sorted(materialise(order).tolist()) == list(range(15))


def test_first_window_mixes_many_shards():
    sizes = [1000] * 200
    order = EpochOrder(sizes, shuffle=True, seed=0, block_size=100, window=5000)
    first = order.window_ids(0)
    shards = np.unique(first // 1000)
    assert shards.size >= 30, f"first window only touches shards {shards}"
    # the window is shuffled, not a concatenation of sorted blocks
    assert np.mean(np.abs(np.diff(first)) == 1) < 0.01


def test_shuffle_has_no_visible_structure():
    n = 1 << 16
    order = EpochOrder([n], shuffle=True, seed=11, block_size=n, window=n)
    g = order.window_ids(0).astype(np.float64)
    pos = np.arange(n, dtype=np.float64)
    bound = 4 / np.sqrt(n)
    assert abs(np.corrcoef(pos, g)[0, 1]) < bound
    other = EpochOrder([n], shuffle=True, seed=11, epoch=1, block_size=n, window=n).window_ids(0)
    assert abs(np.corrcoef(g, other)[0, 1]) < bound
    # neighbours in G are spread like in a random permutation: P(|d| < n/4) = 1 - (3/4)^2
    assert abs(np.mean(np.abs(np.diff(g)) < n / 4) - 0.4375) < 0.01
    # two windows of one epoch are not shuffled alike
    two = EpochOrder([2 * n], shuffle=True, seed=11, block_size=2 * n, window=n)
    a, b = two.window_ids(0), two.window_ids(1)
    assert abs(np.corrcoef(np.argsort(a), np.argsort(b - n))[0, 1]) < bound


def test_take_accepts_any_position_order(materialise):
    order = EpochOrder([50, 7, 0, 31], shuffle=True, seed=3, block_size=5, window=16)
    g = materialise(order)
    pos = np.r_[np.arange(80, 88), np.arange(0, 88, 7)[::-1], [0, 0, 87]]
    assert np.array_equal(order.take(pos), g[pos])
    assert order.take(np.zeros(0, dtype=np.int64)).size == 0


def test_take_rejects_positions_outside_the_epoch():
    order = EpochOrder([5], shuffle=True)
    with pytest.raises(IndexError, match=r"positions must lie in \[0, 5\), got \[0, 5\]"):
        order.take(np.array([0, 5]))
    with pytest.raises(IndexError, match="window 1 is out of range; this epoch has 1"):
        order.window_ids(1)


def test_pickles_small_and_gives_the_same_order(materialise):
    order = EpochOrder([10_000] * 50, shuffle=True, seed=4, block_size=100, window=1000)
    before = order.take(np.arange(0, 500_000, 997))  # builds the block tables
    blob = pickle.dumps(order)
    assert len(blob) < 2_000  # shard sizes and settings; no block tables
    again = pickle.loads(blob)
    assert np.array_equal(again.take(np.arange(0, 500_000, 997)), before)


def test_empty_dataset():
    order = EpochOrder([0, 0], shuffle=True)
    assert order.num_samples == 0 and order.num_windows == 0 and list(order) == []
    assert order.take(np.zeros(0, dtype=np.int64)).size == 0


def test_block_finder_matches_a_binary_search(rng):
    # The bucket table behind take(): every position's block, as a search over the block
    # starts gives it, for spans with one-sample blocks, one block, and long ones.
    from petastream.stream.order import _BlockFinder

    for _ in range(300):
        lengths = rng.integers(1, rng.choice([2, 9, 40, 5000]), rng.integers(1, 60))
        cum = np.concatenate([[0], np.cumsum(lengths)])
        b0 = int(rng.integers(0, len(lengths)))
        b1 = int(rng.integers(b0 + 1, len(lengths) + 1))
        q = rng.integers(cum[b0], cum[b1], 200)
        expected = np.searchsorted(cum, q, side="right") - 1
        assert np.array_equal(_BlockFinder(cum, b0, b1).blocks(q), expected), (lengths, b0, b1)
    # A span needing more buckets than the cap (a huge window around a one-sample block)
    # keeps the binary search, with the same answers.
    cum = np.array([0, 1, 3_000_000, 3_000_001, 5_000_000])
    finder = _BlockFinder(cum, 0, 4)
    assert finder.table is None
    q = rng.integers(0, 5_000_000, 1000)
    assert np.array_equal(finder.blocks(q), np.searchsorted(cum, q, side="right") - 1)


def test_a_one_sample_window_permutes_whole_blocks_and_keeps_their_order():
    # compat's shuffle_row_groups without a queue (Petastorm's row-group order): blocks of whole
    # shards, windows of one sample; G is P itself, read through the fast path.
    sizes = [7, 0, 13, 5, 21, 9]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    orders = set()
    for seed in range(8):
        order = EpochOrder(sizes, shuffle=True, seed=seed, block_size=1 << 62, window=1)
        g = order.take(np.arange(order.num_samples))
        runs = np.split(g, np.flatnonzero(np.diff(g) != 1) + 1)
        assert sorted(g.tolist()) == list(range(sum(sizes)))
        assert all(int(r[0]) in starts for r in runs)
        shards = [int(s) for k in range(order.num_samples) for s in order.window_shards(k)]
        ids, of_shard = order.take_with_shards(np.arange(order.num_samples))
        assert of_shard is not None and of_shard.tolist() == shards
        orders.add(tuple(int(r[0]) for r in runs))
    assert len(orders) > 1
