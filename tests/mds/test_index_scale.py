"""Opening big indexes: the columnar ShardTable, the petastream.index.arrow sidecar beside
index.json (trusted only for the exact index bytes it names), and a remote index fetched
once per node through the cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import petastream
from petastream.errors import FormatError
from petastream.mds.index import merge_index, parse_index
from petastream.mds.index_sidecar import INDEX_SIDECAR, MAGIC, dump_index_sidecar, index_fingerprint
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


def _json_shards(path: str) -> list[dict]:
    with open(os.path.join(path, "index.json"), "rb") as f:
        return parse_index(f.read())


def test_sidecar_round_trip_rebuilds_every_shard_as_index_json_has_it(tmp_path):
    path = _mixed(str(tmp_path / "ds"))
    assert os.path.exists(os.path.join(path, INDEX_SIDECAR))
    want = _json_shards(path)
    assert {s["compression"] for s in want} == {"zstd:1", None}  # both kinds are covered
    ds = petastream.open(path)
    assert ds.index_from_sidecar
    assert len(ds.shards) == len(want) and list(ds.shards) == want
    assert [ds.shards[i] for i in range(len(want))] == want  # the lazily built (cached) ones
    assert ds.shards[-1] == want[-1] and ds.shards[1:3] == want[1:3]
    with open(os.path.join(path, "index.json"), "rb") as f:
        assert ds.fingerprint == index_fingerprint(f.read())
    np.testing.assert_array_equal(ds.shard_sizes, [s["samples"] for s in want])
    assert ds.stored_bytes == sum(s["raw_data"]["bytes"] for s in want)
    np.testing.assert_array_equal(ds.read(np.arange(len(ds)))["id"], np.arange(200))
    os.remove(os.path.join(path, INDEX_SIDECAR))
    json_ds = petastream.open(path, cache_dir=str(tmp_path / "c2"))
    assert not json_ds.index_from_sidecar and json_ds.fingerprint == ds.fingerprint
    assert list(json_ds.shards) == want


def test_merged_index_gets_a_sidecar_with_sub_directory_basenames(tmp_path):
    root = tmp_path / "merged"
    for sub in ("0", "1"):
        write_mds(_data(500), str(root / sub), size_limit=4000)
    merge_index(str(root))
    ds = petastream.open(str(root))
    assert ds.index_from_sidecar
    assert list(ds.shards) == _json_shards(str(root))
    assert ds.shards[0]["raw_data"]["basename"].startswith("0/")
    assert len(ds) == 1000 and int(ds.read(np.arange(1000))["id"].sum()) == 2 * sum(range(500))


def test_missing_or_stale_sidecar_falls_back_to_the_json(tmp_path):
    path = str(tmp_path / "ds")
    write_mds(_data(), path, size_limit=20_000)
    index = os.path.join(path, "index.json")
    # Stale: index.json rewritten (here: one shard's sample count and the formatting) after
    # the sidecar; the sidecar still decodes, but names other bytes.
    doc = json.loads(open(index, "rb").read())
    doc["shards"] = doc["shards"][:-1]
    with open(index, "w") as f:
        json.dump(doc, f, indent=1)
    ds = petastream.open(path)
    assert not ds.index_from_sidecar
    assert list(ds.shards) == doc["shards"] and ds.num_shards == len(doc["shards"])
    os.remove(os.path.join(path, INDEX_SIDECAR))
    ds = petastream.open(path)
    assert not ds.index_from_sidecar and list(ds.shards) == doc["shards"]


@pytest.mark.parametrize("where", ["magic", "digest", "payload", "truncated", "empty"])
def test_a_damaged_sidecar_is_never_trusted(tmp_path, where):
    path = str(tmp_path / "ds")
    write_mds(_data(), path, size_limit=20_000)
    side = os.path.join(path, INDEX_SIDECAR)
    data = bytearray(open(side, "rb").read())
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
    with open(side, "wb") as f:
        f.write(data)
    ds = petastream.open(path)
    assert not ds.index_from_sidecar
    assert list(ds.shards) == _json_shards(path)


def test_an_intact_sidecar_of_another_index_is_not_trusted(tmp_path):
    """A well-formed sidecar whose shards differ (one sample count changed) but which names
    other index bytes: the index.json digest, not the sidecar's own integrity, decides."""
    path = str(tmp_path / "ds")
    write_mds(_data(), path, size_limit=20_000)
    shards = _json_shards(path)
    forged = [dict(s) for s in shards]
    forged[0]["samples"] += 1
    index = open(os.path.join(path, "index.json"), "rb").read()
    with open(os.path.join(path, INDEX_SIDECAR), "wb") as f:
        f.write(dump_index_sidecar(forged, index + b" "))
    ds = petastream.open(path)
    assert not ds.index_from_sidecar and ds.shards[0]["samples"] == shards[0]["samples"]


def test_shards_with_other_columns_are_still_rejected(tmp_path):
    root = tmp_path / "mixed-columns"
    write_mds({"id": np.arange(10, dtype=np.int64)}, str(root / "0"))
    write_mds({"id": np.arange(10, dtype=np.int64), "x": np.zeros(10, np.float32)}, str(root / "1"))
    merge_index(str(root))
    assert os.path.exists(root / INDEX_SIDECAR)
    with pytest.raises(FormatError, match="shard 1 has columns .*must share their columns"):
        petastream.open(str(root))
    os.remove(root / INDEX_SIDECAR)
    with pytest.raises(FormatError, match="shard 1 has columns .*must share their columns"):
        petastream.open(str(root))


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
url, cache, go = sys.argv[1:4]
while not os.path.exists(go):
    time.sleep(0.005)
ds = petastream.open(url, cache_dir=cache)
print(ds.num_shards, int(ds.index_from_sidecar))
"""


@pytest.mark.cloud
@pytest.mark.timeout(300)
def test_remote_index_is_fetched_once_per_node_and_again_when_rewritten(recorded_bucket, tmp_path):
    url, server, env = recorded_bucket
    write_mds(_data(), f"{url}/ds", size_limit=20_000)
    server.reset()
    go = tmp_path / "go"
    cache = str(tmp_path / "c")
    procs = [subprocess.Popen([sys.executable, "-c", _OPENER, f"{url}/ds", cache, str(go)],
                              env={**env, **CHILD_ENV}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(3)]
    time.sleep(2)  # let all three import and wait at the line
    go.touch()
    outs = [p.communicate(timeout=200) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    first = {o[0].strip() for o in outs}
    assert len(first) == 1 and first.pop().endswith(" 1")  # all from the sidecar
    gets = [path for method, path in server.requests() if method == "GET"]
    assert sum(p.endswith("/ds/index.json") for p in gets) == 1, gets
    assert sum(p.endswith(f"/ds/{INDEX_SIDECAR}") for p in gets) == 1, gets
    # A rewrite (fewer rows) is a new object: fetched again, not shadowed by the cached copy.
    write_mds(_data(1000), f"{url}/ds", size_limit=20_000, exist_ok=True)
    ds = petastream.open(f"{url}/ds", cache_dir=cache)
    assert len(ds) == 1000 and ds.index_from_sidecar
    np.testing.assert_array_equal(ds.read(np.arange(1000))["id"], np.arange(1000))
