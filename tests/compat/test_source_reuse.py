"""A reader per epoch (Petastorm's ``with make_batch_reader(...)`` in the epoch loop) reads
through the last reader's Parquet source, with the row groups it decoded, while the files are
the same; never stale data once they change (:mod:`petastream.compat._source_reuse`)."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from petastream.compat import _source_reuse, make_batch_reader
from petastream.compat._direct import DirectRead
from petastream.compat.pytorch import BatchedDataLoader
from petastream.compat.spark_dataset_converter import SparkDatasetConverter


@pytest.fixture(autouse=True)
def _nothing_kept():
    _source_reuse.forget()
    yield
    _source_reuse.forget()


def _write(path: str, start: int, rows: int = 100) -> None:
    ids = np.arange(start, start + rows)
    pq.write_table(pa.table({"id": ids, "x": ids * 0.5}), path, row_group_size=25)


def _epoch(url: str, **kwargs) -> tuple[object, list[int]]:
    with make_batch_reader(url, reader_pool_type="dummy", shuffle_row_groups=False, **kwargs) as reader:
        ids = [int(i) for batch in reader for i in batch.id]
        return reader.dataset, ids


def test_a_reader_per_epoch_reads_through_the_last_readers_source(tmp_path):
    _write(str(tmp_path / "a.parquet"), 0)
    first, ids = _epoch(str(tmp_path))
    second, again = _epoch(str(tmp_path))
    assert second is first and again == ids == list(range(100))
    # Options that change what is served without changing the plan are part of the key.
    third, _ = _epoch(str(tmp_path), null_policy="fill")
    assert third is not first


def test_changed_added_or_removed_files_are_read_anew(tmp_path):
    path = str(tmp_path / "a.parquet")
    _write(path, 0)
    first, _ = _epoch(str(tmp_path))
    _write(path, 1000)  # same size, new content
    os.utime(path, ns=(1, 1))  # even with an older modification time
    second, ids = _epoch(str(tmp_path))
    assert second is not first and ids == list(range(1000, 1100))
    _write(str(tmp_path / "b.parquet"), 5000, rows=10)
    third, ids = _epoch(str(tmp_path))
    assert third is not second and sorted(ids) == [*range(1000, 1100), *range(5000, 5010)]
    os.remove(path)
    _, ids = _epoch(str(tmp_path))
    assert ids == list(range(5000, 5010))


def test_a_source_is_lent_to_one_reader_at_a_time(tmp_path):
    _write(str(tmp_path / "a.parquet"), 0)
    one = make_batch_reader(str(tmp_path), reader_pool_type="dummy")
    two = make_batch_reader(str(tmp_path), reader_pool_type="dummy")
    assert one.dataset is not two.dataset
    one.join()  # joined without stop(): still the reader's, not given back
    three = make_batch_reader(str(tmp_path), reader_pool_type="dummy")
    assert three.dataset is not one.dataset
    for reader in (one, two, three):
        reader.stop()
        reader.join()


def test_the_loaders_exit_gives_the_source_back(tmp_path):
    _write(str(tmp_path / "a.parquet"), 0)
    datasets = []
    for _ in range(2):
        reader = make_batch_reader(str(tmp_path), workers_count=2, num_epochs=1)
        with BatchedDataLoader(reader, batch_size=16) as loader:
            assert sorted(int(i) for b in loader for i in b["id"]) == list(range(100))
        datasets.append(reader.dataset)
    assert datasets[0] is datasets[1]


def test_a_converter_context_per_epoch_reuses_the_direct_source(tmp_path):
    _write(str(tmp_path / "a.parquet"), 0)
    files = [str(tmp_path / "a.parquet")]
    converter = SparkDatasetConverter(None, files, 100, direct=DirectRead("parquet", tuple(files), ("id", "x"),
                                                                          None, {}, 100))
    datasets = []
    for _ in range(2):
        with converter.make_torch_dataloader(batch_size=10, num_epochs=1) as loader:
            assert sorted(int(i) for b in loader for i in b["id"]) == list(range(100))
            datasets.append(loader.reader.dataset)
    assert datasets[0] is datasets[1]


def test_a_pass_left_early_then_a_new_reader_reads_everything(tmp_path):
    _write(str(tmp_path / "a.parquet"), 0, rows=2000)
    reader = make_batch_reader(str(tmp_path), workers_count=2, num_epochs=1, seed=3)
    with BatchedDataLoader(reader, batch_size=16) as loader:
        for _ in zip(range(3), loader):
            pass
    reader = make_batch_reader(str(tmp_path), workers_count=2, num_epochs=1, seed=3)
    with BatchedDataLoader(reader, batch_size=16) as loader:
        assert sorted(int(i) for b in loader for i in b["id"]) == list(range(2000))


def test_a_reader_never_closed_lets_its_source_go(tmp_path):
    import gc
    import weakref

    _write(str(tmp_path / "a.parquet"), 0)
    reader = make_batch_reader(str(tmp_path), reader_pool_type="dummy")
    assert sorted(int(i) for b in reader for i in b.id) == list(range(100))
    gone = weakref.ref(reader.dataset)
    del reader
    gc.collect()
    assert gone() is None
