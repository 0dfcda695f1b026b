"""Blocks of a mixed layout read from several shards straight into place (mds/mixed_rows.py):
``str``/``bytes`` read as bytes (``strings="ragged"``) equal per-sample decoding whatever the
lengths (inline in a binary view or not, one length throughout, empty), with and without
binary views; kept blocks are never overwritten by later reads; damaged bytes never served."""

from __future__ import annotations

import os

import numpy as np
import pytest

import petastream
from petastream.columns import gather
from petastream.columns import pool as pool_mod
from petastream.columns.ragged import Ragged
from petastream.errors import CorruptShardError
from petastream.mds.writer import write_mds

N = 900
TEXTS = ["", "plain", "héllo wörld", "日本語", "emoji 🎉🎉", "tab\tnew\nline", "\x00"]


def _rows(n: int = N) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(8)
    return {
        "_id": np.arange(n, dtype=np.int64),
        # varying lengths: empty, inline (<= 12 bytes), and longer (up to ~60 bytes)
        "a_text": np.array([TEXTS[i % len(TEXTS)] * (i % 4) + str(i) * (i % 3) for i in range(n)], dtype=object),
        "b_val": np.arange(n, dtype=np.int32) * 3,
        "c_blob": np.array([bytes(rng.integers(0, 256, i % 40, dtype=np.uint8)) for i in range(n)], dtype=object),
        "d_hash": np.array([i.to_bytes(4, "little") * 5 for i in range(n)], dtype=object),  # one length
        "e_f64": rng.random(n),
    }


COLUMNS = {"_id": "int64", "a_text": "str", "b_val": "int32", "c_blob": "bytes", "d_hash": "bytes", "e_f64": "float64"}


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    data = _rows()
    url = str(tmp_path_factory.mktemp("mixed-rows") / "ds")
    write_mds(data, url, columns=COLUMNS, size_limit=4096, compression=None)
    return url, data


def _check(got: dict, data: dict, ids: np.ndarray) -> None:
    for name in ("a_text", "c_blob", "d_hash"):
        col = got[name]
        assert isinstance(col, Ragged) and col.values.dtype == np.uint8 and col.offsets[0] == 0
        want = [v.encode() if isinstance(v, str) else v for v in data[name][ids]]
        assert [col[k].tobytes() for k in range(len(col))] == want, name
    np.testing.assert_array_equal(got["_id"], ids)
    np.testing.assert_array_equal(got["b_val"], data["b_val"][ids])
    np.testing.assert_array_equal(got["e_f64"], data["e_f64"][ids])


@pytest.mark.parametrize("views", [True, False], ids=["views", "no-views"])
def test_ragged_reads_across_shards_equal_the_values(written, monkeypatch, views):
    if not views:  # a pyarrow without binary_view arrays: each shard decoded, then scattered
        monkeypatch.setattr(gather, "_VIEWS", [False])
    url, data = written
    ds = petastream.open(url).with_strings("ragged")
    assert ds.num_shards > 4
    rng = np.random.default_rng(3)
    ids = np.concatenate([rng.permutation(N), rng.integers(0, N, 70)])  # repeats, as padding
    _check(ds.read(ids), data, ids)
    _check(ds.read(ids[:1]), data, ids[:1])
    local = rng.integers(0, ds.shard(2).num_samples, 50)
    _check(ds.read_shard(2, local), data, local + int(ds.shard_offsets[2]))
    whole = ds.read_shard(1)
    _check(whole, data, np.arange(int(ds.shard_offsets[1]), int(ds.shard_offsets[2])))
    sub = ds.read(ids[:100], columns=["d_hash", "b_val"])
    assert sub.keys() == {"d_hash", "b_val"}


def test_empty_values_and_empty_blocks(tmp_path):
    url = str(tmp_path / "ds")
    write_mds({"s": np.array([""] * 300, dtype=object), "x": np.arange(300)}, url, size_limit=1024,
              compression=None)
    ds = petastream.open(url).with_strings("ragged")
    got = ds.read(np.arange(300)[::-1].copy())
    assert len(got["s"]) == 300 and len(got["s"].values) == 0 and not got["s"].offsets.any()
    none = ds.read(np.zeros(0, np.int64))
    assert len(none["s"]) == 0


def test_kept_blocks_are_not_overwritten_by_later_reads(written):
    url, data = written
    pool = pool_mod.configure(64 << 20, min_bytes=1 << 10)
    try:
        ds = petastream.open(url).with_strings("ragged")
        rng = np.random.default_rng(4)
        kept = [(ids, ds.read(ids)) for ids in (rng.permutation(N) for _ in range(3))]
        for _ in range(4):
            ds.read(rng.permutation(N))  # blocks dropped at once: their buffers come back
        for ids, got in kept:
            _check(got, data, ids)
        assert pool.stats().reused > 0
    finally:
        pool_mod.configure()


def _damage_text(url: str, shard: str, old: bytes, new: bytes) -> None:
    path = os.path.join(url, shard)
    raw = open(path, "rb").read()
    assert raw.count(old) == 1 and len(old) == len(new)
    with open(path, "wb") as f:
        f.write(raw.replace(old, new))


def test_invalid_utf8_in_one_shard_fails_naming_it(tmp_path):
    n = 400
    texts = np.array([f"value-{i:05d}" if i != 333 else "zzzzzzzzzzzzzzzzzz" for i in range(n)], dtype=object)
    url = str(tmp_path / "ds")
    write_mds({"s": texts, "x": np.arange(n)}, url, size_limit=2048, compression=None, hashes=[])
    ds = petastream.open(url)
    shard, local = ds.locate(333)
    assert ds.num_shards > 2
    _damage_text(url, f"shard.{shard:05d}.mds", b"z" * 18, b"z" * 8 + b"\xff\xfe" + b"z" * 8)
    ragged = petastream.open(url).with_strings("ragged")
    ids = np.random.default_rng(5).permutation(n)
    with pytest.raises(CorruptShardError, match=rf"shard\.{shard:05d}\.mds.*column 's', sample {local} .*not valid UTF-8"):
        ragged.read(ids)
    with pytest.raises(CorruptShardError, match=rf"column 's', sample {local} "):
        petastream.open(url).read(ids)
    fine = ids[ids != 333]
    assert [ragged.read(fine)["s"][k].tobytes().decode() for k in range(3)] == list(texts[fine[:3]])


def test_inconsistent_sizes_fail_before_anything_is_read(tmp_path):
    url = str(tmp_path / "ds")
    write_mds({"s": np.array([f"v{i}" for i in range(300)], dtype=object), "x": np.arange(300)}, url,
              size_limit=1024, compression=None, hashes=[])
    path = os.path.join(url, "shard.00001.mds")
    data = bytearray(open(path, "rb").read())
    first = int.from_bytes(data[4:8], "little")
    data[first:first + 4] = (10_000).to_bytes(4, "little")  # the first sample's 's' length
    with open(path, "wb") as f:
        f.write(bytes(data))
    with pytest.raises(CorruptShardError, match=r"shard\.00001\.mds: column sizes do not add up"):
        petastream.open(url).with_strings("ragged").read(np.arange(300)[::-1].copy())


def test_values_at_the_end_of_a_shard(tmp_path):
    """A str column last in the samples: a part holding a shard's last sample cannot gather 12
    bytes past its first variable column's start (the file ends), and reads them on its own."""
    n = 500
    texts = np.array(["é" * (i % 7) + "x" * (i % 13) for i in range(n)], dtype=object)
    url = str(tmp_path / "ds")
    write_mds({"a": np.arange(n), "z": texts}, url, size_limit=2048, compression=None)
    ds = petastream.open(url).with_strings("ragged")
    assert ds.num_shards > 3
    ids = np.random.default_rng(6).permutation(n)
    got = ds.read(ids)["z"]
    assert [got[k].tobytes().decode() for k in range(n)] == list(texts[ids])
    last = ds.shard_offsets[1:] - 1  # every shard's last sample
    got = ds.read(last)["z"]
    assert [got[k].tobytes().decode() for k in range(len(last))] == list(texts[last])
