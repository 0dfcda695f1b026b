"""The planner's order decoded in bulk: exactly once, in order, values intact."""

from __future__ import annotations

import numpy as np
import pytest

import petastream
from petastream.mds.writer import write_mds
from petastream.pipeline.decode import decode_batches, read_chunk
from petastream.stream import StreamPlanner


@pytest.fixture
def dataset(tmp_path):
    n = 3000
    write_mds({"id": np.arange(n), "x": np.arange(n * 4, dtype=np.float32).reshape(n, 4),
               "s": np.array([f"s{i}" for i in range(n)], dtype=object)},
              str(tmp_path / "ds"), size_limit=8192, compression="zstd")
    return petastream.open(str(tmp_path / "ds"))


@pytest.mark.parametrize("num_workers", [1, 3])
@pytest.mark.parametrize("shuffle", [False, True])
def test_every_sample_once_in_plan_order(dataset, num_workers, shuffle):
    planner = StreamPlanner(dataset.shard_sizes, 64, shuffle=shuffle, seed=7, window=500, block_size=100)
    plan = planner.begin_pass()
    batches = {}
    for w in range(num_workers):
        for t, cols in decode_batches(dataset, plan, w, num_workers):
            batches[t] = cols
    assert sorted(batches) == list(range(plan.num_batches))
    ids = np.concatenate([batches[t]["id"] for t in sorted(batches)])
    assert sorted(ids.tolist()) == list(range(len(dataset)))
    expected = np.concatenate([plan.batch(t) for t in range(plan.num_batches)])
    np.testing.assert_array_equal(ids, expected)
    for cols in batches.values():
        np.testing.assert_array_equal(cols["x"][:, 0], cols["id"] * 4.0)
        assert list(cols["s"]) == [f"s{i}" for i in cols["id"]]
    assert (ids[: len(ids) // 2] != np.arange(len(ids) // 2)).any() == shuffle


def _text_dataset(path, n, size_limit, compression):
    texts = ["", "ascii", "ünïcödé", "日本語", "🎉", "a\x00b"]
    vecs = np.empty(n, dtype=object)
    vecs[:] = [np.arange(1 + i % 4, dtype=np.int32) + i for i in range(n)]
    data = {"id": np.arange(n),
            "s": np.array([texts[i % len(texts)] * (i % 3) for i in range(n)], dtype=object),
            "b": np.array([bytes([i % 256]) * (i % 5) for i in range(n)], dtype=object),
            "v": vecs}
    write_mds(data, str(path), columns={"id": "int", "s": "str", "b": "bytes", "v": "ndarray:int32"},
              size_limit=size_limit, compression=compression)
    return petastream.open(str(path)), data


@pytest.mark.parametrize("size_limit,compression", [(1 << 26, None), (2000, "zstd"), (2000, None)],
                         ids=["one-shard", "zstd-shards", "raw-shards"])
@pytest.mark.parametrize("world_size", [1, 3])
def test_str_bytes_and_ragged_columns_in_shuffled_batches(tmp_path, size_limit, compression, world_size):
    ds, data = _text_dataset(tmp_path / "ds", 500, size_limit, compression)
    assert (ds.num_shards == 1) == (size_limit == 1 << 26)
    planner = StreamPlanner(ds.shard_sizes, 32, shuffle=True, seed=3, window=200, block_size=50,
                            world_size=world_size, rank=world_size - 1)  # the last rank pads
    plan = planner.begin_pass()
    seen = []
    for _, cols in decode_batches(ds, plan, 0, 1):
        ids = cols["id"]
        seen.extend(ids.tolist())
        assert cols["s"].dtype == object and cols["b"].dtype == object
        assert list(cols["s"]) == list(data["s"][ids]) and all(type(x) is str for x in cols["s"])
        assert list(cols["b"]) == list(data["b"][ids]) and all(type(x) is bytes for x in cols["b"])
        assert len(cols["v"]) == len(ids)
        for k, i in enumerate(ids):
            np.testing.assert_array_equal(cols["v"][k], data["v"][i])
    expected = np.concatenate([plan.batch(t) for t in range(plan.num_batches)])
    assert seen == expected.tolist()


def test_read_chunk_within_one_shard_keeps_chunk_order(tmp_path):
    ds, data = _text_dataset(tmp_path / "ds", 300, 1 << 26, None)
    planner = StreamPlanner(ds.shard_sizes, 16, shuffle=True, seed=1, window=64, block_size=32)
    chunk = next(planner.begin_pass().chunks(0, 1))
    block = read_chunk(ds, chunk)
    np.testing.assert_array_equal(block["id"], chunk.ids)
    assert list(block["s"]) == list(data["s"][chunk.ids])


def test_chunk_size_is_bounded_by_bytes_and_not_tiny(tmp_path):
    from petastream.stream.budget import chunk_samples as by_size

    def chunk_samples(ds, window):
        return by_size(ds.stored_bytes, len(ds), window)

    small = str(tmp_path / "small")
    write_mds({"id": np.arange(100)}, small)
    assert chunk_samples(petastream.open(small), window=1) == 1 << 16  # not one read per batch
    assert chunk_samples(petastream.open(small), window=1 << 18) == 1 << 18
    big = str(tmp_path / "big")
    write_mds({"img": np.zeros((4, 1 << 20), np.uint8)}, big)
    assert chunk_samples(petastream.open(big), window=1 << 18) <= 64  # ~1 MiB rows: 64 MiB per read


def test_groups_ramp_up_and_cover_the_pass_once(dataset):
    from petastream.pipeline.decode import group_ranges

    planner = StreamPlanner(dataset.shard_sizes, 64, shuffle=True, seed=7, window=500, block_size=100)
    plan = planner.begin_pass()  # 47 batches, the last one short
    ranges = group_ranges(plan, 16)
    assert [b - a for a, b in ranges] == [1, 2, 4, 8, 16, 15, 1]  # the short last batch alone
    assert [a for a, _ in ranges[1:]] == [b for _, b in ranges[:-1]] and ranges[-1][1] == plan.num_batches


@pytest.mark.parametrize("in_place", [True, False])
def test_the_first_chunk_waits_for_the_look_ahead_only_where_shards_are_fetched(in_place):
    # Read-ahead announces the shards of the chunks after the current one; for the first chunk
    # that means computing the ids of the ramp's larger chunks (a whole small epoch) before
    # the first batch: worth it where those shards download, not where they are mapped in place.
    from petastream.pipeline.decode import _announced

    class Chunk:
        def __init__(self, k):
            self.k = k

        def shards_in_need_order(self):
            return [self.k]

    pulled, told = [], []

    def chunks():
        for k in range(5):
            pulled.append(k)
            yield Chunk(k)

    class Dataset:
        reads_in_place = in_place

        def prefetch(self, shards):
            told.append(list(shards))

    out = _announced(Dataset(), chunks(), depth=2)
    assert next(out).k == 0
    if in_place:
        assert pulled == [0] and told == [[0]]
        assert [c.k for c in out] == [1, 2, 3, 4]
        assert told == [[0], [1, 2, 3], [2, 3, 4], [3, 4], [4]]
    else:
        assert pulled == [0, 1, 2] and told == [[0, 1, 2]]
        assert [c.k for c in out] == [1, 2, 3, 4]


def test_local_uncompressed_shards_read_in_place(dataset, tmp_path):
    assert not dataset.reads_in_place  # zstd: decompressed into the cache first
    write_mds({"id": np.arange(10)}, str(tmp_path / "raw"), compression=None)
    assert petastream.open(str(tmp_path / "raw")).reads_in_place
