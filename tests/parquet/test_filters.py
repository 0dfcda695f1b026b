"""filters: DNF lists and Expressions, row groups pruned, exact shard sizes, exact rows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from petastream.errors import InvalidArgumentError
from petastream.parquet import open_parquet
from tests.parquet.conftest import N
from tests.parquet.helpers import assert_same


def _all(src, columns=None):
    return src.read(np.arange(len(src)), columns)


def test_dnf_conjunction_prunes_row_groups_and_sizes_are_exact(pq_dir):
    src = open_parquet(pq_dir, filters=[("id", ">=", 37), ("id", "<", 151)])
    assert len(src) == 114
    # rows 37..150 lie in row groups [0,40) .. [120,160) of 40-row groups (files cut at 66, 133)
    kept = {(u.file, u.row_group) for u in src.plan.units}
    assert len(kept) == src.num_shards == 5
    assert _all(src, ["id"])["id"].tolist() == list(range(37, 151))
    sizes = np.diff([0, *np.cumsum(src.shard_sizes)])
    assert sizes.sum() == 114 and (sizes > 0).all()


def test_dnf_disjunction(pq_dir):
    src = open_parquet(pq_dir, filters=[[("id", "<", 10)], [("id", ">=", 190)], [("s", "in", ["text-100-é"])]])
    assert _all(src, ["id"])["id"].tolist() == [*range(10), 100, *range(190, 200)]


def test_expression_filter_on_columns_not_read(pq_dir, data):
    expr = (pc.field("i8") > 0) & pc.field("flag") & (pc.field("f64") < 20.0)
    src = open_parquet(pq_dir, filters=expr, columns=["s"])
    ids = np.arange(N)
    want = ids[((ids % 200 - 100) > 0) & (ids % 3 == 0) & (ids / 7.0 < 20.0)]
    assert len(src) == len(want) > 0
    assert _all(src)["s"].tolist() == [f"text-{i}-é" for i in want]
    full = open_parquet(pq_dir)
    assert_same(_all(src, ["s"]), full.read(want, ["s"]))


def test_filter_keeping_nothing_gives_an_empty_source(pq_dir):
    src = open_parquet(pq_dir, filters=[("id", ">", 10_000)])
    assert len(src) == 0 and src.num_shards == 0 and src.shard_offsets.tolist() == [0]
    got = src.read(np.zeros(0, np.int64))
    assert got["id"].dtype == np.int64 and len(got["id"]) == 0


def test_rows_with_a_null_filter_value_are_left_out(tmp_path):
    path = str(tmp_path / "n.parquet")
    pq.write_table(pa.table({"id": np.arange(6), "x": pa.array([1, None, 3, None, 5, 6])}), path)
    src = open_parquet(path, filters=[("x", ">", 2)], columns=["id"])
    assert _all(src)["id"].tolist() == [2, 4, 5]
    src = open_parquet(path, filters=pc.field("x").is_valid(), columns=["id", "x"])
    assert _all(src)["x"].tolist() == [1, 3, 5, 6]


def test_filters_with_rows_per_shard(pq_dir):
    src = open_parquet(pq_dir, filters=[("id", ">=", 5)], rows_per_shard=7)
    assert len(src) == N - 5 and src.shard_sizes.max() <= 7
    assert sorted(src.read(np.random.default_rng(0).permutation(len(src)), ["id"])["id"].tolist()) == list(
        range(5, N))


def test_bad_filters_name_the_problem(pq_dir):
    with pytest.raises(InvalidArgumentError, match="cannot be applied"):
        open_parquet(pq_dir, filters=[("nope", "=", 1)])
    with pytest.raises(InvalidArgumentError, match="not a pyarrow DNF filter"):
        open_parquet(pq_dir, filters=[("id", "~", 1)])
    with pytest.raises(InvalidArgumentError, match="filters must be"):
        open_parquet(pq_dir, filters="id > 3")
