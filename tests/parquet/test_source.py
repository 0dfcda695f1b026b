"""The Source contract on Parquet files: shard sizes, reads in any order, projection, read-ahead."""

from __future__ import annotations

import time

import numpy as np
import pyarrow.parquet as pq
import pytest

from petastream.columns.ragged import Ragged
from petastream.errors import CorruptShardError, InvalidArgumentError
from petastream.parquet import ParquetSource, open_parquet
from petastream.source import is_source
from petastream.stream.grouping import group_by_shard
from tests.parquet.conftest import N
from tests.parquet.helpers import assert_same, column_of, write_files

ENCODINGS = {
    "id": "int64", "i8": "int8", "u16": "uint16", "f32": "float32", "f64": "float64", "flag": "uint8",
    "s": "str", "raw": "bytes", "dec": "str_decimal", "day": "int64", "ts": "int64",
    "vec": "ndarray:float32:4", "ragged": "ndarray:int32", "tags": "json",
}


def _expected(data, ids: np.ndarray) -> dict:
    """What a read of ``ids`` must give, computed from the Arrow table without the source."""
    col = {name: column_of(data, name, ids) for name in data.column_names}
    return {
        "id": np.asarray(col["id"], np.int64), "i8": np.asarray(col["i8"], np.int8),
        "u16": np.asarray(col["u16"], np.uint16), "f32": np.asarray(col["f32"], np.float32),
        "f64": np.asarray(col["f64"], np.float64), "flag": np.asarray(col["flag"], np.uint8),
        "s": np.asarray(col["s"], object), "raw": np.asarray(col["raw"] + [b"x"], object)[:-1],
        "dec": np.asarray(col["dec"], object),
        "day": data.column("day").cast("int32").take(ids).to_numpy().astype(np.int64) * 86_400 * 10**9,
        "ts": data.column("ts").cast("int64").take(ids).to_numpy() * 1000,
        "vec": np.asarray(col["vec"], np.float32).reshape(len(ids), 4),
        "ragged": Ragged(np.asarray([v for r in col["ragged"] for v in r], np.int32),
                         np.concatenate([[0], np.cumsum([len(r) for r in col["ragged"]])]).astype(np.int64)),
        "tags": _objects(col["tags"]),
    }


def _objects(values: list) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def test_a_directory_is_a_source_of_row_group_shards(pq_dir):
    src = open_parquet(pq_dir)
    assert is_source(src) and isinstance(src, ParquetSource)
    assert len(src) == N
    sizes = [md.row_group(i).num_rows for f in src.files for md in [pq.read_metadata(f)]
             for i in range(md.num_row_groups)]
    assert src.shard_sizes.tolist() == sizes and src.num_shards == len(sizes)
    assert src.shard_offsets.tolist() == [0, *np.cumsum(sizes).tolist()]
    assert src.columns == ENCODINGS and list(src.columns) == list(ENCODINGS)
    assert src.logical_dtypes == {"flag": "bool"}
    assert src.reads_in_place is False and src.stored_bytes > 0
    assert src.cached_shard_bytes().tolist() == [0] * src.num_shards  # local files: read in place
    assert src.cache_limit is None or src.cache_limit > 0


def test_reads_in_any_order_with_repeats_equal_the_data(pq_dir, data):
    src = open_parquet(pq_dir)
    ids = np.random.default_rng(3).integers(0, N, 300)
    assert_same(src.read(ids), _expected(data, ids))
    one = np.array([17, 3, 17, 0])  # inside one shard: read straight in that order
    assert_same(src.read(one), _expected(data, one))


def test_read_shard_and_read_parts(pq_dir, data):
    src = open_parquet(pq_dir)
    for s in range(src.num_shards):
        lo, hi = src.shard_offsets[s], src.shard_offsets[s + 1]
        assert_same(src.read_shard(s), _expected(data, np.arange(lo, hi)))
        local = np.array([hi - lo - 1, 0, 1])
        assert_same(src.read_shard(s, local), _expected(data, lo + local))
    ids = np.random.default_rng(0).permutation(N)[:120]
    groups = group_by_shard(ids, src.shard_offsets)
    assert_same(src.read_parts(reversed(groups), len(ids)), _expected(data, ids))
    with pytest.raises(IndexError, match="out of range"):
        src.read_shard(src.num_shards)
    with pytest.raises(IndexError, match="out of range"):
        src.read(np.array([N]))


def test_rows_per_shard_slices_row_groups(pq_dir, data):
    src = open_parquet(pq_dir, rows_per_shard=15)
    whole = open_parquet(pq_dir)
    assert src.shard_sizes.max() <= 15 and src.shard_sizes.sum() == N
    assert src.num_shards > whole.num_shards
    ids = np.random.default_rng(1).permutation(N)
    assert_same(src.read(ids), _expected(data, ids))


def test_projection(pq_dir, data):
    src = open_parquet(pq_dir, columns=["s", "id", "ragged"])
    assert list(src.columns) == ["s", "id", "ragged"]
    ids = np.array([5, 150, 60])
    got = src.read(ids)
    assert list(got) == ["s", "id", "ragged"]
    want = _expected(data, ids)
    assert_same(got, {k: want[k] for k in ("s", "id", "ragged")})
    assert list(src.read(ids, columns=["id"])) == ["id"]
    with pytest.raises(KeyError, match="no column 'f32'"):
        src.read(ids, columns=["f32"])
    with pytest.raises(InvalidArgumentError, match=r"columns \['nope'\] are not in .*part-00000\.parquet"):
        open_parquet(pq_dir, columns=["id", "nope"])


def test_empty_reads_are_typed(pq_dir):
    src = open_parquet(pq_dir)
    got = src.read(np.zeros(0, np.int64))
    assert got["id"].dtype == np.int64 and got["id"].shape == (0,)
    assert got["vec"].shape == (0, 4) and got["vec"].dtype == np.float32
    assert isinstance(got["ragged"], Ragged) and len(got["ragged"]) == 0
    assert got["s"].dtype == object and len(got["s"]) == 0


def test_strings_as_ragged_bytes(pq_dir, data):
    src = open_parquet(pq_dir, columns=["s", "raw"])
    src.strings = "ragged"
    ids = np.array([7, 199, 7, 45])
    got = src.read(ids)
    for name in ("s", "raw"):
        col = got[name]
        assert isinstance(col, Ragged) and col.values.dtype == np.uint8
        values = [bytes(col[i]) for i in range(len(ids))]
        want = column_of(data, name, ids)
        assert values == [w.encode() if isinstance(w, str) else w for w in want]


def test_prefetch_loads_ahead_and_close_releases(pq_dir, tmp_path):
    # Through the cache (local files read in place stay loaded past close(): test_decoded).
    src = open_parquet(pq_dir, read_in_place=False, cache_dir=str(tmp_path / "cache"))
    assert not any(src.is_loaded(s) for s in range(src.num_shards))
    src.prefetch([2, 0])
    deadline = time.monotonic() + 60
    while not (src.is_loaded(2) and src.is_loaded(0)):
        assert time.monotonic() < deadline, "read-ahead did not load the shards"
        time.sleep(0.01)
    src.close()
    assert not src.is_loaded(2)
    with pytest.raises(IndexError):
        src.prefetch([src.num_shards])


def test_a_file_rewritten_after_open_fails_the_read(tmp_path, data):
    root = str(tmp_path / "d")
    paths = write_files(data, root, files=2)
    src = open_parquet(root)
    pq.write_table(data.slice(0, 10), paths[1])  # another version of the second file
    src.read(np.array([0]))  # the first file is unchanged
    with pytest.raises(CorruptShardError, match="changed since the source was opened"):
        src.read(np.array([N - 1]))
