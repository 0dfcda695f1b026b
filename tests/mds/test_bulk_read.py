"""Bulk reads in any order equal per-sample decoding: every column kind, across shards, with
repeats, compressed or not, on our datasets and Mosaic's fixtures; corrupt headers fail first."""

from __future__ import annotations

import os

import numpy as np
import pytest

import petastream
from petastream.columns import gather
from petastream.columns.ragged import Ragged
from petastream.errors import CorruptShardError
from petastream.mds.writer import write_mds
from tests.conftest import FIXTURES
from tests.mds.fixture_values import FIXTURE_NAMES

N = 600


def _rows(n: int = N) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    texts = ["", "plain", "héllo wörld", "日本語", "emoji 🎉🎉", "tab\tnew\nline", "\x00"]
    vecs = np.empty(n, dtype=object)
    vecs[:] = [np.arange(1 + i % 5, dtype=np.int16) * i for i in range(n)]
    return {
        # Sorted column order puts fixed columns before (read from the gathered header
        # prefix), between and after variable ones.
        "_id": np.arange(n, dtype=np.int64) - 7,
        "_pair": rng.random((n, 2)).astype(np.float32),
        "a_text": np.array([texts[i % len(texts)] * (i % 3) + str(i) * (i % 2) for i in range(n)], dtype=object),
        "b_val": np.arange(n, dtype=np.int32) * 3,
        "c_blob": np.array([bytes(rng.integers(0, 256, i % 9, dtype=np.uint8)) for i in range(n)], dtype=object),
        "d_vec": vecs,
        "e_f64": rng.random(n),
        "f_mat": rng.random((n, 2, 3)).astype(np.float32),
    }


COLUMNS = {"_id": "int64", "_pair": "ndarray:float32:2", "a_text": "str", "b_val": "int32", "c_blob": "bytes", "d_vec": "ndarray:int16",
           "e_f64": "float64", "f_mat": "ndarray:float32:2,3"}


@pytest.fixture(params=[None, "zstd"], ids=["raw", "zstd"])
def mixed(tmp_path, request):
    data = _rows()
    url = str(tmp_path / "mixed")
    write_mds(data, url, columns=COLUMNS, size_limit=2048, compression=request.param)
    return petastream.open(url), data


def _assert_rows(got: dict, ds, ids) -> None:
    for k, i in enumerate(ids):
        one = ds[int(i)]
        assert set(got) == set(one)
        for col, value in one.items():
            bulk = got[col][k]
            if isinstance(value, np.ndarray):
                np.testing.assert_array_equal(np.asarray(bulk).reshape(value.shape), value)
            else:
                assert bulk == value, (col, i)


@pytest.mark.parametrize("force_arrow", [False, True])
def test_shuffled_read_with_repeats_across_shards(mixed, monkeypatch, force_arrow):
    if force_arrow:
        monkeypatch.setattr(gather, "SMALL_GATHER", 0)
    ds, data = mixed
    assert ds.num_shards > 3
    rng = np.random.default_rng(1)
    ids = np.concatenate([rng.permutation(N), rng.integers(0, N, 50)])  # repeats, as padding
    got = ds.read(ids)
    assert got["a_text"].dtype == object and got["c_blob"].dtype == object
    assert list(got["a_text"]) == list(data["a_text"][ids])
    assert list(got["c_blob"]) == list(data["c_blob"][ids])
    assert all(type(v) is bytes for v in got["c_blob"]) and all(type(v) is str for v in got["a_text"])
    np.testing.assert_array_equal(got["b_val"], data["b_val"][ids])
    np.testing.assert_array_equal(got["e_f64"], data["e_f64"][ids])
    np.testing.assert_array_equal(got["f_mat"], data["f_mat"][ids])
    assert isinstance(got["d_vec"], Ragged)
    for k, i in enumerate(ids):
        np.testing.assert_array_equal(got["d_vec"][k], data["d_vec"][i])
    sub = ds.read(ids[:40], columns=["c_blob", "e_f64"])
    assert sub.keys() == {"c_blob", "e_f64"}
    _assert_rows(ds.read(ids[:80]), ds, ids[:80])


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_fixed_size_rows_across_shards_land_in_contiguous_columns(tmp_path, compression):
    # All-fixed layouts gather packed rows from every shard into one table, then cut it.
    data = {k: v for k, v in _rows().items() if k in ("_id", "_pair", "b_val", "e_f64", "f_mat")}
    url = str(tmp_path / "fixed")
    write_mds(data, url, columns={k: COLUMNS[k] for k in data}, size_limit=2048, compression=compression)
    ds = petastream.open(url)
    assert ds.num_shards > 3 and ds.layout.all_fixed
    ids = np.concatenate([np.random.default_rng(3).permutation(N), [5, 5, N - 1]])
    got = ds.read(ids)
    for name, values in data.items():
        assert got[name].flags.c_contiguous and got[name].dtype == values.dtype
        np.testing.assert_array_equal(got[name], values[ids])
    assert ds.read(ids, columns=["f_mat"]).keys() == {"f_mat"}
    with pytest.raises(KeyError, match="no column 'nope'"):
        ds.read(ids, columns=["nope"])


def test_shard_read_in_any_order(mixed):
    ds, data = mixed
    shard = ds.shard(1)
    base = int(ds.shard_offsets[1])
    local = np.random.default_rng(2).integers(0, shard.num_samples, 3 * shard.num_samples)
    got = shard.read_columns(local)
    assert list(got["a_text"]) == list(data["a_text"][base + local])
    assert list(got["c_blob"]) == list(data["c_blob"][base + local])
    np.testing.assert_array_equal(got["f_mat"], data["f_mat"][base + local])
    whole = shard.read_columns()
    assert list(whole["a_text"]) == list(data["a_text"][base : base + shard.num_samples])


def test_single_shard_read_keeps_the_order_asked(tmp_path):
    data = _rows(200)
    url = str(tmp_path / "one")
    write_mds(data, url, columns=COLUMNS)
    ds = petastream.open(url)
    assert ds.num_shards == 1
    ids = np.random.default_rng(4).permutation(200)
    got = ds.read(ids)
    assert list(got["a_text"]) == list(data["a_text"][ids])
    np.testing.assert_array_equal(got["f_mat"], data["f_mat"][ids])
    empty = ds.read(np.zeros(0, np.int64))
    assert len(empty["a_text"]) == 0 and empty["a_text"].dtype == object and empty["f_mat"].shape == (0, 2, 3)


@pytest.mark.parametrize("name", [n for n in FIXTURE_NAMES if n != "images"])
def test_mosaic_fixtures_read_shuffled_equal_per_sample(name):
    ds = petastream.open(os.path.join(FIXTURES, name), allow_unsafe_types=(name == "pkl-unsafe"))
    rng = np.random.default_rng(0)
    ids = np.concatenate([rng.permutation(len(ds)), rng.integers(0, len(ds), 5)])
    _assert_rows(ds.read(ids), ds, ids)


def _corrupt_first_var_size(url: str, new_size: int) -> None:
    path = os.path.join(url, "shard.00000.mds")
    data = bytearray(open(path, "rb").read())
    n = int.from_bytes(data[:4], "little")
    first = int.from_bytes(data[4:8], "little")
    assert n > 1
    data[first : first + 4] = new_size.to_bytes(4, "little")
    with open(path, "wb") as f:
        f.write(bytes(data))


@pytest.mark.parametrize("bad_size", [2**32 - 1, 10_000, 0])
def test_inconsistent_column_sizes_fail_before_decoding(tmp_path, bad_size):
    url = str(tmp_path / "ds")
    # No hashes (#29.5 records xxh3_64 by default): the structural checks are what is tested.
    write_mds({"s": np.array(["abc", "defg", "hi"], dtype=object), "x": np.arange(3)}, url, compression=None,
              hashes=[])
    _corrupt_first_var_size(url, bad_size)
    ds = petastream.open(url)
    with pytest.raises(CorruptShardError, match="column sizes do not add up"):
        ds.read(np.array([2, 0, 1]))


def test_sample_shorter_than_its_header_is_corrupt(tmp_path):
    url = str(tmp_path / "ds")
    write_mds({"s": np.array(["", "", ""], dtype=object), "t": np.array(["", "", ""], dtype=object)},
              url, compression=None, hashes=[])  # no hash to catch it first: the structure must
    path = os.path.join(url, "shard.00000.mds")
    data = bytearray(open(path, "rb").read())
    # Move sample 1's start 5 bytes later: sample 0 grows, sample 1 (8 bytes) keeps only 3.
    off1 = int.from_bytes(data[8:12], "little")
    data[8:12] = (off1 + 5).to_bytes(4, "little")
    with open(path, "wb") as f:
        f.write(bytes(data))
    with pytest.raises(CorruptShardError, match="shorter than its column-size header"):
        petastream.open(url).read(np.arange(3))
