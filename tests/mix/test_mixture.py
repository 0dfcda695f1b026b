"""MixtureSource through the pipeline's loader: per-stream counts per epoch, distinct choices,
seeded selection that changes by epoch, exactly-once per share over ranks and workers, resume
on another world size, and the column check."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from petastream import Stream, mixture
from petastream.errors import InvalidArgumentError
from petastream.pipeline import BatchLoader
from tests.arrow_source import arrow_source

SIZES = (50, 30, 20)
SHARDS = ([20, 0, 30], [10, 10, 10], [7, 13])


def _sources():
    return [arrow_source({"src": np.full(n, k, np.int64), "i": np.arange(n)}, shards)
            for k, (n, shards) in enumerate(zip(SIZES, SHARDS))]


def _samples(loaders, steps=None):
    """(stream, id) of every sample the loaders (ranks) yield in one iteration, all ranks."""
    got: Counter = Counter()
    for loader in loaders:
        if steps == 0:
            continue
        for k, batch in enumerate(loader, 1):
            got.update(zip(batch["src"].tolist(), batch["i"].tolist()))
            if k == steps:  # broken off after ``steps`` batches handed out
                break
    return got


def _check_share(got: Counter, stream: int, count: int):
    """Stream ``stream`` gave ``count`` samples: whole copies plus distinct extra ones."""
    n = SIZES[stream]
    mine = {i: c for (s, i), c in got.items() if s == stream}
    q, r = divmod(count, n)
    assert sum(mine.values()) == count
    assert sorted(Counter(mine.get(i, 0) for i in range(n)).items()) == sorted(
        {q: n - r, q + 1: r}.items() if r else {q: n}.items())


def test_choose_and_repeat_counts_and_distinct_choice():
    loader = BatchLoader([Stream(s, **kw) for s, kw in zip(_sources(), [{"choose": 75}, {"choose": 12}, {"repeat": 0.5}])],
                         5, shuffle=True, seed=1, block_size=4, window=16)
    got = _samples([loader])
    _check_share(got, 0, 75)  # one copy and 25 more, distinct
    _check_share(got, 1, 12)  # 12 distinct of 30
    _check_share(got, 2, 10)


def test_selection_is_seeded_and_changes_by_epoch():
    def chosen(seed, epoch):
        loader = BatchLoader([Stream(_sources()[1], choose=8)], 4, shuffle=True, seed=seed)
        loader.set_epoch(epoch)
        return sorted(i for _, i in _samples([loader]))

    assert chosen(3, 0) == chosen(3, 0)
    assert chosen(3, 0) != chosen(3, 1)
    assert chosen(3, 0) != chosen(4, 0)
    assert len(set(chosen(3, 1))) == 8


def test_weights_with_epoch_size():
    src = [Stream(s, weight=w) for s, w in zip(_sources(), (1, 2, 1))]
    loader = BatchLoader(mixture(src, epoch_size=200), 10, shuffle=True, seed=2)
    got = _samples([loader])
    for stream, count in enumerate((50, 100, 50)):
        _check_share(got, stream, count)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(weights=st.lists(st.integers(0, 5), min_size=3, max_size=3).filter(any),
       world=st.integers(1, 4), workers=st.integers(1, 3), batches=st.integers(1, 12),
       seed=st.integers(0, 3), epoch=st.integers(0, 2))
def test_exactly_once_per_share_over_ranks_and_workers(weights, world, workers, batches, seed, epoch):
    size = 4 * world * batches  # whole global batches: no padding to discount
    streams = [Stream(s, weight=w) for s, w in zip(_sources(), weights)]
    counts = mixture(streams, epoch_size=size).counts
    loaders = [BatchLoader(mixture(streams, epoch_size=size), 4, shuffle=True, seed=seed, rank=r,
                           world_size=world, num_workers=workers, block_size=3, window=11) for r in range(world)]
    for loader in loaders:
        loader.set_epoch(epoch)
    assert len({loader.batches_per_epoch for loader in loaders}) == 1
    got = _samples(loaders)
    for stream, count in enumerate(counts):
        _check_share(got, stream, count)
    # the same samples as one rank with one worker reads: independent of the layout
    single = BatchLoader(mixture(streams, epoch_size=size), 4 * world, shuffle=True, seed=seed,
                         block_size=3, window=11)
    single.set_epoch(epoch)
    assert _samples([single]) == got


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=st.integers(1, 4), after=st.integers(1, 4), workers=st.integers(1, 3),
       steps=st.integers(0, 4), epoch=st.integers(0, 2))
def test_resume_on_another_world_size_reads_the_rest_of_the_shares(before, after, workers, steps, epoch):
    streams = [Stream(s, **kw) for s, kw in zip(_sources(), [{"choose": 70}, {"repeat": 0.4}, {}])]

    def ranks(world):
        return [BatchLoader(streams, 3, shuffle=True, seed=5, rank=r, world_size=world,
                            num_workers=workers, block_size=4, window=16) for r in range(world)]

    first = ranks(before)
    for loader in first:
        loader.set_epoch(epoch)
    head = _samples(first, steps)
    state = first[0].state_dict()
    second = ranks(after)
    for loader in second:
        loader.load_state_dict(state)
    tail = _samples(second)
    whole = BatchLoader(streams, 1, shuffle=True, seed=5, block_size=4, window=16)
    whole.set_epoch(epoch)
    expected = _samples([whole])  # the epoch, read by one rank: no padding
    got = head + tail
    assert not expected - got  # nothing lost
    assert sum((got - expected).values()) < 3 * after  # only the last global batch's padding


def test_columns_must_agree_and_the_error_names_them():
    a = arrow_source({"src": np.zeros(4, np.int64), "i": np.arange(4)}, [4])
    b = arrow_source({"src": np.zeros(4, np.int32), "j": np.arange(4)}, [4])
    with pytest.raises(InvalidArgumentError, match=r"columns \['i', 'j', 'src'\] differ \(i: stream 0 int64, "
                                                   r"stream 1 missing; j: .*src: stream 0 int64, stream 1 int32"):
        BatchLoader([Stream(a), Stream(b)], 2)


def test_a_list_must_hold_streams():
    # (a list of URLs alone is Parquet files, as Petastorm's make_batch_reader takes them)
    with pytest.raises(InvalidArgumentError, match="must hold petastream.Stream values"):
        BatchLoader([Stream(_sources()[0]), "some/url"], 2)


def test_pickled_mixture_reads_the_same_epoch():
    import pickle

    mix = mixture([Stream(s, choose=k) for s, k in zip(_sources(), (60, 7, 20))]).for_epoch(9, 4)
    other = pickle.loads(pickle.dumps(mix))
    reopened = mix.reopener()().for_epoch(9, 4)
    ids = np.arange(len(mix))
    for m in (other, reopened):
        for name in ("src", "i"):
            np.testing.assert_array_equal(m.read(ids)[name], mix.read(ids)[name])
