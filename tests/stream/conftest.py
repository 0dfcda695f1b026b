"""Fixtures for the petastream.stream invariant tests.

Property tests are explicit loops over configurations drawn from a seeded numpy RNG (no
hypothesis here); a failing configuration is printed by the assertion message.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from petastream.stream import EpochOrder, EpochPlan


def random_shard_sizes(rng: np.random.Generator, max_shards: int = 12, max_size: int = 60):
    """Shard sizes with a fair share of empty shards (MDS has them)."""
    sizes = rng.integers(0, max_size, int(rng.integers(0, max_shards + 1)))
    if sizes.size and rng.random() < 0.4:
        sizes[rng.random(sizes.size) < 0.4] = 0
    return sizes.tolist()


def full_order(order: EpochOrder) -> np.ndarray:
    """G, materialised (tests only; small datasets)."""
    if order.num_samples == 0:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate(list(order))


def consume(plan: EpochPlan, num_workers: int = 1) -> list[np.ndarray]:
    """The rank's batches as a loader sees them: chunks from each worker, batches taken
    round-robin across workers (torch's in-order delivery). Checks the batch numbering."""
    streams = []
    for w in range(num_workers):
        streams.append(
            (int(t), chunk.batch(i))
            for chunk in plan.chunks(w, num_workers)
            for i, t in enumerate(chunk.batch_indices)
        )
    batches = []
    for t in range(plan.num_batches):
        got_t, ids = next(streams[t % num_workers])
        assert got_t == t, f"worker {t % num_workers} gave batch {got_t}, expected {t}"
        batches.append(ids)
    for w, s in enumerate(streams):
        assert next(s, None) is None, f"worker {w} has batches beyond {plan.num_batches}"
    return batches


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20240611)


@pytest.fixture
def sizes_from() -> Callable[..., list[int]]:
    return random_shard_sizes


@pytest.fixture
def materialise() -> Callable[[EpochOrder], np.ndarray]:
    return full_order


@pytest.fixture
def read_rank() -> Callable[..., list[np.ndarray]]:
    return consume
