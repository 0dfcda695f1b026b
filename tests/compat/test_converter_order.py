"""The row order of compat's loaders under Petastorm's default arguments, as Petastorm 0.13.1
gives it (observed with its own ``make_batch_reader``/``DataLoader``/converter):

* ``shuffle_row_groups=True`` (the default) without a shuffling queue permutes the row groups
  and keeps the rows of each in their stored order; so a one-partition DataFrame comes back in
  ``df.collect()`` order, whatever the seed (Petastorm's own ``test_primitive`` and
  ``test_torch_primitive`` rely on it);
* a shuffling queue shuffles rows (its torch loaders even with a capacity of 1, whose buffer
  holds a whole row group); ``make_tf_dataset``'s queue is ``dataset.shuffle(capacity)``, so a
  capacity of 1 keeps the order.

Each order is checked for several seeds (and without one), so that a shuffle that only
sometimes keeps the order fails here every time.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from petastream.compat.pytorch import BatchedDataLoader, DataLoader
from petastream.compat.reader import make_batch_reader
from petastream.mds.writer import write_mds

pytestmark = pytest.mark.torch

SEEDS = [None, 0, 1, 2, 3, 7, 42]


def _runs(ids: list[int]) -> list[tuple[int, int]]:
    """``(first id, length)`` of each run of consecutive ids."""
    arr = np.asarray(ids)
    return [(int(r[0]), len(r)) for r in np.split(arr, np.flatnonzero(np.diff(arr) != 1) + 1)]


def _ids(loader) -> list[int]:
    with loader:
        return [int(i) for batch in loader for i in batch["id"]]


@pytest.fixture(scope="module")
def row_groups(tmp_path_factory) -> str:
    """One Parquet file of three row groups of 20 rows."""
    path = tmp_path_factory.mktemp("order") / "a.parquet"
    pq.write_table(pa.table({"id": np.arange(60, dtype=np.int64)}), path, row_group_size=20)
    return "file://" + str(path.parent)


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> str:
    """An MDS dataset of several shards (the converter's row groups)."""
    path = str(tmp_path_factory.mktemp("order") / "ds")
    write_mds({"id": np.arange(400)}, path, size_limit=900)
    return path


@pytest.mark.parametrize("loader_type", [DataLoader, BatchedDataLoader])
@pytest.mark.parametrize("seed", SEEDS)
def test_row_groups_are_permuted_and_read_in_order(row_groups, loader_type, seed):
    # Recorded from Petastorm 0.13.1 (workers_count=4): [(20, 20), (0, 20), (40, 20)],
    # [(0, 20), (40, 20), (20, 20)], ...: whole row groups, in a random order.
    ids = _ids(loader_type(make_batch_reader(row_groups, seed=seed), batch_size=7))
    assert sorted(ids) == list(range(60))
    starts = [start for start, _ in _runs(ids)]
    assert all(start % 20 == 0 for start in starts)  # a row group only ever starts a run


@pytest.mark.parametrize("seed", SEEDS)
def test_shards_are_permuted_and_read_in_order(shards, seed):
    reader = make_batch_reader(shards, seed=seed)
    sizes = np.asarray(reader.dataset.shard_sizes)
    assert len(sizes) > 3
    firsts = set(np.concatenate([[0], np.cumsum(sizes)[:-1]]).tolist())
    ids = _ids(DataLoader(reader, batch_size=32))
    assert sorted(ids) == list(range(400))
    assert all(start in firsts for start, _ in _runs(ids))


def test_the_shard_order_follows_the_seed(shards):
    def order(seed):
        return _runs(_ids(DataLoader(make_batch_reader(shards, seed=seed), batch_size=32)))

    assert order(3) == order(3)
    assert len({tuple(order(seed)) for seed in range(6)}) > 1


@pytest.mark.parametrize("loader_type", [DataLoader, BatchedDataLoader])
@pytest.mark.parametrize("capacity", [1, 5])
def test_a_torch_shuffling_queue_shuffles_rows_within_a_row_group(row_groups, loader_type, capacity):
    # Petastorm 0.13.1's torch buffer takes a whole row group in, so even a capacity of 1 (with
    # shuffle_row_groups=False) gave runs like [(6, 1), (10, 1), (16, 1), ...]. (Its DataLoader
    # with a capacity of 1 then fails at the end of the data, 'high <= 0'; compat does not.)
    ids = _ids(loader_type(make_batch_reader(row_groups, shuffle_row_groups=False, seed=1), batch_size=60,
                           shuffling_queue_capacity=capacity))
    assert sorted(ids) == list(range(60)) and ids != list(range(60))


def test_without_a_shuffle_the_order_is_the_stored_one(row_groups):
    ids = _ids(DataLoader(make_batch_reader(row_groups, shuffle_row_groups=False), batch_size=7))
    assert ids == list(range(60))


@pytest.mark.parametrize("seed", SEEDS)
def test_direct_iteration_keeps_rows_in_order_within_row_groups(row_groups, seed):
    with make_batch_reader(row_groups, seed=seed) as reader:
        ids = [int(i) for batch in reader for i in batch.id]
    assert sorted(ids) == list(range(60))
    assert all(start % 20 == 0 for start, _ in _runs(ids))


@pytest.fixture
def one_partition(spark, converter_env):
    """A one-partition DataFrame whose rows are not sorted, and its ``collect()`` order."""
    from petastream.compat import make_spark_converter

    values = np.random.default_rng(5).permutation(50).tolist()
    df = spark.createDataFrame([(v, float(v) / 2) for v in values], "id long, x double").coalesce(1)
    expected = [row["id"] for row in df.collect()]
    assert expected != sorted(expected)
    return make_spark_converter(df), expected


@pytest.mark.spark
def test_a_one_partition_dataframe_comes_back_in_collect_order_into_torch(one_partition):
    conv, expected = one_partition
    for seed in SEEDS:
        with conv.make_torch_dataloader(num_epochs=1, seed=seed) as loader:  # batch_size 32
            assert [int(i) for batch in loader for i in batch["id"]] == expected
    with conv.make_torch_dataloader(num_epochs=1, batch_size=50, shuffling_queue_capacity=4) as loader:
        ids = [int(i) for batch in loader for i in batch["id"]]
    assert sorted(ids) == sorted(expected) and ids != expected  # a queue shuffles


@pytest.mark.spark
@pytest.mark.tf
def test_a_one_partition_dataframe_comes_back_in_collect_order_into_tf(one_partition):
    conv, expected = one_partition
    for seed, capacity in [(None, None), (0, None), (3, 0), (7, 1), (42, None)]:
        # tf.data's shuffle(1) keeps the order: so does Petastorm's queue of one row.
        with conv.make_tf_dataset(num_epochs=1, batch_size=16, seed=seed,
                                  shuffling_queue_capacity=capacity) as dataset:
            assert [int(i) for batch in dataset for i in batch.id.numpy()] == expected
