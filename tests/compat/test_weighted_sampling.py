"""``WeightedSamplingReader``: mixing readers with probabilities, Petastorm's checks and stop rule."""

from __future__ import annotations

import os

import pytest

from petastream.compat import make_batch_reader, make_reader
from petastream.compat.weighted_sampling_reader import WeightedSamplingReader

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "petastorm")
INDEXED = os.path.join(FIXTURES, "indexed")


def _reader(**kwargs):
    return make_reader(INDEXED, schema_fields=["id", "label"], **kwargs)


def test_draws_follow_the_probabilities():
    # 2 endless readers, one filtered to id < 8 and one to id >= 8: the share of each shows the draw.
    from petastream.compat.predicates import in_lambda

    low = _reader(num_epochs=None, predicate=in_lambda(["id"], lambda i: i < 8))
    high = _reader(num_epochs=None, predicate=in_lambda(["id"], lambda i: i >= 8))
    with WeightedSamplingReader([low, high], [0.2, 0.8], seed=1) as mixed:
        ids = [int(next(mixed).id) for _ in range(2000)]
    share = sum(i >= 8 for i in ids) / len(ids)
    assert 0.75 < share < 0.85  # binomial sd ~0.009: far outside any flake


def test_a_seed_repeats_the_draws():
    from petastream.compat.predicates import in_lambda

    def mixed():
        low = _reader(num_epochs=None, shuffle_row_groups=False, predicate=in_lambda(["id"], lambda i: i < 8))
        high = _reader(num_epochs=None, shuffle_row_groups=False, predicate=in_lambda(["id"], lambda i: i >= 8))
        return WeightedSamplingReader([low, high], [1, 3], seed=7)

    with mixed() as a, mixed() as b:
        assert [int(next(a).id) for _ in range(50)] == [int(next(b).id) for _ in range(50)]


def test_stops_when_one_reader_runs_out():
    with WeightedSamplingReader([_reader(), _reader(num_epochs=None)], [0.5, 0.5], seed=3) as mixed:
        rows = list(mixed)
    assert 16 <= len(rows) and mixed.last_row_consumed


def test_petastorms_checks():
    with pytest.raises(ValueError, match="Two or more readers must be specified. Got 1."):
        WeightedSamplingReader([_reader()], [1.0])
    with pytest.raises(ValueError, match="same length"):
        WeightedSamplingReader([_reader(), _reader()], [1.0])
    with pytest.raises(ValueError, match="same schema"):
        WeightedSamplingReader([_reader(), make_reader(INDEXED, schema_fields=["id"])], [1, 1])
    with pytest.raises(ValueError, match='"batched_output"'):
        WeightedSamplingReader([_reader(), make_batch_reader(INDEXED, null_policy="fill")], [1, 1])
