"""Remote datasets (a real S3 API: moto on loopback) read by forked DataLoader worker processes.

The loaders open the dataset, and with it an s3fs filesystem bound to the parent's event-loop
thread, before the workers fork; each worker must reopen the filesystem rather than use the
parent's ("This class is not fork-safe"). ``fork`` is named explicitly: it is Linux's default
start method up to Python 3.13, and the one that breaks.
"""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest
import torch

from petastream.compat.pytorch import DataLoader as CompatDataLoader
from petastream.compat.reader import make_batch_reader
from petastream.mds.writer import write_mds
from petastream.torch import MDSIterableDataset, loader

pytestmark = [pytest.mark.torch, pytest.mark.cloud]
N = 600
# Half the dataset's decompressed size (8 shards of ~4 kB): the workers evict as they go.
CACHE_LIMITS = [None, 16_000]


@pytest.fixture
def s3_url(s3_bucket):
    url = f"{s3_bucket}/fork-workers"
    write_mds({"id": np.arange(N), "x": np.arange(N * 4, dtype=np.float64).reshape(N, 4),
               "s": np.array([f"s{i}" for i in range(N)], dtype=object)},
              url, size_limit=4096, compression="zstd")
    return url


def _ids(batches) -> list[int]:
    return [int(i) for b in batches for i in b["id"]]


@pytest.mark.parametrize("cache_limit", CACHE_LIMITS)
def test_mds_iterable_dataset_over_s3_in_forked_workers(s3_url, cache_limit):
    ds = MDSIterableDataset(s3_url, 50, shuffle=True, seed=2, dataset_options={"cache_limit": cache_limit})
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="fork")
    batches = list(dl)
    assert sorted(_ids(batches)) == list(range(N))
    assert batches[0]["s"] == [f"s{i}" for i in batches[0]["id"].tolist()]
    assert not multiprocessing.active_children()


@pytest.mark.parametrize("cache_limit", CACHE_LIMITS)
def test_process_loader_over_s3_with_forked_workers(s3_url, cache_limit):
    got = loader(s3_url, 50, shuffle=True, seed=5, num_workers=2, worker_type="process",
                 multiprocessing_context="fork", dataset_options={"cache_limit": cache_limit})
    ids = _ids(got)
    assert sorted(ids) == list(range(N))
    assert ids == _ids(loader(s3_url, 50, shuffle=True, seed=5, dataset_options={"cache_limit": cache_limit}))
    assert not multiprocessing.active_children()


@pytest.mark.parametrize("cache_limit", CACHE_LIMITS)
def test_compat_process_pool_reader_over_s3(s3_url, cache_limit):
    # Petastorm's reader_pool_type="process": DataLoader worker processes, the default start method.
    reader = make_batch_reader(s3_url, reader_pool_type="process", workers_count=2, num_epochs=1,
                               cache_limit=cache_limit)
    with CompatDataLoader(reader, batch_size=64) as dl:
        ids = _ids(dl)
    assert sorted(ids) == list(range(N))
