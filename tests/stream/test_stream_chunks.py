"""Chunks and workers: round-robin reassembly, batch alignment, the size bound, by_shard."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from petastream.stream import StreamPlanner


def test_workers_round_robin_give_the_rank_batches_in_order(rng, sizes_from, read_rank):
    for _ in range(150):
        sizes = sizes_from(rng, max_size=80)
        bs, ws = int(rng.integers(1, 6)), int(rng.integers(1, 4))
        cfg = dict(
            shuffle=bool(rng.random() < 0.8), seed=int(rng.integers(0, 99)),
            block_size=int(rng.integers(1, 12)), window=int(rng.integers(1, 40)),
            world_size=ws, rank=int(rng.integers(0, ws)), drop_last=bool(rng.random() < 0.5),
        )  # fmt: skip
        plan = StreamPlanner(sizes, bs, **cfg).plan()
        expected = [plan.batch(t) for t in range(plan.num_batches)]
        for workers in (1, 2, 3, 5):
            got = read_rank(plan, workers)
            assert len(got) == len(expected), (sizes, bs, cfg, workers)
            assert all(np.array_equal(a, b) for a, b in zip(got, expected)), (sizes, cfg)


def test_chunks_are_whole_batches_within_the_window_bound(rng, sizes_from):
    for _ in range(150):
        sizes = sizes_from(rng, max_size=200)
        bs, window = int(rng.integers(1, 9)), int(rng.integers(1, 50))
        ws = int(rng.integers(1, 4))
        planner = StreamPlanner(
            sizes, bs, shuffle=True, window=window, world_size=ws, drop_last=rng.random() < 0.5
        )
        workers = int(rng.integers(1, 4))
        for w in range(workers):
            batches = []
            for chunk in planner.chunks(w, workers):
                assert chunk.ids.dtype == np.int64
                assert len(chunk.ids) <= max(window, bs), (sizes, bs, window)
                assert chunk.bounds[0] == 0 and chunk.bounds[-1] == len(chunk.ids)
                lengths = np.diff(chunk.bounds)
                assert np.all(lengths[:-1] == bs) and 1 <= lengths[-1] <= bs
                batches.extend(chunk.batch_indices.tolist())
            assert batches == list(range(w, planner.num_batches, workers))
            assert planner.plan().worker_num_batches(w, workers) == len(batches)


def test_max_samples_sets_the_chunk_size():
    planner = StreamPlanner([1000], 10, shuffle=True, window=512)
    assert [len(c) for c in planner.chunks()] == [51, 49]  # 512 // 10 batches per chunk
    assert [len(c) for c in planner.chunks(max_samples=100)] == [10] * 10
    assert [len(c) for c in planner.chunks(max_samples=5)] == [1] * 100  # at least one batch
    chunk = next(planner.chunks(max_samples=100))
    assert [len(b) for b in chunk.batches()] == [10] * 10
    assert chunk.num_batches == 10


def test_by_shard_groups_rebuild_the_chunk():
    sizes = [30, 0, 45, 0, 0, 25, 12]
    planner = StreamPlanner(sizes, 8, shuffle=True, block_size=4, window=32, world_size=3)
    offsets = planner.shard_offsets
    for chunk in planner.chunks():
        rebuilt = np.full(len(chunk.ids), -1)
        for g in chunk.by_shard():
            assert sizes[g.shard] > 0
            assert np.all(np.diff(g.positions) > 0) and g.local_ids.max() < sizes[g.shard]
            rebuilt[g.positions] = offsets[g.shard] + g.local_ids
        assert np.array_equal(rebuilt, chunk.ids)


def test_chunks_snapshot_the_position_when_called():
    planner = StreamPlanner([40], 4, shuffle=True)
    chunks = planner.chunks()  # not started yet
    planner.advance(3)
    whole = next(chunks)  # the snapshot: all 10 batches, from the start
    assert whole.batch_indices.tolist() == list(range(10))
    rest = next(planner.chunks())  # taken after advance(3): 7 batches, numbered from 0
    assert rest.batch_indices.tolist() == list(range(7))
    assert np.array_equal(rest.ids, whole.ids[12:])


def test_plan_pickles_small_for_workers():
    planner = StreamPlanner([100_000] * 40, 32, shuffle=True, block_size=64, world_size=2)
    plan = planner.begin_pass()
    expected = [c.ids for c in plan.chunks(1, 2, max_samples=4096)][:3]
    blob = pickle.dumps(plan)
    assert len(blob) < 4_000
    again = pickle.loads(blob)
    got = [c.ids for c in again.chunks(1, 2, max_samples=4096)][:3]
    assert all(np.array_equal(a, b) for a, b in zip(got, expected))


@pytest.mark.parametrize(
    ("args", "kwargs", "exc", "match"),
    [
        (
            (2, 2),
            {},
            ValueError,
            "worker_id must be < num_workers, got worker_id=2 with num_workers=2",
        ),
        ((0, 0), {}, ValueError, r"num_workers must be >= 1 \(loader workers"),
        ((-1, 2), {}, ValueError, r"worker_id must be >= 0 .*got -1"),
        ((0, 1), {"max_samples": 0}, ValueError, r"max_samples must be >= 1 .*got 0"),
        ((0.0, 1), {}, TypeError, r"worker_id must be an integer, got 0.0 \(float\)"),
    ],
)
def test_chunk_argument_errors_are_raised_at_the_call(args, kwargs, exc, match):
    planner = StreamPlanner([10], 2)
    with pytest.raises(exc, match=match):
        planner.chunks(*args, **kwargs)  # no next(): checked eagerly


def test_chunks_ramp_up_from_first_samples_and_cover_the_same_batches():
    planner = StreamPlanner([400, 350, 250], 10, shuffle=True, seed=2, window=300)
    ramped = list(planner.chunks(max_samples=1000, first_samples=20))
    assert [len(c) for c in ramped] == [2, 8, 32, 58]  # x4 each, capped at 100 batches
    flat = list(planner.chunks(max_samples=1000))
    assert [len(c) for c in flat] == [100]
    np.testing.assert_array_equal(np.concatenate([c.ids for c in ramped]), flat[0].ids)
    assert np.concatenate([c.batch_indices for c in ramped]).tolist() == list(range(100))
    assert [len(c) for c in planner.chunks(max_samples=1000, first_samples=5)][0] == 1  # >= 1 batch
