"""A shuffle fitted to a bounded shard cache: the window's working set fits the budget on real
orders, the fit is the largest such window, chunks stay within it, resumes keep the order."""

from __future__ import annotations

import numpy as np
import pytest
from tests.stream.conftest import random_shard_sizes

from petastream.errors import InvalidArgumentError
from petastream.stream import DEFAULT_WINDOW, EpochOrder, StreamPlanner, fit_to_cache
from petastream.stream.budget import MIN_SHARDS, reach, span_bytes


def _window_shard_bytes(order: EpochOrder, nbytes: np.ndarray, k: int) -> int:
    """Bytes of the shards that windows k and k+1 of G hold, from their ids."""
    off = np.concatenate([[0], np.cumsum(order.shard_sizes)])
    ids = np.concatenate([order.window_ids(j) for j in (k, k + 1) if j < order.num_windows])
    shards = np.unique(np.searchsorted(off, ids, side="right") - 1)
    return int(nbytes[shards].sum())


@pytest.mark.parametrize("case", range(40))
def test_two_consecutive_windows_fit_the_limit_on_real_orders(case):
    rng = np.random.default_rng(case)
    sizes = rng.integers(1, 400, int(rng.integers(4, 30)))
    sizes[rng.random(sizes.size) < 0.2] = rng.integers(1, 20)  # tail shards of writer tasks
    row = rng.integers(50, 5000, sizes.size)  # bytes per row, per shard
    nbytes = sizes * row
    limit = int(nbytes.max() * rng.uniform(MIN_SHARDS, sizes.size / 2 + MIN_SHARDS))
    fit = fit_to_cache(sizes, nbytes, limit)
    if nbytes.sum() <= limit:
        assert fit is None
        return
    assert fit is not None and fit.block_size == sizes.max()
    budget = limit - nbytes.max()
    assert fit.working_bytes <= budget
    for epoch in range(3):
        order = EpochOrder(sizes, shuffle=True, seed=case, epoch=epoch, block_size=fit.block_size,
                           window=fit.window)
        worst = max(_window_shard_bytes(order, nbytes, k) for k in range(order.num_windows))
        assert worst <= budget, (sizes.tolist(), limit, fit)
    # The largest such window: one more sample and the bound no longer fits.
    if fit.window < min(DEFAULT_WINDOW, sizes.sum()):
        assert span_bytes(sizes, nbytes, min(sizes.sum(), 2 * fit.window + 2)) > budget


def test_span_bytes_bounds_every_arrangement():
    rng = np.random.default_rng(7)
    for _ in range(200):
        sizes = np.array([s for s in random_shard_sizes(rng, 8, 40) if s] or [5])
        nbytes = sizes * rng.integers(1, 9, sizes.size)
        length = int(rng.integers(1, sizes.sum() + 1))
        bound = span_bytes(sizes, nbytes, length)
        for _ in range(20):  # blocks in a random order: every run of `length` positions
            perm = rng.permutation(sizes.size)
            owner = np.repeat(perm, sizes[perm])
            worst = max(int(nbytes[np.unique(owner[a:a + length])].sum())
                        for a in range(sizes.sum() - length + 1))
            assert worst <= bound, (sizes.tolist(), nbytes.tolist(), length)


def test_the_benchmark_dataset_gets_a_window_of_half_a_shard():
    sizes, nbytes = [1249] * 16 + [16], [20_568_802] * 16 + [263_758]
    fit = fit_to_cache(sizes, nbytes, sum(nbytes) // 4)
    assert fit is not None and (fit.block_size, fit.window) == (1249, 633)
    assert "window of 633 samples" in fit.reason and "cache_limit=82.3 MB" in fit.reason


def test_no_fit_when_the_dataset_fits_or_nothing_is_cached():
    assert fit_to_cache([100, 100], [10, 10], 20) is None
    assert fit_to_cache([100, 100], [0, 0], 1) is None  # read in place: nothing to fit


def test_a_limit_below_three_shards_is_refused_with_the_minimum():
    with pytest.raises(InvalidArgumentError, match=r"cache_limit=50.0 MB is too small .* largest shard "
                                                   r"is 20.0 MB .* holds 2 of them.* at least 3 .* 60.0 MB"):
        fit_to_cache([1000] * 10, [20_000_000] * 10, 50_000_000)


@pytest.mark.parametrize(("window", "batch", "world", "workers", "chunk", "readahead"), [
    (633, 256, 1, 2, 4000, 2), (10_000, 32, 2, 3, 65_536, 2), (100, 256, 1, 2, 4000, 2),
    (5000, 100, 1, 1, 300, 4), (5000, 100, 1, 1, 300, 0),
])
def test_reach_keeps_the_positions_in_use_within_one_window(window, batch, world, workers, chunk, readahead):
    got, r, fits = reach(window, batch, world, workers, chunk, readahead)
    assert got % batch == 0 and batch <= got <= max(batch, chunk) and 0 <= r <= readahead
    assert fits == ((1 + r) * got * workers * world <= window)
    assert fits or (got, r) == (batch, 0)


def test_window_shards_are_the_shards_of_the_window_ids():
    rng = np.random.default_rng(3)
    for _ in range(100):
        sizes = random_shard_sizes(rng)
        if not sum(sizes):
            continue
        off = np.concatenate([[0], np.cumsum(sizes)])
        for shuffle in (True, False):
            order = EpochOrder(sizes, shuffle=shuffle, seed=1, epoch=2, block_size=int(rng.integers(1, 70)),
                               window=int(rng.integers(1, 90)))
            for k in range(order.num_windows):
                want = set((np.searchsorted(off, order.window_ids(k), side="right") - 1).tolist())
                assert set(order.window_shards(k)) == want


def test_a_chosen_window_follows_the_resumed_state():
    sizes = [300] * 8
    saved = StreamPlanner(sizes, 16, shuffle=True, seed=5, block_size=300, window=100, adopt_order=True)
    saved.advance(40)
    state = saved.state_dict()
    assert (state["window"], state["block_size"]) == (100, 300)
    rest = saved.plan().order.take(np.arange(state["samples_consumed"], 2400))
    # Another run chose another window (say, another cache_limit): it resumes with the saved one.
    other = StreamPlanner(sizes, 16, shuffle=True, seed=5, block_size=300, window=700, adopt_order=True)
    other.load_state_dict(state)
    assert (other.window, other.block_size) == (100, 300)
    np.testing.assert_array_equal(other.plan().order.take(np.arange(state["samples_consumed"], 2400)), rest)
    # A window the user passed is theirs: a state with another one is an error, not a new order.
    mine = StreamPlanner(sizes, 16, shuffle=True, seed=5, block_size=300, window=700)
    with pytest.raises(ValueError, match="state was saved with window=100 but this planner has window=700"):
        mine.load_state_dict(state)
