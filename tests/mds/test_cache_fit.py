"""Shuffled loaders under a cache_limit smaller than the dataset: the window fitted to the
cache fetches each shard about once per epoch (GETs counted on the S3 server), stays within
the limit, resumes into the same order, and a limit too small for any shuffle is refused."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import petastream
from petastream.errors import InvalidArgumentError
from petastream.pipeline import BatchLoader
from tests.mds.test_cache import _write, watch_peak

N_ROWS = 6000


def _epochs(ds, epochs, **kwargs):
    loader = BatchLoader(ds, 100, shuffle=True, seed=3, num_workers=2, num_epochs=epochs, **kwargs)
    ids = np.concatenate([b["id"] for b in loader])
    return loader, ids


@pytest.mark.cloud
@pytest.mark.timeout(300)
def test_a_quarter_sized_cache_fetches_each_shard_about_once_per_epoch(recorded_bucket, tmp_path, monkeypatch):
    url, server, _ = recorded_bucket
    _write(f"{url}/ds", n=N_ROWS, size_limit=40_000)
    probe = petastream.open(f"{url}/ds")
    shards, raw = probe.num_shards, int(probe.cached_shard_bytes().sum())
    limit = raw // 3
    assert shards >= 10 and limit >= 4 * max(probe.cached_shard_bytes())
    peak = watch_peak(monkeypatch)
    # Chunks of ~700 rows, as large rows would have (a chunk is capped by its decoded bytes): a
    # shuffled epoch is then many chunks, each touching most shards.
    monkeypatch.setattr("petastream.stream.budget.MAX_CHUNK_BYTES", 64_000)
    server.reset()
    ds = petastream.open(f"{url}/ds", cache_dir=str(tmp_path / "fit"), cache_limit=limit)
    loader, ids = _epochs(ds, 2)
    assert loader.cache_fit is not None and loader.planner.window < N_ROWS
    for epoch in ids.reshape(2, N_ROWS):
        np.testing.assert_array_equal(np.sort(epoch), np.arange(N_ROWS))
    gets = server.shard_gets()
    assert len(gets) == shards and sum(gets.values()) <= 1.2 * 2 * shards, gets
    assert 0 < peak[0] <= limit
    # The same limit with the default window (passed explicitly: no fit) re-downloads.
    server.reset()
    ds = petastream.open(f"{url}/ds", cache_dir=str(tmp_path / "default"), cache_limit=limit)
    _epochs(ds, 1, window=1 << 18)
    assert sum(server.shard_gets().values()) > 1.5 * shards


def test_a_state_resumes_with_the_window_its_run_chose(tmp_path):
    url = _write(str(tmp_path / "ds"), n=N_ROWS, size_limit=40_000)
    raw = int(petastream.open(url).cached_shard_bytes().sum())
    limited = petastream.open(url, cache_dir=str(tmp_path / "c1"), cache_limit=raw // 3)
    whole = BatchLoader(limited, 100, shuffle=True, seed=9, num_workers=2)
    assert whole.cache_fit is not None
    expected = np.concatenate([b["id"] for b in whole])
    first = BatchLoader(limited, 100, shuffle=True, seed=9, num_workers=2)
    it = iter(first)
    head = np.concatenate([next(it)["id"] for _ in range(17)])
    state = first.state_dict()
    assert state["window"] == whole.cache_fit.window
    # Resumed on a machine without a limit (its own choice would be the default window).
    unlimited = petastream.open(url, cache_dir=str(tmp_path / "c2"))
    resumed = BatchLoader(unlimited, 100, shuffle=True, seed=9, num_workers=2)
    assert resumed.cache_fit is None
    resumed.load_state_dict(state)
    rest = np.concatenate([b["id"] for b in resumed])
    np.testing.assert_array_equal(np.concatenate([head, rest]), expected)


def test_a_limit_too_small_to_shuffle_names_the_minimum(tmp_path):
    url = _write(str(tmp_path / "ds"), n=N_ROWS, size_limit=40_000)
    biggest = int(petastream.open(url).cached_shard_bytes().max())
    ds = petastream.open(url, cache_dir=str(tmp_path / "c"), cache_limit=2 * biggest)
    with pytest.raises(InvalidArgumentError, match=r"cache_limit=.* is too small to shuffle this dataset: "
                                                   r"its largest shard is .* at least 3"):
        BatchLoader(ds, 100, shuffle=True)
    # Asked for explicitly (or in order), the read goes on, downloading more than once.
    ids = np.concatenate([b["id"] for b in BatchLoader(ds, 100, shuffle=True, window=500, block_size=500)])
    np.testing.assert_array_equal(np.sort(ids), np.arange(N_ROWS))
    assert BatchLoader(ds, 100).cache_fit is None


def _resumed(ds, state, **kwargs):
    loader = BatchLoader(ds, 100, shuffle=True, seed=3, num_workers=2, **kwargs)
    loader.load_state_dict(state)
    return loader


@pytest.mark.cloud
@pytest.mark.timeout(300)
def test_a_state_saved_without_a_limit_warns_when_resumed_under_one(recorded_bucket, tmp_path, monkeypatch):
    """The state's default window wins over the fitted one (the order must stay the saved
    one): resuming says what that costs in downloads, and both ways out work."""
    url, server, _ = recorded_bucket
    _write(f"{url}/ds", n=N_ROWS, size_limit=40_000)
    probe = petastream.open(f"{url}/ds")
    shards, raw = probe.num_shards, int(probe.cached_shard_bytes().sum())
    monkeypatch.setattr("petastream.stream.budget.MAX_CHUNK_BYTES", 64_000)  # as in the test above
    saving = BatchLoader(petastream.open(f"{url}/ds", cache_dir=str(tmp_path / "saved")), 100,
                         shuffle=True, seed=3, num_workers=2)
    it = iter(saving)
    head = np.concatenate([next(it)["id"] for _ in range(5)])
    state = saving.state_dict()
    limit = raw // 3

    server.reset()
    ds = petastream.open(f"{url}/ds", cache_dir=str(tmp_path / "limited"), cache_limit=limit)
    with pytest.warns(UserWarning, match=r"resumed state's shuffle \(window=262144, .* replaces the one fitted "
                                         r"to cache_limit=.*downloaded again, several times per epoch") as caught:
        resumed = _resumed(ds, state)
    rest = np.concatenate([b["id"] for b in resumed])
    np.testing.assert_array_equal(np.sort(np.concatenate([head, rest])), np.arange(N_ROWS))
    assert sum(server.shard_gets().values()) > 2 * shards  # the cost it warns of is real
    message = str(caught[0].message)
    assert "set_epoch(1)" in message and str(caught[0].filename) == __file__  # points at the caller

    # Way out 1: the limit it names keeps the saved order with each shard fetched once.
    enough = int(float(re.search(r"raise cache_limit to ([\d.]+) MB", message).group(1)) * 1e6)
    assert limit < enough
    server.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = petastream.open(f"{url}/ds", cache_dir=str(tmp_path / "enough"), cache_limit=enough)
        list(_resumed(ds, state))
    assert set(server.shard_gets().values()) == {1}
    # Way out 2: the next epoch on a loader of its own gets the fitted window back.
    server.reset()
    ds = petastream.open(f"{url}/ds", cache_dir=str(tmp_path / "refit"), cache_limit=limit)
    refit = BatchLoader(ds, 100, shuffle=True, seed=3, num_workers=2)
    refit.set_epoch(1)
    list(refit)
    assert refit.planner.window == refit.cache_fit.window and sum(server.shard_gets().values()) <= 1.2 * shards


def test_a_state_that_carries_the_fitted_window_resumes_without_a_warning(tmp_path):
    url = _write(str(tmp_path / "ds"), n=N_ROWS, size_limit=40_000)
    raw = int(petastream.open(url).cached_shard_bytes().sum())
    ds = petastream.open(url, cache_dir=str(tmp_path / "c"), cache_limit=raw // 3)
    first = BatchLoader(ds, 100, shuffle=True, seed=3, num_workers=2)
    it = iter(first)
    next(it)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resumed = _resumed(ds, first.state_dict())
    assert resumed.planner.window == resumed.cache_fit.window
