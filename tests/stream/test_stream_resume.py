"""Planner state: epochs, advance, checkpoints; resumption loses and repeats nothing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from petastream.stream import STATE_VERSION, StreamPlanner

SIZES = [37, 0, 120, 5, 64, 0, 29]  # N = 255
N = sum(SIZES)


def _planners(bs, ws, drop_last=False, **kw):
    cfg = dict(shuffle=True, seed=42, block_size=8, window=48, drop_last=drop_last, **kw)
    return [StreamPlanner(SIZES, bs, world_size=ws, rank=r, **cfg) for r in range(ws)]


def _run(planners, read_rank, workers, stop=None):
    """Drive every rank in lockstep like DDP: begin a pass, deliver `stop` batches (all if
    None), advance each planner per batch. Returns the global stream of delivered ids."""
    plans = [p.begin_pass() for p in planners]
    per_rank = [read_rank(plan, workers) for plan in plans]
    count = plans[0].num_batches if stop is None else stop
    out = []
    for t in range(count):
        for r, p in enumerate(planners):
            out.append(per_rank[r][t])
            p.advance(1)
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def _g(planner):
    return planner.plan().order.take(np.arange(planner.num_samples))


def test_state_dict_is_small_json():
    planner = StreamPlanner(SIZES, 4, shuffle=True, seed=3, epoch=2)
    planner.advance(5)
    state = planner.state_dict()
    assert json.loads(json.dumps(state)) == state
    assert state["version"] == STATE_VERSION
    assert state["epoch"] == 2 and state["samples_consumed"] == 20
    assert len(json.dumps(state)) < 400


def test_resume_same_layout_at_every_batch(read_rank):
    for drop_last in (False, True):
        whole = _run(_planners(4, 3, drop_last), read_rank, 2)
        total = _planners(4, 3, drop_last)[0].num_batches
        for k in range(total):  # k == total: see the next-epoch test below
            first = _planners(4, 3, drop_last)
            before = _run(first, read_rank, 2, stop=k)
            state = json.loads(json.dumps(first[0].state_dict()))
            second = _planners(4, 3, drop_last)
            for p in second:
                p.load_state_dict(state)
                p.set_epoch(0)  # the usual call after loading: keeps the progress
            after = _run(second, read_rank, 2)
            assert np.array_equal(np.concatenate([before, after]), whole), (drop_last, k)


@pytest.mark.parametrize(("workers_before", "workers_after"), [(1, 4), (3, 1), (2, 5)])
def test_resume_after_changing_num_workers(read_rank, workers_before, workers_after):
    whole = _run(_planners(5, 2), read_rank, 1)
    first = _planners(5, 2)
    before = _run(first, read_rank, workers_before, stop=7)
    second = _planners(5, 2)
    for p in second:
        p.load_state_dict(first[0].state_dict())
    after = _run(second, read_rank, workers_after)
    assert np.array_equal(np.concatenate([before, after]), whole)


@pytest.mark.parametrize(
    ("layout_before", "layout_after"),
    [((4, 2), (2, 4)), ((4, 2), (8, 1)), ((3, 4), (5, 2)), ((1, 1), (6, 3)), ((16, 3), (1, 2))],
)
@pytest.mark.parametrize("drop_last", [False, True])
def test_resume_after_changing_world_size(read_rank, layout_before, layout_after, drop_last):
    """(batch_size, world_size) changes mid-epoch. The resumed stream is G from the first
    unseen sample on, re-batched for the new layout: nothing lost, nothing repeated."""
    (bs0, ws0), (bs1, ws1) = layout_before, layout_after
    first = _planners(bs0, ws0, drop_last)
    g = _g(first[0])
    for stop in (0, 1, 3):
        first = _planners(bs0, ws0, drop_last)
        before = _run(first, read_rank, 2, stop=stop)
        consumed = first[0].state_dict()["samples_consumed"]
        assert consumed == len(before) and np.array_equal(before, g[:consumed])
        second = _planners(bs1, ws1, drop_last)
        for p in second:
            p.load_state_dict(first[0].state_dict())
        after = _run(second, read_rank, 3)
        rest = len(g) - consumed
        gbs = bs1 * ws1
        if drop_last:
            kept = rest // gbs * gbs
            assert np.array_equal(after, g[consumed : consumed + kept])
        elif ws1 == 1:
            assert np.array_equal(after, g[consumed:])
        else:
            pad = -rest % gbs
            assert np.array_equal(after, np.concatenate([g[consumed:], np.resize(g, pad)]))
        # the real samples: each exactly once (before + after), minus a dropped tail
        seen = np.concatenate([before, after[: min(rest, len(after))]])
        assert len(np.unique(seen)) == len(seen)
        if not drop_last:
            assert np.array_equal(np.sort(seen), np.arange(N))


def test_state_is_the_same_on_every_rank(read_rank):
    planners = _planners(4, 3)
    _run(planners, read_rank, 1, stop=5)
    assert len({json.dumps(p.state_dict(), sort_keys=True) for p in planners}) == 1


def test_advance_completes_the_epoch_and_begin_pass_moves_on():
    planner = StreamPlanner([10], 4, shuffle=True, drop_last=True)
    assert planner.num_batches == 2 and planner.batches_per_epoch == 2
    planner.advance(2)
    assert planner.epoch_complete and planner.samples_consumed == 10  # the tail counts as done
    assert planner.state_dict()["epoch"] == 0  # complete, until the next pass begins
    plan = planner.begin_pass()
    assert plan.epoch == 1 and plan.num_batches == 2 and planner.samples_consumed == 0


def test_loop_without_set_epoch_never_sees_an_empty_epoch():
    planner = StreamPlanner([9], 2, shuffle=True)
    orders = []
    for _ in range(3):
        plan = planner.begin_pass()
        assert plan.num_batches == 5
        orders.append(np.concatenate([c.ids for c in plan.chunks()]))
        planner.advance(plan.num_batches)
    assert [sorted(o.tolist()) for o in orders] == [list(range(9))] * 3
    assert not np.array_equal(orders[0], orders[1])  # each pass is a new epoch


def test_set_epoch_semantics():
    planner = StreamPlanner([20], 2, shuffle=True)
    planner.advance(3)
    planner.set_epoch(0)  # same epoch: progress kept
    assert planner.samples_consumed == 6 and planner.num_batches == 7
    planner.set_epoch(1)  # another epoch: from its start
    assert planner.epoch == 1 and planner.samples_consumed == 0 and planner.num_batches == 10
    planner.set_epoch(0)
    assert planner.epoch == 0 and planner.samples_consumed == 0


def test_checkpoint_after_the_last_batch_resumes_into_the_next_epoch(read_rank):
    first = _planners(4, 2)
    _run(first, read_rank, 1)
    state = first[0].state_dict()
    second = _planners(4, 2)
    for p in second:
        p.load_state_dict(state)
    assert second[0].epoch_complete
    plan = second[0].begin_pass()
    assert plan.epoch == 1 and plan.start == 0 and plan.num_batches == second[0].batches_per_epoch
    # a trainer that calls set_epoch(e + 1) itself gets the same thing
    third = _planners(4, 2)
    third[0].load_state_dict(state)
    third[0].set_epoch(1)
    assert third[0].begin_pass().epoch == 1


def test_shrinking_world_after_a_drop_last_epoch_does_not_reopen_it(read_rank):
    first = _planners(8, 3, drop_last=True)
    _run(first, read_rank, 1)
    second = _planners(2, 1, drop_last=True)
    second[0].load_state_dict(first[0].state_dict())
    assert second[0].num_batches == 0  # the dropped tail stays dropped
    assert second[0].begin_pass().epoch == 1


def test_advance_past_the_end_is_an_error():
    planner = StreamPlanner([10], 4)
    planner.advance(2)
    with pytest.raises(ValueError, match=r"advance\(n_batches=2\) is past the end of epoch 0"):
        planner.advance(2)
    with pytest.raises(ValueError, match=r"n_batches must be >= 0 .*got -1"):
        planner.advance(-1)


@pytest.mark.parametrize(
    ("other", "match"),
    [
        ({"seed": 1}, "state was saved with seed=42 but this planner has seed=1"),
        ({"window": 64}, "state was saved with window=48 but this planner has window=64"),
        ({"block_size": 4}, "state was saved with block_size=8"),
        (
            {"shuffle": False},
            "state was saved with shuffle=True but this planner has shuffle=False",
        ),
        ({"sizes": SIZES[:-1]}, "state was saved with num_samples=255 but this planner has"),
        ({"sizes": SIZES[::-1]}, "state was saved with shards_digest="),
    ],
)
def test_loading_a_state_for_another_order_is_refused(other, match):
    saved = StreamPlanner(SIZES, 4, shuffle=True, seed=42, block_size=8, window=48).state_dict()
    cfg = dict(shuffle=True, seed=42, block_size=8, window=48)
    sizes = other.pop("sizes", SIZES)
    cfg.update(other)
    with pytest.raises(ValueError, match=match):
        StreamPlanner(sizes, 4, **cfg).load_state_dict(saved)


def test_unshuffled_state_ignores_shuffle_settings():
    saved = StreamPlanner(SIZES, 4, seed=1, window=10)
    saved.advance(3)
    planner = StreamPlanner(SIZES, 4, seed=2, window=99)
    planner.load_state_dict(saved.state_dict())
    assert planner.samples_consumed == 12


@pytest.mark.parametrize(
    ("patch", "exc", "match"),
    [
        ({"version": 99}, ValueError, "state has format='petastream.stream' version=99"),
        ({"format": "mosaic"}, ValueError, "state has format='mosaic'"),
        ({"samples_consumed": 256}, ValueError, r"samples_consumed'\] is 256, outside \[0, 255\]"),
        ({"samples_consumed": "3"}, TypeError, r"samples_consumed'\] must be an integer"),
        ({"epoch": -1}, ValueError, r"state\['epoch'\] must be >= 0"),
    ],
)
def test_corrupt_states_are_refused(patch, exc, match):
    planner = StreamPlanner(SIZES, 4)
    with pytest.raises(exc, match=match):
        planner.load_state_dict({**planner.state_dict(), **patch})
    with pytest.raises(TypeError, match="state must be a dict from state_dict"):
        planner.load_state_dict([("epoch", 0)])
