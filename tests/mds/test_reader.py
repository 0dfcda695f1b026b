"""The reader: bulk reads, integrity errors, hash checks, the shard cache."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

import petastream
from petastream.errors import (
    CorruptShardError,
    FormatError,
    IncompleteDatasetError,
    UnsafeEncodingError,
)
from petastream.mds.writer import write_mds
from tests.conftest import FIXTURES


def _copy_fixture(name, tmp_path):
    dst = tmp_path / name
    shutil.copytree(os.path.join(FIXTURES, name), dst)
    for root, _, files in os.walk(dst):
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    return dst


@pytest.fixture
def mixed(tmp_path):
    n = 1000
    rng = np.random.default_rng(0)
    data = {
        "id": np.arange(n),
        "vec": rng.random((n, 8)).astype(np.float32),
        "s": np.array([f"row-{i}" * (i % 4) for i in range(n)], dtype=object),
        "b": np.array([bytes([i % 256]) * (i % 7) for i in range(n)], dtype=object),
    }
    path = str(tmp_path / "mixed")
    write_mds(data, path, size_limit=4096, compression="zstd", hashes=["xxh64"])
    return path, data


def test_read_any_ids_in_any_order(mixed):
    path, data = mixed
    ds = petastream.open(path)
    assert ds.num_shards > 5
    ids = np.random.default_rng(3).permutation(len(ds))[:300]
    got = ds.read(ids)
    np.testing.assert_array_equal(got["id"], data["id"][ids])
    np.testing.assert_array_equal(got["vec"], data["vec"][ids])
    assert list(got["s"]) == list(data["s"][ids])
    assert list(got["b"]) == list(data["b"][ids])
    assert ds.read(ids, columns=["id"]).keys() == {"id"}


def test_all_fixed_shard_reads_as_zero_copy_views():
    ds = petastream.open(os.path.join(FIXTURES, "tabular-fixed"))
    shard = ds.shard(0)
    cols = shard.read_columns()
    assert not cols["features"].flags.owndata and cols["features"].shape[1:] == (16,)
    assert np.shares_memory(cols["id"], shard.u8)


def test_second_open_reuses_the_shard_cache(mixed, monkeypatch):
    path, _ = mixed
    ds = petastream.open(path)
    ds.read(np.arange(len(ds)))
    calls = []
    orig = petastream.storage.location.Location.read_bytes

    def counting(self, name):
        calls.append(name)
        return orig(self, name)

    monkeypatch.setattr(petastream.storage.location.Location, "read_bytes", counting)
    ds2 = petastream.open(path)
    ds2.read(np.arange(len(ds2)))
    assert calls and not [c for c in calls if ".mds" in c]  # metadata files only, no shard


def test_truncated_compressed_shard_names_the_file(tmp_path):
    path = _copy_fixture("tabular-fixed", tmp_path)
    victim = path / "shard.00002.mds.zstd"
    victim.write_bytes(victim.read_bytes()[:50])
    ds = petastream.open(str(path))
    with pytest.raises(CorruptShardError, match=r"shard.00002.mds.zstd: 50 bytes, index.json says \d+"):
        ds.read(np.arange(len(ds)))


def test_truncated_raw_shard_names_the_file(tmp_path):
    path = _copy_fixture("scalars-raw", tmp_path)
    victim = path / "shard.00003.mds"
    victim.write_bytes(victim.read_bytes()[:-3])
    ds = petastream.open(str(path))
    with pytest.raises(CorruptShardError, match="shard.00003.mds: .* index.json says"):
        ds[3]


def test_corrupted_bytes_fail_the_hash_check(tmp_path):
    path = _copy_fixture("scalars-zstd-hashed", tmp_path)
    victim = path / "shard.00001.mds.zstd"
    data = bytearray(victim.read_bytes())
    data[-5] ^= 0xFF
    victim.write_bytes(bytes(data))
    ds = petastream.open(str(path), validate_hash="xxh64")
    with pytest.raises(CorruptShardError, match="shard.00001.mds.zstd: xxh64 is"):
        ds.read(np.arange(len(ds)))
    with pytest.raises(FormatError, match="records only"):
        petastream.open(str(path), validate_hash="md5")


def test_corruption_without_hashes_still_fails_loudly(tmp_path):
    path = _copy_fixture("scalars-raw", tmp_path)
    victim = path / "shard.00000.mds"
    data = bytearray(victim.read_bytes())
    data[4:8] = (10_000).to_bytes(4, "little")  # offsets[0] points past the end
    victim.write_bytes(bytes(data))
    with pytest.raises(CorruptShardError, match="offsets table is inconsistent"):
        petastream.open(str(path))[0]


def test_pkl_columns_are_refused_unless_allowed():
    with pytest.raises(UnsafeEncodingError, match="allow_unsafe_types=True"):
        petastream.open(os.path.join(FIXTURES, "pkl-unsafe"))
    assert petastream.open(os.path.join(FIXTURES, "pkl-unsafe"), allow_unsafe_types=True)[0]["i"] == 0


def test_missing_index(tmp_path):
    with pytest.raises(FileNotFoundError, match="index.json not found"):
        petastream.open(str(tmp_path))
    path = _copy_fixture("tabular-fixed", tmp_path)
    os.remove(path / "index.json")
    with pytest.raises(IncompleteDatasetError, match="no index.json: its write did not finish"):
        petastream.open(str(path))
    merged = _copy_fixture("merged", tmp_path)
    os.remove(merged / "index.json")  # partial datasets in sub-directories, never merged
    with pytest.raises(IncompleteDatasetError, match="its write did not finish"):
        petastream.open(str(merged))


def test_bad_index_version(tmp_path):
    (tmp_path / "index.json").write_text('{"version": 3, "shards": []}')
    with pytest.raises(FormatError, match="unsupported index version 3"):
        petastream.open(str(tmp_path))


def test_index_with_an_extra_key_is_still_mds_but_a_missing_key_is_not(tmp_path):
    (tmp_path / "index.json").write_text('{"version": 2, "shards": [{"format": "mds"}]}')
    with pytest.raises(FormatError, match="lacks keys"):
        petastream.open(str(tmp_path))


def test_random_access_and_iteration(mixed):
    path, data = mixed
    ds = petastream.open(path)
    assert ds[-1]["id"] == 999 and ds[10]["s"] == data["s"][10]
    assert sum(1 for _ in ds) == 1000
    with pytest.raises(IndexError):
        ds[1000]


def test_dataset_pickles_by_reopening_and_refuses_a_changed_one(tmp_path):
    import pickle

    url = str(tmp_path / "ds")
    write_mds({"id": np.arange(10)}, url)
    ds = petastream.open(url)
    ds.read_shard(0, np.arange(3))  # open maps and the lock must not travel
    copy = pickle.loads(pickle.dumps(ds))
    assert copy.fingerprint == ds.fingerprint and copy.cache_dir == ds.cache_dir
    assert list(copy.read_shard(0, np.arange(10))["id"]) == list(range(10))
    blob = pickle.dumps(ds)
    shutil.rmtree(url)
    write_mds({"id": np.arange(20)}, url)
    with pytest.raises(FormatError, match="changed since this dataset was pickled"):
        pickle.loads(blob)
