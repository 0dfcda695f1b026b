"""``loader.stats()`` against known work: rows, batches, GETs and bytes counted on the S3 server
itself (moto's request recorder), cache hits and misses, worker reports from processes. No
timing is asserted (a loaded CI machine): only that the times are there."""

from __future__ import annotations

import json
import logging

import fsspec
import numpy as np
import pytest

import petastream
from petastream.pipeline import BatchLoader
from tests.mds.test_cache import _write

pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
N_ROWS = 3000


def _stored_bytes(url: str) -> int:
    """Bytes of the shard files as stored (what a GET of each returns)."""
    with fsspec.open(f"{url}/index.json") as f:
        shards = json.load(f)["shards"]
    return sum((s["zip_data"] or s["raw_data"])["bytes"] for s in shards)


def _object_gets(server) -> int:
    """GETs of objects (not bucket listings) since the server's last reset."""
    return sum(1 for method, path in server.requests() if method == "GET" and path.count("/") >= 2)


@pytest.mark.cloud
@pytest.mark.timeout(300)
@pytest.mark.parametrize("worker_type", ["thread", "process"])
def test_stats_count_the_gets_bytes_and_cache_lookups_of_two_epochs(recorded_bucket, tmp_path, worker_type):
    from petastream.torch import TorchLoader

    url, server, _ = recorded_bucket
    _write(f"{url}/ds", n=N_ROWS, size_limit=40_000)
    ds = petastream.open(f"{url}/ds", cache_dir=str(tmp_path / "cache"))
    server.reset()  # (after the open: its index reads are not the loader's)
    loader = TorchLoader(ds, 128, shuffle=True, seed=1, num_workers=2, worker_type=worker_type)
    ids = np.concatenate([b["id"].numpy() for b in loader])
    assert np.array_equal(np.sort(ids), np.arange(N_ROWS))
    first = loader.stats()
    shard_gets = sum(server.shard_gets().values())
    assert shard_gets == ds.num_shards == _object_gets(server)  # each shard once, nothing else
    assert first["gets"] == shard_gets
    assert first["bytes_fetched"] == _stored_bytes(f"{url}/ds")
    # Misses: the fills (downloads); the other worker process's lookups of a shard it filled are hits.
    assert first["cache_misses"] == ds.num_shards
    assert first["cache_hits"] == (0 if worker_type == "thread" else first["cache_hits"])
    assert first["rows"] == N_ROWS and first["batches"] == -(-N_ROWS // 128) == len(loader)
    assert first["skipped"] == 0
    assert set(first["decode_s"]) == {0, 1} and all(t >= 0 for t in first["decode_s"].values())
    for key in ("seconds", "rows_per_s", "waited_for_data_s", "waited_for_consumer_s"):
        assert first[key] >= 0

    for _ in loader:  # the second epoch reads the node's cache: no GET, every lookup a hit
        pass
    second = loader.stats()
    assert sum(server.shard_gets().values()) == shard_gets
    assert second["gets"] == first["gets"] and second["bytes_fetched"] == first["bytes_fetched"]
    assert second["cache_misses"] == ds.num_shards
    assert second["cache_hits"] - first["cache_hits"] >= ds.num_shards  # each shard, by each process that reads it
    assert second["rows"] == 2 * N_ROWS and second["batches"] == 2 * first["batches"]


def test_rows_and_batches_of_short_batches_and_a_resume(tmp_path):
    url = _write(str(tmp_path / "ds"), n=1000, size_limit=20_000)
    loader = BatchLoader(url, 64, shuffle=True, num_workers=3)
    it = iter(loader)
    for _ in range(5):
        next(it)
    assert loader.stats()["rows"] == 5 * 64 and loader.stats()["batches"] == 5
    state = loader.state_dict()
    resumed = BatchLoader(url, 64, shuffle=True, num_workers=2)
    resumed.load_state_dict(state)
    rows = sum(len(b["id"]) for b in resumed)
    assert rows == 1000 - 5 * 64 == resumed.stats()["rows"]
    assert resumed.stats()["batches"] == -(-1000 // 64) - 5
    local = resumed.stats()
    assert local["gets"] == 0 and local["bytes_fetched"] == 0  # local files: nothing fetched


def test_periodic_lines_and_an_epoch_summary(tmp_path, caplog):
    url = _write(str(tmp_path / "ds"), n=500, size_limit=20_000)
    loader = BatchLoader(url, 100, num_epochs=2, log_every=1e-9, log_summary=True)
    with caplog.at_level(logging.INFO, logger="petastream.pipeline"):
        list(loader)
    lines = [r.getMessage() for r in caplog.records]
    assert sum(m.startswith("loader: ") for m in lines) == 10  # each batch: log_every has passed
    summaries = [m for m in lines if m.startswith("epoch ")]
    assert len(summaries) == 2
    assert summaries[0].startswith("epoch 0: 500 rows in 5 batches") and "0 skipped" in summaries[0]
    assert summaries[1].startswith("epoch 1: 1000 rows in 10 batches")
    assert loader.stats_line().startswith("1000 rows in 10 batches")


def test_log_every_is_checked(tmp_path):
    from petastream.errors import InvalidArgumentError

    url = _write(str(tmp_path / "ds"), n=100)
    with pytest.raises(InvalidArgumentError, match="log_every must be a number of seconds > 0 or None, got 0"):
        BatchLoader(url, 10, log_every=0)


@pytest.mark.parametrize("world_size,drop_last", [(1, False), (1, True), (2, False), (3, True)])
def test_rows_are_the_rows_handed_out(tmp_path, world_size, drop_last):
    url = _write(str(tmp_path / "ds"), n=1000, size_limit=20_000)
    loader = BatchLoader(url, 64, shuffle=True, rank=world_size - 1, world_size=world_size, drop_last=drop_last)
    rows = sum(len(b["id"]) for b in loader)
    assert loader.stats()["rows"] == rows and loader.stats()["batches"] == len(loader)
