"""``plan.restrict``: a plan narrowed by per-unit selections (what compat's readers build from
Petastorm's selectors, shards and predicates) reads exactly the rows kept, reopened by plan=."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from petastream.errors import InvalidArgumentError
from petastream.parquet import ParquetSource
from petastream.parquet.plan import restrict


@pytest.fixture
def source(tmp_path):
    ids = np.arange(100)
    pq.write_table(pa.table({"id": ids, "x": ids * 2.0}), tmp_path / "a.parquet", row_group_size=25)
    return ParquetSource(str(tmp_path), filters=[("id", ">=", 10)])  # unit 0 already keeps 15 of 25


def _ids(src: ParquetSource) -> list[int]:
    return sorted(int(i) for i in src.read(np.arange(len(src)), ["id"])["id"])


def test_masks_narrow_selections_and_false_drops(source):
    plan = source.plan
    assert [u.rows for u in plan.units] == [15, 25, 25, 25]
    even = np.arange(15) % 2 == 0  # over unit 0's kept rows (ids 10..24)
    narrowed = restrict(plan, [even, False, True, np.zeros(25, dtype=bool)])
    assert [u.rows for u in narrowed.units] == [8, 25]  # an all-False mask drops its unit too
    assert narrowed.fingerprint != plan.fingerprint
    reopened = ParquetSource(narrowed.root_urls, plan=narrowed)
    assert _ids(reopened) == list(range(10, 25, 2)) + list(range(50, 75))
    assert list(reopened.shard_sizes) == [8, 25]


def test_selections_must_fit_the_plan(source):
    with pytest.raises(InvalidArgumentError, match="4 units"):
        restrict(source.plan, [True])
    with pytest.raises(InvalidArgumentError, match="a mask of 3 rows for a unit of 15"):
        restrict(source.plan, [np.ones(3, dtype=bool), True, True, True])
