"""The shard cache: single flight across threads and processes, atomic fills that survive
kill -9, keys that cannot go stale, checking as filled, bounded size, read-ahead."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import petastream
from petastream.errors import CacheFullError, CorruptShardError
from petastream.mds.sources import ShardSources
from petastream.mds.writer import write_mds
from petastream.storage.cache import ShardCache

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHILD_ENV = {"PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "src"), ROOT])}
N = 4000


def _data(n=N, seed=0):
    rng = np.random.default_rng(seed)
    return {"id": np.arange(n, dtype=np.int64), "vec": rng.random((n, 16)).astype(np.float32),
            "s": np.array([f"row-{i}" for i in range(n)], dtype=object)}


def _write(url, *, compression="zstd", hashes=("xxh3_64",), size_limit=20_000, seed=0, n=N):
    write_mds(_data(n, seed), url, compression=compression, hashes=list(hashes), size_limit=size_limit,
              exist_ok=True)
    return url


def _epoch(ds, *, prefetch=True):
    """Read every shard in order (read-ahead on), checking every value; return the ids."""
    ids = []
    for s in range(ds.num_shards):
        if prefetch:
            ds.prefetch(range(s, min(s + 4, ds.num_shards)))
        cols = ds.read_shard(s)
        ids.append(cols["id"].copy())
        assert list(cols["s"][:2]) == [f"row-{i}" for i in cols["id"][:2]]
    return np.concatenate(ids)


@pytest.fixture
def counting(monkeypatch):
    """Counts ShardSources.fill calls (fetch + check + decompress) per shard, and threads."""
    calls: list[tuple[int, str]] = []
    orig = ShardSources.fill

    def fill(self, i, out):
        calls.append((i, threading.current_thread().name))
        return orig(self, i, out)

    monkeypatch.setattr(ShardSources, "fill", fill)
    return calls


# -- single flight -------------------------------------------------------------------------


def test_threads_fill_each_shard_once(tmp_path, counting):
    url = _write(str(tmp_path / "ds"))
    ds = petastream.open(url, cache_dir=str(tmp_path / "c"), prefetch_depth=0)
    barrier = threading.Barrier(8)
    errors = []

    def read():
        try:
            barrier.wait()
            for s in range(ds.num_shards):
                assert len(ds.read_shard(s)["id"]) == ds.shard_sizes[s]
        except BaseException as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert sorted(i for i, _ in counting) == list(range(ds.num_shards))


def test_two_datasets_of_one_process_share_the_fill(tmp_path, counting):
    url = _write(str(tmp_path / "ds"))
    a = petastream.open(url, cache_dir=str(tmp_path / "c"))
    b = petastream.open(url, cache_dir=str(tmp_path / "c"))
    _epoch(a)
    _epoch(b)
    assert sorted(i for i, _ in counting) == list(range(a.num_shards))


_READER = """
import os, sys, time
import numpy as np
import petastream
url, cache, go = sys.argv[1:4]
while not os.path.exists(go):
    time.sleep(0.005)
ds = petastream.open(url, cache_dir=cache)
order = np.random.default_rng(int(sys.argv[4])).permutation(ds.num_shards)
total = 0
for s in order:
    ds.prefetch([int(x) for x in order])
    total += int(ds.read_shard(int(s))["id"].sum())
print(total)
"""


@pytest.mark.cloud
@pytest.mark.timeout(180)
def test_four_processes_fetch_each_shard_once_from_s3(recorded_bucket, tmp_path):
    url, server, env = recorded_bucket
    _write(f"{url}/ds", size_limit=20_000)
    n_shards = petastream.open(f"{url}/ds", cache_dir=str(tmp_path / "probe")).num_shards
    assert n_shards >= 8
    server.reset()
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", _READER, f"{url}/ds", str(tmp_path / "c"), str(go), str(r)],
                              env={**env, **CHILD_ENV}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(4)]
    time.sleep(2)  # let all four import and wait at the line
    go.touch()
    outs = [p.communicate(timeout=150) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    assert {int(o[0]) for o in outs} == {N * (N - 1) // 2}
    gets = server.shard_gets()
    assert len(gets) == n_shards, gets  # every shard fetched ...
    assert set(gets.values()) == {1}, gets  # ... once, for four processes


# -- atomic fills, crashes -----------------------------------------------------------------

_KILLED = """
import sys, time
import petastream
from petastream.storage.location import Location
orig = Location.read_bytes
def slow(self, name):
    if "shard." in name:
        print("downloading", flush=True)
        time.sleep(120)  # killed here, mid-download
    return orig(self, name)
Location.read_bytes = slow
ds = petastream.open(sys.argv[1], cache_dir=sys.argv[2])
ds.read_shard(0)
"""


@pytest.mark.timeout(120)
def test_kill_9_mid_download_leaves_nothing_that_reads_as_complete(tmp_path):
    url = _write(str(tmp_path / "ds"))
    cache_dir = str(tmp_path / "c")
    child = subprocess.Popen([sys.executable, "-c", _KILLED, url, cache_dir], env={**os.environ, **CHILD_ENV},
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "downloading"  # it holds the fill lock and a reservation
    os.kill(child.pid, signal.SIGKILL)
    child.wait(10)
    cache = ShardCache.at(cache_dir)
    usage = cache.usage()
    assert usage.entries == 0 and usage.temporary == 1  # only a temporary file: never an entry
    assert cache.prune() == (1, usage.temporary_bytes)  # `petastream cache prune` removes it
    child = subprocess.Popen([sys.executable, "-c", _KILLED, url, cache_dir], env={**os.environ, **CHILD_ENV},
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "downloading"
    os.kill(child.pid, signal.SIGKILL)
    child.wait(10)
    # The next run is neither blocked (the dead process's lock died with it) nor fooled, and its
    # first fill sweeps the leftover away.
    ds = petastream.open(url, cache_dir=cache_dir)
    assert list(ds.read_shard(0)["id"][:3]) == [0, 1, 2]
    assert cache.usage().temporary == 0 and cache.usage().entries == 1


def test_failed_fill_leaves_no_file(tmp_path, monkeypatch):
    url = _write(str(tmp_path / "ds"))
    ds = petastream.open(url, cache_dir=str(tmp_path / "c"))

    def boom(self, i, out):
        out.write(b"partial")
        raise OSError("network down")

    monkeypatch.setattr(ShardSources, "fill", boom)
    with pytest.raises(OSError, match="network down"):
        ds.read_shard(0)
    assert ds.cache.usage().files == []


# -- integrity: checked as filled, keys that cannot go stale --------------------------------


def _flip(path, at):
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def test_corrupt_compressed_shard_is_named_and_never_cached(tmp_path):
    url = _write(str(tmp_path / "ds"))
    victim = tmp_path / "ds" / "shard.00002.mds.zstd"
    good = victim.read_bytes()
    _flip(victim, len(good) // 2)
    ds = petastream.open(url, cache_dir=str(tmp_path / "c"))
    with pytest.raises(CorruptShardError, match=r"ds/shard\.00002\.mds\.zstd: xxh3_64 is [0-9a-f]+, index.json says"):
        ds.read_shard(2)
    assert ds.cache.usage().entries == 0
    victim.write_bytes(good)  # repaired: read at once, nothing stale in the way
    assert list(ds.read_shard(2)["id"][:1]) == [int(ds.shard_offsets[2])]


def test_repaired_source_without_hashes_is_not_shadowed(tmp_path):
    """Issue #16.3: a damaged compressed shard that still decompresses is served (no hash can
    tell), but once the source is repaired the old copy no longer matches its key."""
    url = _write(str(tmp_path / "ds"), hashes=(), compression="zstd:1")
    victim = tmp_path / "ds" / "shard.00001.mds.zstd"
    good = victim.read_bytes()
    import zstandard

    # Damage the raw bytes and recompress: same shard structure, wrong values.
    raw = bytearray(zstandard.ZstdDecompressor().decompress(good))
    raw[-40] ^= 0x7F
    bad = zstandard.ZstdCompressor(level=1, write_content_size=True).compress(bytes(raw))
    assert len(bad) == len(good)
    victim.write_bytes(bad)
    expected = petastream.open(url, cache_dir=str(tmp_path / "probe"), validate_hash=None)
    served_bad = expected.read_shard(1)["vec"].copy()
    time.sleep(0.05)  # a repair comes later than the damage; mtime granularity is a few ms
    victim.write_bytes(good)
    again = petastream.open(url, cache_dir=str(tmp_path / "probe"))
    fixed = again.read_shard(1)["vec"]
    assert not np.array_equal(served_bad, fixed)
    np.testing.assert_array_equal(fixed, _data()["vec"][again.shard_offsets[1]:again.shard_offsets[2]])


@pytest.mark.cloud
def test_rewritten_dataset_with_identical_index_is_not_served_stale(recorded_bucket, tmp_path):
    """Issue #16.4: same sizes, no hashes, identical index.json: the ETag tells."""
    url, _, _ = recorded_bucket
    _write(f"{url}/ds", compression=None, hashes=(), seed=1)
    first = petastream.open(f"{url}/ds", cache_dir=str(tmp_path / "c"))
    before = first.read_shard(0)["vec"].copy()
    index = first.location.read_bytes("index.json")
    _write(f"{url}/ds", compression=None, hashes=(), seed=2)
    second = petastream.open(f"{url}/ds", cache_dir=str(tmp_path / "c"))
    assert second.location.read_bytes("index.json") == index
    after = second.read_shard(0)["vec"]
    np.testing.assert_array_equal(after, _data(seed=2)["vec"][: len(after)])
    assert not np.array_equal(before, after)


def test_in_place_shards_are_hash_checked_when_first_mapped(tmp_path):
    url = _write(str(tmp_path / "ds"), compression=None)
    _flip(tmp_path / "ds" / "shard.00003.mds", -20)
    ds = petastream.open(url, cache_dir=str(tmp_path / "c"))
    with pytest.raises(CorruptShardError, match=r"shard\.00003\.mds: xxh3_64 is"):
        ds.read_shard(3)
    assert ds.read_shard(2)["id"][0] == ds.shard_offsets[2]
    assert ds.cache.usage().entries == 0  # a local uncompressed dataset is never copied


def test_damaged_string_names_file_shard_and_column(tmp_path):
    """Issue #16.7: bad UTF-8 (no hash to catch it first)."""
    url = _write(str(tmp_path / "ds"), compression=None, hashes=())
    ds = petastream.open(url)
    shard = ds.shard(1)
    at = int(shard.offsets[5]) + 4 + 8  # sample 5: [size of s][id][s...]: first byte of 's'
    path = tmp_path / "ds" / "shard.00001.mds"
    data = bytearray(path.read_bytes())
    data[at] = 0xFF
    path.write_bytes(bytes(data))
    ds = petastream.open(url)
    pattern = r"shard 1 .*ds/shard\.00001\.mds: column 's', sample 5 of the shard cannot be decoded"
    with pytest.raises(CorruptShardError, match=pattern):
        ds.read_shard(1)
    with pytest.raises(CorruptShardError, match=pattern):
        ds[int(ds.shard_offsets[1]) + 5]


# -- bounded size ----------------------------------------------------------------------------


def test_dataset_five_times_the_limit_trains_within_it(tmp_path, monkeypatch):
    url = _write(str(tmp_path / "ds"), n=20_000, size_limit=40_000)
    ds0 = petastream.open(url)
    raw = sum(s["raw_data"]["bytes"] for s in ds0.shards)
    limit = raw // 5
    assert ds0.num_shards >= 20 and max(s["raw_data"]["bytes"] for s in ds0.shards) * 4 < limit
    peak = [0]
    orig = ShardCache._make_room

    def watched(self, need, lim):  # sizes the cache *after* every decision, under its lock
        ok = orig(self, need, lim)
        peak[0] = max(peak[0], self.usage().total_bytes + (need if ok else 0))
        return ok

    monkeypatch.setattr(ShardCache, "_make_room", watched)
    monkeypatch.setenv("PETASTREAM_CACHE_LIMIT", str(limit))  # the env var reaches the reader
    ds = petastream.open(url, cache_dir=str(tmp_path / "c"))
    assert ds.cache_limit == limit
    for _ in range(2):
        ids = _epoch(ds)
        np.testing.assert_array_equal(ids, np.arange(20_000))
        assert ds.cache.usage().total_bytes <= limit
    assert 0 < peak[0] <= limit


@pytest.mark.timeout(300)
def watch_peak(monkeypatch) -> list[int]:
    """``[bytes]``: the cache's size after each of its space decisions, at its largest."""
    peak = [0]
    orig = ShardCache._make_room

    def watched(self, need, lim):
        ok = orig(self, need, lim)
        peak[0] = max(peak[0], self.usage().total_bytes + (need if ok else 0))
        return ok

    monkeypatch.setattr(ShardCache, "_make_room", watched)
    return peak


def test_shuffled_loader_with_two_threads_under_a_tight_limit(tmp_path, monkeypatch):
    """A shuffled plan asks for every shard at once: the read-ahead window is larger than the
    cache, and eviction must still make room (the furthest-needed first), within the limit."""
    from petastream.pipeline import BatchLoader

    url = _write(str(tmp_path / "ds"), n=12_000, size_limit=60_000)
    raw = sum(s["raw_data"]["bytes"] for s in petastream.open(url).shards)
    limit = raw // 4
    monkeypatch.setattr(ShardCache, "full_timeout", 20.0)  # a regression fails fast, not in 5 min
    peak = watch_peak(monkeypatch)
    ds = petastream.open(url, cache_dir=str(tmp_path / "c"), cache_limit=limit)
    for epoch in range(2):
        ids = np.concatenate([b["id"] for b in BatchLoader(ds, 500, shuffle=True, seed=epoch, num_workers=2)])
        np.testing.assert_array_equal(np.sort(ids), np.arange(12_000))
    assert 0 < peak[0] <= limit


def test_cache_limit_strings_and_errors(tmp_path):
    url = _write(str(tmp_path / "ds"))
    assert petastream.open(url, cache_limit="50kb").cache_limit == 50_000
    assert petastream.open(url, cache_limit="1.5GiB").cache_limit == int(1.5 * 2**30)
    with pytest.raises(ValueError, match="is not a size"):
        petastream.open(url, cache_limit="lots")
    ds = petastream.open(url, cache_dir=str(tmp_path / "c"), cache_limit=100)
    with pytest.raises(CacheFullError, match="cannot fit cache_limit=100 B"):
        ds.read_shard(0)


def test_shards_being_read_are_never_evicted(tmp_path):
    url = _write(str(tmp_path / "ds"))
    ds = petastream.open(url, cache_dir=str(tmp_path / "c"), prefetch_depth=0)
    reading = ds.shard(0)  # a reader still holds shard 0's map (its arrays may be views of it)
    for s in range(1, ds.num_shards):
        ds.read_shard(s)
    ds.store.release()  # the dataset lets go of every map it keeps
    removed, _ = ds.cache.prune(0)
    assert removed == ds.num_shards - 1 and ds.cache.usage().entries == 1
    assert reading.read_columns()["id"][0] == 0
    del reading
    assert ds.cache.prune(0)[0] == 1


# -- read-ahead --------------------------------------------------------------------------------


def test_prefetch_loads_ahead_on_the_pool_and_reads_wait_for_it(tmp_path, counting):
    url = _write(str(tmp_path / "ds"))
    ds = petastream.open(url, cache_dir=str(tmp_path / "c"), prefetch_depth=4, prefetch_workers=2)
    ds.prefetch([0, 1, 1, 2, 3, 0])  # duplicates are no-ops
    for s in range(4):
        ds.read_shard(s)
    ds.prefetch([0, 1])  # open already: no-ops
    assert sorted(i for i, _ in counting) == [0, 1, 2, 3]
    assert any(t.startswith("petastream-readahead") for _, t in counting)
    with pytest.raises(IndexError, match="out of range"):
        ds.prefetch([ds.num_shards])


# -- remote-like local paths -----------------------------------------------------------------


def test_fuse_mounted_paths_are_cached_and_can_be_read_in_place(tmp_path, monkeypatch):
    from petastream.storage.location import is_remote_mount

    assert is_remote_mount("/Volumes/main/default/vol/ds") and is_remote_mount("/dbfs/tmp/ds")
    assert not is_remote_mount("/tmp/ds") and not is_remote_mount("/Volumesx/ds")
    mount = tmp_path / "Volumes"
    monkeypatch.setenv("PETASTREAM_REMOTE_MOUNTS", str(mount))  # stands in for /Volumes
    url = _write(str(mount / "cat" / "ds"), compression=None)
    ds = petastream.open(url, cache_dir=str(tmp_path / "c"), cache_limit="10mb")
    np.testing.assert_array_equal(_epoch(ds), np.arange(N))
    assert ds.cache.usage().entries == ds.num_shards  # copied to local disk, bounded
    in_place = petastream.open(url, cache_dir=str(tmp_path / "c2"), read_in_place=True)
    np.testing.assert_array_equal(_epoch(in_place), np.arange(N))
    assert in_place.cache.usage().entries == 0


# -- removal -----------------------------------------------------------------------------------


def test_forget_dataset_and_the_cache_command(tmp_path, capsys):
    from petastream.cli import main
    from petastream.mds.cache_admin import forget_dataset

    url = _write(str(tmp_path / "ds"))
    other = _write(str(tmp_path / "other"), seed=5)
    cache_dir = str(tmp_path / "c")
    for u in (url, other):
        _epoch(petastream.open(u, cache_dir=cache_dir))
    n = petastream.open(url).num_shards
    total = ShardCache.at(cache_dir).usage().entries
    indexes = ShardCache.at(os.path.join(cache_dir, "indexes"))
    assert indexes.usage().entries == 2  # each dataset's parsed index
    assert forget_dataset(url, cache_dir=cache_dir) == (n, 0)
    assert ShardCache.at(cache_dir).usage().entries == total - n
    assert indexes.usage().entries == 1
    assert main(["cache", "--dir", cache_dir, "show"]) == 0
    assert f"shards       {total - n} (" in capsys.readouterr().out
    assert main(["cache", "--dir", cache_dir, "prune", "--all"]) == 0
    assert "0 shards" in capsys.readouterr().out
    assert main(["cache", "--dir", cache_dir, "forget", url]) == 0


def test_zstd_fills_stream_frames_without_size_and_several_frames(tmp_path):
    import json

    import zstandard

    url = _write(str(tmp_path / "ds"), hashes=())
    index_path = tmp_path / "ds" / "index.json"
    index = json.loads(index_path.read_text())
    for i, meta in enumerate(index["shards"][:2]):
        path = tmp_path / "ds" / meta["zip_data"]["basename"]
        raw = zstandard.ZstdDecompressor().decompress(path.read_bytes())
        if i == 0:  # two frames
            packed = b"".join(zstandard.ZstdCompressor().compress(part) for part in (raw[:999], raw[999:]))
        else:  # one frame without its content size
            cobj = zstandard.ZstdCompressor(write_content_size=False).compressobj()
            packed = cobj.compress(raw) + cobj.flush()
        path.write_bytes(packed)
        meta["zip_data"]["bytes"] = len(packed)
    index_path.write_text(json.dumps(index))
    ds = petastream.open(url, cache_dir=str(tmp_path / "c"))
    np.testing.assert_array_equal(_epoch(ds), np.arange(N))


# -- Azure Blob Storage (Azurite) --------------------------------------------------------------


@pytest.mark.cloud
@pytest.mark.timeout(120)
@pytest.mark.parametrize("hashes", [("xxh3_64",), ()])
def test_azure_blob_round_trip_through_the_cache(abfs_container, tmp_path, monkeypatch, hashes):
    import pickle

    from petastream.storage.location import Location

    container, options = abfs_container
    url = f"{container}/datasets/one"
    write_mds(_data(), url, compression="zstd", hashes=list(hashes), size_limit=20_000,
              storage_options=options)
    ds = petastream.open(url, storage_options=options, cache_dir=str(tmp_path / "c"))
    np.testing.assert_array_equal(_epoch(ds), np.arange(N))
    assert ds.cache.usage().entries == ds.num_shards
    reads = []
    orig = Location.read_bytes
    monkeypatch.setattr(Location, "read_bytes", lambda self, name: reads.append(name) or orig(self, name))
    again = pickle.loads(pickle.dumps(ds))  # reopens (index.json) and reads every shard from the cache
    np.testing.assert_array_equal(_epoch(again), np.arange(N))
    assert [r for r in reads if "shard." in r] == []
