"""Decode workers keep a few datasets open (``pipeline.procpool``): a loop that reads another
dataset in between (train, validation, train) finds the first one still decoded in them, a
changed file is read anew, and ``keep=1`` reopens at every switch as before."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from petastream.errors import InvalidArgumentError
from petastream.parquet import ParquetSource
from petastream.pipeline import BatchLoader
from petastream.pipeline.parts import DENSE, ColumnParts, FlatParts
from petastream.pipeline.procpool import parking
from petastream.pipeline.procpool import pool as procpool
from petastream.pipeline.procpool.parking import ProcessExecutor

pytestmark = pytest.mark.timeout(180)
PARTS = FlatParts((ColumnParts("id", DENSE, np.dtype("int64")), ColumnParts("x", DENSE, np.dtype("float32"))))


def _write(path: str, start: int, rows: int) -> str:
    os.makedirs(path, exist_ok=True)
    ids = np.arange(start, start + rows)
    pq.write_table(pa.table({"id": ids, "x": (ids * 0.5).astype(np.float32)}), f"{path}/part-0.parquet",
                   row_group_size=250)
    return path


@pytest.fixture()
def data(tmp_path):
    return _write(str(tmp_path / "a"), 0, 1500), _write(str(tmp_path / "b"), 10_000, 500)


def _epoch(url: str, workers: int = 2) -> tuple[list[int], list[float], int, procpool.WorkerPool]:
    """One loader (a compat context's worth: the source opened anew) over ``url``: its ids and
    values in order, the row groups decoded for it, and the pool it ran on."""
    loader = BatchLoader(ParquetSource(url), batch_size=100, convert=PARTS,
                         executor=ProcessExecutor(workers, 4))
    try:
        ids: list[int] = []
        xs: list[float] = []
        for batch in loader:
            ids += batch[0].tolist()
            xs += batch[1].tolist()
        pool = loader.executor.pool
        assert pool is not None
        return ids, xs, loader.stats()["row_groups_decoded"], pool
    finally:
        loader.close()


@pytest.fixture(autouse=True)
def _fresh_pools():
    parking.shutdown_idle()  # each test starts its own pool (its environment decides its keep)
    yield
    parking.shutdown_idle()


def test_a_dataset_read_again_after_another_decodes_nothing_again(data):
    a, b = data
    ids, xs, decoded, pool = _epoch(a)
    assert pool.keep == procpool.KEPT_DATASETS == 2
    assert ids == list(range(1500)) and xs == [i * 0.5 for i in range(1500)] and decoded >= 6
    ids_b, _, decoded_b, pool_b = _epoch(b)
    assert pool_b is pool and ids_b == list(range(10_000, 10_500)) and decoded_b >= 2
    again, xs_again, decoded_again, pool_again = _epoch(a)
    assert pool_again is pool and (again, xs_again) == (ids, xs)
    assert decoded_again == 0  # the workers kept A's row groups decoded across B's epoch
    assert pool.opens == 2  # A and B, each sent once


def test_a_file_changed_between_epochs_is_read_anew(data):
    a, b = data
    _epoch(a)
    _epoch(b)
    _write(a, 5000, 1500)  # the same file name, other content (and size, version)
    ids, xs, decoded, pool = _epoch(a)
    assert ids == list(range(5000, 6500)) and xs == [i * 0.5 for i in range(5000, 6500)] and decoded >= 6
    assert pool.opens == 3


def test_keeping_one_reopens_at_every_switch_as_before(data, monkeypatch):
    monkeypatch.setenv("PETASTREAM_WORKER_KEPT_DATASETS", "1")
    a, b = data
    ids, _, _, pool = _epoch(a)
    assert pool.keep == 1
    _epoch(b)
    again, _, decoded, pool_again = _epoch(a)
    assert pool_again is pool and again == ids and decoded >= 6 and pool.opens == 3


def test_the_least_recently_used_dataset_goes_first(data, tmp_path):
    a, b = data
    c = _write(str(tmp_path / "c"), 20_000, 250)
    _epoch(a)
    _epoch(b)
    _epoch(a)  # A used last: B is the one to go when C comes
    _epoch(c)
    assert _epoch(a)[2] == 0
    ids_b, _, decoded_b, pool = _epoch(b)
    assert ids_b == list(range(10_000, 10_500)) and decoded_b >= 2 and pool.opens == 4


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_a_bad_kept_count_is_refused_with_the_variable_named(value, monkeypatch):
    monkeypatch.setenv("PETASTREAM_WORKER_KEPT_DATASETS", value)
    with pytest.raises(InvalidArgumentError, match="PETASTREAM_WORKER_KEPT_DATASETS=.*1 or more"):
        procpool.kept_datasets()


@pytest.mark.timeout(300)
def test_kept_datasets_let_their_cache_pins_go_when_dropped_and_at_shutdown(s3_bucket, tmp_path):
    """Remote files are read through the node's shard cache, pinned while a source needs them:
    a kept dataset dropped for another lets go of its pins as a replaced one did, and so do
    the kept ones when the pool stops, so a later reader of the cache evicts freely."""
    import s3fs

    from petastream.storage.cache import ShardCache

    fs = s3fs.S3FileSystem()
    urls = []
    for name, start in (("a", 0), ("b", 10_000), ("c", 20_000)):
        local = _write(str(tmp_path / "local" / name), start, 500)
        fs.put(f"{local}/part-0.parquet", f"{s3_bucket[5:]}/{name}/part-0.parquet")
        urls.append(f"{s3_bucket}/{name}")
    cache_dir = str(tmp_path / "cache")

    def epoch(url: str) -> list[int]:
        loader = BatchLoader(ParquetSource(url, cache_dir=cache_dir, cache_limit="64mb", fetch="file"),
                             batch_size=100, convert=PARTS, executor=ProcessExecutor(2, 4))
        try:
            return [i for batch in loader for i in batch[0].tolist()]
        finally:
            loader.close()

    cache = ShardCache.at(cache_dir)
    assert epoch(urls[0]) == list(range(500))
    assert epoch(urls[1]) == list(range(10_000, 10_500))
    assert epoch(urls[2]) == list(range(20_000, 20_500))  # A is dropped from the workers here
    pinned = set(cache.usage(count_pinned=True).pinned_paths)
    paths = []
    for url in urls:
        source = ParquetSource(url, cache_dir=cache_dir, cache_limit="64mb", fetch="file")
        paths.append({cache.path(k) for k in source.row_groups.cache_keys(range(len(source.plan.units)))})
        source.close()
    # Only C's files, read last, stay pinned (as the dataset read last always was): B, kept
    # idle, let go of its pins at the switch to C; A, dropped, with its dataset.
    assert all(paths) and not (paths[0] | paths[1]) & pinned and pinned <= paths[2], pinned
    parking.shutdown_idle()
    usage = cache.usage(count_pinned=True)
    assert usage.entries >= 3 and usage.pinned == 0
    cache.prune(0)  # nothing held: a later reader evicts every entry
    assert cache.usage().entries == 0


def test_a_dataset_that_failed_to_open_is_opened_again_when_the_loop_comes_back(data, tmp_path):
    """A kept dataset is one that opened: one whose open failed in the workers (a file gone for
    a moment) is opened anew the next time a loader comes back to it, as before any were kept."""
    import shutil

    from petastream.mds.dataset import MDSDataset
    from petastream.mds.writer import write_mds

    a, _ = data
    original, copy = str(tmp_path / "mds"), str(tmp_path / "copy")
    write_mds({"id": np.arange(300), "x": np.arange(300, dtype=np.float32)}, original,
              columns={"id": "int64", "x": "float32"})
    shutil.copytree(original, copy)

    def epoch(source) -> list[int]:
        loader = BatchLoader(source, batch_size=100, convert=PARTS, executor=ProcessExecutor(2, 4))
        try:
            return [i for batch in loader for i in batch[0].tolist()]
        finally:
            loader.close()

    failing = MDSDataset(copy)
    shutil.rmtree(copy)  # gone before the workers open it
    with pytest.raises(Exception, match="index.json"):
        epoch(failing)
    shutil.copytree(original, copy)  # back, the same index
    assert epoch(ParquetSource(a)) == list(range(1500))
    assert epoch(MDSDataset(copy)) == list(range(300))
