"""Opening big indexes: the columnar ShardTable, parsed once per node into the node's index
cache (petastream.index.arrow there, keyed by index.json's bytes) and mapped by every later
open; a sidecar an earlier petastream left beside index.json (trusted only for the exact index
bytes it names); a remote index fetched once per node through the cache."""

from __future__ import annotations

import gc
import json
import logging
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import petastream
from petastream.errors import FormatError
from petastream.mds.cache_admin import forget_dataset
from petastream.mds.index import merge_index, parse_index
from petastream.mds.index_open import sidecar_key
from petastream.mds.index_sidecar import (
    INDEX_SIDECAR,
    MAGIC,
    encode_index_sidecar,
    index_digest,
    index_fingerprint,
)
from petastream.mds.shard_table import ShardTable
from petastream.mds.writer import MDSWriter, write_mds

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHILD_ENV = {"PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "src"), ROOT])}


def _data(n: int = 3000) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"id": np.arange(n, dtype=np.int64), "vec": rng.random((n, 8)).astype(np.float32),
            "s": np.array([f"row-{i}" for i in range(n)], dtype=object)}


def _mixed(path: str) -> str:
    """Shards stored compressed and uncompressed (incompressible ones), two hash algorithms."""
    rng = np.random.default_rng(1)
    with MDSWriter(columns={"id": "int64", "b": "bytes"}, out=path, compression="zstd:1",
                   hashes=["sha1", "xxh64"], size_limit=None, min_compression_saving=0.1) as w:
        for i in range(4):
            blobs = [rng.bytes(2000) if i % 2 else b"a" * 2000 for _ in range(50)]
            w.write_columns({"id": np.arange(i * 50, (i + 1) * 50, dtype=np.int64),
                             "b": np.array(blobs, dtype=object)})
            w.flush()
    return path


def _index_bytes(path: str) -> bytes:
    with open(os.path.join(path, "index.json"), "rb") as f:
        return f.read()


def _json_shards(path: str) -> list[dict]:
    return parse_index(_index_bytes(path))


def _cached_sidecar(path: str, cache: str) -> str:
    index = _index_bytes(path)
    return os.path.join(cache, "indexes", "v1", "data", sidecar_key(index_digest(index), len(index)))


def _legacy_sidecar(path: str, shards: list[dict] | None = None, index: bytes | None = None) -> bytes:
    """The sidecar an earlier petastream wrote beside index.json (of ``shards`` for ``index``)."""
    index = _index_bytes(path) if index is None else index
    table = ShardTable.from_shards(_json_shards(path) if shards is None else shards)
    return encode_index_sidecar(table, index_digest(index), len(index), index_fingerprint(index)).to_pybytes()


def test_first_open_builds_the_node_sidecar_and_the_next_maps_it(tmp_path):
    path = _mixed(str(tmp_path / "ds"))
    cache = str(tmp_path / "c")
    want = _json_shards(path)
    assert {s["compression"] for s in want} == {"zstd:1", None}  # both kinds are covered
    ds = petastream.open(path, cache_dir=cache)
    assert ds.index_origin == "built" and not ds.index_from_sidecar
    assert os.path.exists(_cached_sidecar(path, cache))
    assert INDEX_SIDECAR not in os.listdir(path)  # the dataset directory is left as it is
    again = petastream.open(path, cache_dir=cache)
    assert again.index_origin == "cache" and again.index_from_sidecar
    for opened in (ds, again):
        assert len(opened.shards) == len(want) and list(opened.shards) == want
        assert [opened.shards[i] for i in range(len(want))] == want  # the lazily built (cached) ones
        assert opened.shards[-1] == want[-1] and opened.shards[1:3] == want[1:3]
        assert opened.fingerprint == index_fingerprint(_index_bytes(path))
        np.testing.assert_array_equal(opened.shard_sizes, [s["samples"] for s in want])
        assert opened.stored_bytes == sum(s["raw_data"]["bytes"] for s in want)
        np.testing.assert_array_equal(opened.read(np.arange(len(opened)))["id"], np.arange(200))


def test_merged_index_sub_directory_basenames_through_the_cache(tmp_path):
    root = tmp_path / "merged"
    for sub in ("0", "1"):
        write_mds(_data(500), str(root / sub), size_limit=4000)
    merge_index(str(root))
    assert sorted(os.listdir(root)) == ["0", "1", "index.json"]
    for origin in ("built", "cache"):
        ds = petastream.open(str(root), cache_dir=str(tmp_path / "c"))
        assert ds.index_origin == origin
        assert list(ds.shards) == _json_shards(str(root))
        assert ds.shards[0]["raw_data"]["basename"].startswith("0/")
        assert len(ds) == 1000 and int(ds.read(np.arange(1000))["id"].sum()) == 2 * sum(range(500))


def test_a_rewritten_index_json_gets_a_new_sidecar_never_the_old_one(tmp_path):
    path = str(tmp_path / "ds")
    cache = str(tmp_path / "c")
    write_mds(_data(), path, size_limit=20_000)
    assert petastream.open(path, cache_dir=cache).index_origin == "built"
    old = _cached_sidecar(path, cache)
    # Rewritten: one shard fewer, other formatting (the columns path reads it too).
    index = os.path.join(path, "index.json")
    doc = json.loads(_index_bytes(path))
    doc["shards"] = doc["shards"][:-1]
    with open(index, "w") as f:
        json.dump(doc, f, indent=1)
    for origin in ("built", "cache"):
        ds = petastream.open(path, cache_dir=cache)
        assert ds.index_origin == origin
        assert list(ds.shards) == doc["shards"] and ds.num_shards == len(doc["shards"])
        assert ds.fingerprint == index_fingerprint(_index_bytes(path))
    assert os.path.exists(old) and _cached_sidecar(path, cache) != old


@pytest.mark.parametrize("where", ["magic", "digest", "payload", "truncated", "empty"])
def test_a_damaged_cached_sidecar_is_rebuilt_not_served(tmp_path, where, caplog):
    path = str(tmp_path / "ds")
    cache = str(tmp_path / "c")
    write_mds(_data(), path, size_limit=20_000)
    ds = petastream.open(path, cache_dir=cache)
    assert ds.index_origin == "built"
    del ds
    gc.collect()  # unmapped: truncating a mapped file would fault its reader
    _damage(_cached_sidecar(path, cache), where)
    with caplog.at_level(logging.INFO, logger="petastream.mds.index_sidecar"):
        ds = petastream.open(path, cache_dir=cache)
    assert ds.index_origin == "built" and "not used" in caplog.text
    assert list(ds.shards) == _json_shards(path)
    assert petastream.open(path, cache_dir=cache).index_origin == "cache"


def _damage(path: str, where: str) -> None:
    with open(path, "rb") as f:
        data = bytearray(f.read())
    if where == "magic":
        data[0] ^= 0xFF
    elif where == "digest":
        data[len(MAGIC) + 3] ^= 0x01
    elif where == "payload":
        data[len(data) // 2] ^= 0x01
    elif where == "truncated":
        data = data[: len(data) - 9]
    else:
        data = bytearray()
    with open(path, "wb") as f:
        f.write(data)


def test_a_sidecar_an_earlier_petastream_left_beside_the_index_is_read(tmp_path):
    path = str(tmp_path / "ds")
    write_mds(_data(), path, size_limit=20_000)
    with open(os.path.join(path, INDEX_SIDECAR), "wb") as f:
        f.write(_legacy_sidecar(path))
    ds = petastream.open(path, cache_dir=str(tmp_path / "c"))
    assert ds.index_origin == "dataset" and ds.index_from_sidecar
    assert list(ds.shards) == _json_shards(path)
    assert ds.fingerprint == index_fingerprint(_index_bytes(path))
    assert not os.path.exists(os.path.join(tmp_path, "c", "indexes", "v1", "data"))  # nothing built
    # Our writer, writing the dataset again, leaves no sidecar (the old one would be stale).
    write_mds(_data(100), path, size_limit=20_000, exist_ok=True)
    assert INDEX_SIDECAR not in os.listdir(path)


@pytest.mark.parametrize("where", ["magic", "digest", "payload", "truncated", "empty"])
def test_a_damaged_sidecar_beside_the_index_is_ignored(tmp_path, where):
    path = str(tmp_path / "ds")
    write_mds(_data(), path, size_limit=20_000)
    side = os.path.join(path, INDEX_SIDECAR)
    with open(side, "wb") as f:
        f.write(_legacy_sidecar(path))
    _damage(side, where)
    ds = petastream.open(path, cache_dir=str(tmp_path / "c"))
    assert ds.index_origin == "built"
    assert list(ds.shards) == _json_shards(path)


def test_an_intact_sidecar_of_another_index_is_not_trusted(tmp_path):
    """A well-formed sidecar whose shards differ (one sample count changed) but which names
    other index bytes: the index.json digest, not the sidecar's own integrity, decides."""
    path = str(tmp_path / "ds")
    write_mds(_data(), path, size_limit=20_000)
    shards = _json_shards(path)
    forged = [dict(s) for s in shards]
    forged[0]["samples"] += 1
    with open(os.path.join(path, INDEX_SIDECAR), "wb") as f:
        f.write(_legacy_sidecar(path, forged, _index_bytes(path) + b" "))
    ds = petastream.open(path, cache_dir=str(tmp_path / "c"))
    assert ds.index_origin == "built" and ds.shards[0]["samples"] == shards[0]["samples"]


def test_a_cache_that_cannot_keep_the_sidecar_parses_in_memory(tmp_path, caplog):
    path = str(tmp_path / "ds")
    write_mds(_data(), path, size_limit=20_000, compression=None)  # shards read in place
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    with caplog.at_level(logging.WARNING, logger="petastream.mds.index_open"):
        ds = petastream.open(path, cache_dir=str(blocked / "cache"))
    assert ds.index_origin == "parsed" and "unusable" in caplog.text
    assert list(ds.shards) == _json_shards(path)
    np.testing.assert_array_equal(ds.read(np.arange(len(ds)))["id"], np.arange(3000))


def test_shards_with_other_columns_are_still_rejected(tmp_path):
    root = tmp_path / "mixed-columns"
    write_mds({"id": np.arange(10, dtype=np.int64)}, str(root / "0"))
    write_mds({"id": np.arange(10, dtype=np.int64), "x": np.zeros(10, np.float32)}, str(root / "1"))
    merge_index(str(root))
    for _ in ("built", "cache"):
        with pytest.raises(FormatError, match="shard 1 has columns .*must share their columns"):
            petastream.open(str(root), cache_dir=str(tmp_path / "c"))


def test_shard_table_keeps_extra_and_unusual_fields():
    base = {"column_encodings": ["int64"], "column_names": ["id"], "column_sizes": [8],
            "compression": None, "format": "mds", "hashes": [], "size_limit": None, "version": 2,
            "zip_data": None}
    shards = [
        {**base, "samples": 3, "raw_data": {"basename": "a.mds", "bytes": 40, "hashes": {}}},
        {**base, "samples": 0, "raw_data": {"basename": "b.mds", "bytes": 4, "hashes": {"md5": "x"}},
         "extra": {"k": [1, 2]}},
        {**base, "compression": "zstd", "samples": 5, "hashes": ["md5"],
         "raw_data": {"basename": "c.mds", "bytes": 60, "hashes": {"md5": "y"}},
         "zip_data": {"basename": "c.mds.zstd", "bytes": 20, "hashes": {"md5": "z"}}},
    ]
    table = ShardTable.from_shards(shards)
    assert list(table) == shards and table[2] == shards[2]
    assert list(table.compressed()) == [False, False, True]
    assert list(table.records("md5")) == [False, True, True]
    table[1]["extra"]["k"].append(3)  # a caller mutating its dict does not change the table
    assert ShardTable.from_shards(shards)[1]["extra"] == {"k": [1, 2]}
    with pytest.raises(IndexError):
        table[3]


_OPENER = """
import sys, time, os
import petastream
url, cache, ready, go = sys.argv[1:5]
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.005)
ds = petastream.open(url, cache_dir=cache)
# Converting a Python value to Arrow imports pandas (0.5 s and more): the open does not.
print(ds.num_shards, ds.index_origin, "pandas" if "pandas" in sys.modules else "")
"""


def _open_at_once(url: str, cache: str, tmp_path, env: dict[str, str], n: int = 3) -> list[str]:
    """``n`` processes opening ``url`` at once (released together once all have imported);
    their ``"<shards> <origin>"`` lines."""
    go = tmp_path / "go"
    readies = [tmp_path / f"ready-{i}" for i in range(n)]
    procs = [subprocess.Popen([sys.executable, "-c", _OPENER, url, cache, str(ready), str(go)],
                              env={**os.environ, **env, **CHILD_ENV}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for ready in readies]
    try:
        while not all(r.exists() for r in readies) and all(p.poll() is None for p in procs):
            time.sleep(0.01)
        go.touch()
        outs = [p.communicate(timeout=240) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    go.unlink()
    for r in readies:
        r.unlink()
    assert not any("pandas" in o[0] for o in outs), outs
    return sorted(o[0].strip() for o in outs)


@pytest.mark.timeout(300)
def test_processes_opening_at_once_build_the_sidecar_once(tmp_path):
    path = str(tmp_path / "ds")
    write_mds(_data(), path, size_limit=20_000)
    n = len(_json_shards(path))
    cache = str(tmp_path / "c")
    # Whichever process takes the key's fill lock first builds; the others wait and map it.
    assert _open_at_once(path, cache, tmp_path, {}) == [f"{n} built", f"{n} cache", f"{n} cache"]
    assert _open_at_once(path, cache, tmp_path, {}, n=2) == [f"{n} cache"] * 2


@pytest.mark.cloud
@pytest.mark.timeout(300)
def test_remote_index_is_fetched_and_parsed_once_per_node_and_again_when_rewritten(recorded_bucket, tmp_path):
    url, server, env = recorded_bucket
    write_mds(_data(), f"{url}/ds", size_limit=20_000)
    n = len(petastream.open(f"{url}/ds", cache_dir=str(tmp_path / "elsewhere")).shards)
    server.reset()
    cache = str(tmp_path / "c")
    assert _open_at_once(f"{url}/ds", cache, tmp_path, env) == [f"{n} built", f"{n} cache", f"{n} cache"]
    gets = [path for method, path in server.requests() if method == "GET"]
    assert sum(p.endswith("/ds/index.json") for p in gets) == 1, gets
    assert not any(INDEX_SIDECAR in p for p in gets), gets  # our writer left none
    # A rewrite (fewer rows) is a new object: fetched and parsed again, not shadowed.
    write_mds(_data(1000), f"{url}/ds", size_limit=20_000, exist_ok=True)
    for origin in ("built", "cache"):
        ds = petastream.open(f"{url}/ds", cache_dir=cache)
        assert len(ds) == 1000 and ds.index_origin == origin
        np.testing.assert_array_equal(ds.read(np.arange(1000))["id"], np.arange(1000))
    # Forgetting the dataset removes its index's entries (the parsed copy, index.json's copy).
    indexes = os.path.join(cache, "indexes", "v1", "data")
    assert set(ds.index_keys) <= set(os.listdir(indexes)) and len(ds.index_keys) == 2
    forget_dataset(f"{url}/ds", cache_dir=cache)
    assert not set(ds.index_keys) & set(os.listdir(indexes))
