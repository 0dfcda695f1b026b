"""A mixture of sources that pack their fixed-size rows alike (PackedRows: MDS datasets of one
layout, Parquet sources of the same types) gathers those rows straight into one table; the
values are the streams' own, whatever the selection, and other columns still come along."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from petastream import Stream, mixture
from petastream.mds.writer import write_mds
from petastream.parquet import open_parquet
from petastream.source import PackedRows, packed_layout
from petastream.stream.grouping import group_by_shard
from tests.parquet.helpers import assert_same


def _rows(src: int, n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(src)
    return {"id": np.arange(n, dtype=np.int64) + 1000 * src, "x": rng.random((n, 3)).astype(np.float32),
            "label": np.full(n, src, np.int32)}


@pytest.fixture(scope="module")
def mds(tmp_path_factory):
    root = tmp_path_factory.mktemp("packed")
    write_mds(_rows(0, 70), str(root / "a"), size_limit=400)  # several shards each
    write_mds(_rows(1, 50), str(root / "b"), size_limit=400)
    return str(root / "a"), str(root / "b")


def _both_paths(mix, ids):
    """The block read the packed way (read_parts) and the per-stream way (read and scatter)."""
    groups = group_by_shard(ids, mix.shard_offsets)
    return mix.read_parts(groups, len(ids)), mix._scattered(groups, len(ids), list(mix.columns))


def test_whole_copies_read_the_streams_rows(mds):
    mix = mixture([Stream(mds[0]), Stream(mds[1])])
    assert isinstance(mix, PackedRows) and packed_layout(mix) is not None
    ids = np.random.default_rng(0).permutation(len(mix))
    got = mix.read(ids)
    want = {k: np.concatenate([_rows(0, 70)[k], _rows(1, 50)[k]])[ids] for k in ("id", "x", "label")}
    assert sorted(got) == sorted(want)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
        assert got[k].flags.c_contiguous


def test_partial_selections_and_repeats_match_the_per_stream_read(mds):
    mix = mixture([Stream(mds[0], choose=31), Stream(mds[1], repeat=1.7)]).for_epoch(5, 2)
    ids = np.random.default_rng(1).permutation(len(mix))[:97]
    packed, scattered = _both_paths(mix, ids)
    assert_same(packed, scattered)


def test_parquet_streams_pack_their_fixed_columns_and_scatter_the_rest(tmp_path):
    for k, n in ((0, 40), (1, 25)):
        rows = _rows(k, n)
        table = pa.table({"id": rows["id"], "x": pa.FixedSizeListArray.from_arrays(pa.array(rows["x"].ravel()), 3),
                          "s": [f"s{i}" for i in rows["id"]], "label": rows["label"]})
        pq.write_table(table, tmp_path / f"{k}.parquet", row_group_size=9)
    mix = mixture([Stream(open_parquet(str(tmp_path / "0.parquet"))),
                   Stream(open_parquet(str(tmp_path / "1.parquet")), choose=20)]).for_epoch(3, 0)
    assert packed_layout(mix).names == ("id", "x", "label")  # the str column is not packed
    ids = np.random.default_rng(2).permutation(len(mix))
    packed, scattered = _both_paths(mix, ids)
    assert_same(packed, scattered)
    assert list(packed) == ["id", "x", "s", "label"]
    assert [s for s in packed["s"]] == [f"s{i}" for i in packed["id"]]


def test_layouts_that_differ_read_per_stream(mds, tmp_path):
    other = tmp_path / "c"
    rows = _rows(2, 30)
    write_mds({"id": rows["id"], "x": rows["x"].astype(np.float64), "label": rows["label"]}, str(other))
    with pytest.raises(Exception, match="x"):  # the columns' types differ: no mixture at all
        mixture([Stream(mds[0]), Stream(str(other))])
    half = mixture([Stream(mds[0]), Stream(open_parquet_like(mds[1], tmp_path))])
    assert packed_layout(half) is None  # MDS and Parquet rows are packed in other orders
    ids = np.random.default_rng(3).permutation(len(half))
    packed, scattered = _both_paths(half, ids)
    assert_same(packed, scattered)


def open_parquet_like(mds_url: str, tmp_path) -> object:
    """The rows of an MDS dataset as a Parquet source (columns in another order)."""
    from petastream.mds.dataset import MDSDataset

    ds = MDSDataset(mds_url)
    rows = ds.read(np.arange(len(ds)))
    table = pa.table({"label": rows["label"], "id": rows["id"],
                      "x": pa.FixedSizeListArray.from_arrays(pa.array(rows["x"].ravel()), 3)})
    pq.write_table(table, tmp_path / "like.parquet")
    return open_parquet(str(tmp_path / "like.parquet"))
