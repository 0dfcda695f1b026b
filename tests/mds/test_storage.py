"""Storage URLs: local forms, memory://, and a real S3 API (moto server on loopback)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import petastream
from petastream.errors import CorruptShardError, MissingExtraError, StorageError
from petastream.mds.inspect import verify
from petastream.mds.writer import write_mds
from petastream.storage.location import is_local_url, resolve

DATA = {"id": np.arange(200), "s": np.array([f"v{i}" for i in range(200)], dtype=object)}


@pytest.mark.parametrize("form", ["plain", "file://", "file:"])
def test_local_url_forms(tmp_path, form):
    path = str(tmp_path / "ds")
    url = {"plain": path, "file://": "file://" + path, "file:": "file:" + path}[form]
    write_mds(DATA, url, size_limit=500)
    assert os.path.exists(os.path.join(path, "index.json"))
    assert len(petastream.open(url)) == 200
    assert is_local_url(url)


def test_dbfs_paths_map_to_the_fuse_mount(monkeypatch):
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "15.4")
    assert resolve("dbfs:/tmp/x").path == "/dbfs/tmp/x"
    assert resolve("/dbfs/tmp/x").path == "/dbfs/tmp/x"


def test_unknown_protocol_is_a_clear_error():
    with pytest.raises((StorageError, MissingExtraError, ValueError)):
        resolve("nosuchproto://bucket/x")


def test_local_writes_leave_no_temporary_files(tmp_path):
    write_mds(DATA, str(tmp_path), size_limit=300, compression="zstd")
    assert not [n for n in os.listdir(tmp_path) if ".tmp" in n]


@pytest.mark.cloud
def test_s3_round_trip_through_a_real_s3_api(s3_bucket, tmp_path):
    url = f"{s3_bucket}/datasets/one"
    write_mds(DATA, url, size_limit=500, compression="zstd", hashes=["sha1"])
    ds = petastream.open(url, cache_dir=str(tmp_path / "cache"), validate_hash="sha1")
    assert ds.num_shards > 3
    got = ds.read(np.arange(200)[::-1])
    assert list(got["id"]) == list(range(199, -1, -1)) and got["s"][0] == "v199"
    # the shards now sit in the local cache: a second epoch reads no shard from S3
    usage = ds.cache.usage()
    assert usage.entries == ds.num_shards and usage.temporary == 0
    assert verify(ds).ok


@pytest.mark.cloud
@pytest.mark.parametrize("compression", [None, "zstd"])
def test_s3_flipped_byte_in_a_default_written_dataset_is_caught(s3_bucket, tmp_path, compression):
    """Issue #29.5: a dataset written with the writer's defaults (no ``hashes=``) on S3, one
    byte of an id flipped there: the read fails naming the shard, instead of delivering a
    wrong id (before, no hash was recorded and the damaged row came back as data)."""
    import s3fs

    url = f"{s3_bucket}/datasets/flip"
    with petastream.MDSWriter(columns={"id": "int", "s": "str"}, out=url, compression=compression,
                              size_limit=2000) as w:
        for i in range(200):
            w.write({"id": i, "s": f"v{i}"})
    name = w.shards[1]["zip_data" if compression else "raw_data"]["basename"]
    fs = s3fs.S3FileSystem()
    key = f"{url}/{name}"
    data = bytearray(fs.cat_file(key))
    if compression:
        data[len(data) // 2] ^= 0x01
    else:  # the most significant byte of sample 3's id ([u32 len s][i64 id][s]): still decodes
        start = int.from_bytes(data[4 + 4 * 3 : 8 + 4 * 3], "little")
        data[start + 4 + 7] ^= 0x01
    fs.pipe_file(key, bytes(data))
    ds = petastream.open(url, cache_dir=str(tmp_path / "cache"))
    with pytest.raises(CorruptShardError, match="xxh3_64"):
        ds.read(np.arange(200))


@pytest.mark.cloud
def test_s3_merge_index(s3_bucket):
    for sub in ("a", "b"):
        write_mds({"x": np.arange(3)}, f"{s3_bucket}/m/{sub}")
    shards = petastream.merge_index([f"{s3_bucket}/m/a", f"{s3_bucket}/m/b"], f"{s3_bucket}/m")
    assert [s["raw_data"]["basename"] for s in shards] == ["a/shard.00000.mds", "b/shard.00000.mds"]
    assert len(petastream.open(f"{s3_bucket}/m")) == 6
