"""compat under a cache_limit smaller than the dataset: the reader leaves the shuffle window to
the loader, which fits it to the cache (each shard downloaded about once per epoch); without a
limit the window is the native default, as before."""

from __future__ import annotations

import numpy as np

import petastream
from petastream.compat.reader import make_batch_reader
from petastream.pipeline import BatchLoader
from petastream.stream import DEFAULT_WINDOW
from tests.mds.test_cache import _write

N_ROWS = 6000


def _loader(url, **reader_kwargs):
    reader = make_batch_reader(url, num_epochs=1, workers_count=2, **reader_kwargs)
    return BatchLoader(reader.dataset, **reader.loader_kwargs(100, shuffling_queue_capacity=4096))


def test_a_small_cache_limit_gets_the_cache_fitted_window(tmp_path):
    url = _write(str(tmp_path / "ds"), n=N_ROWS, size_limit=40_000)  # zstd: read through the cache
    raw = int(petastream.open(url).cached_shard_bytes().sum())
    fitted = _loader("file://" + url, cache_limit=raw // 3)
    assert fitted.cache_fit is not None and fitted.planner.window < N_ROWS
    ids = np.concatenate([b["id"] for b in fitted])
    np.testing.assert_array_equal(np.sort(ids), np.arange(N_ROWS))  # still a whole epoch, shuffled
    assert not np.array_equal(ids, np.arange(N_ROWS))
    plain = _loader("file://" + url)
    assert plain.cache_fit is None and plain.planner.window == DEFAULT_WINDOW


def test_a_queue_larger_than_the_native_window_still_sets_it(tmp_path):
    url = _write(str(tmp_path / "ds"), n=N_ROWS, size_limit=40_000)
    reader = make_batch_reader("file://" + url, num_epochs=1)
    kwargs = reader.loader_kwargs(100, shuffling_queue_capacity=DEFAULT_WINDOW + 5)
    assert kwargs["window"] == DEFAULT_WINDOW + 5
