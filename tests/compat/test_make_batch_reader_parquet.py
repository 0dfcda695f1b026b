"""``make_batch_reader`` on Parquet stores (not only a converter's MDS): counts, shards, epochs,
filters, predicates, selectors, transforms and types as Petastorm 0.13.1's batch reader gives
them (recorded by running it over the same files)."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from petastream.compat import TransformSpec, make_batch_reader
from petastream.compat import predicates as P
from petastream.compat import selectors as S
from petastream.compat.errors import NoDataAvailableError
from petastream.errors import InvalidArgumentError

INDEXED = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "petastorm", "indexed")


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> str:
    """3 files of 100 rows, row groups of 50 (6 row groups), as the Petastorm probe wrote them."""
    d = tmp_path_factory.mktemp("plain")
    for f in range(3):
        ids = np.arange(f * 100, f * 100 + 100)
        table = pa.table({"id": ids, "x": ids * 0.5, "name": [f"n{i}" for i in ids],
                          "v": [[int(i), int(i) + 1] for i in ids]})
        pq.write_table(table, d / f"part{f}.parquet", row_group_size=50)
    return str(d)


def _ids(url: str, **kwargs) -> list[int]:
    with make_batch_reader(url, reader_pool_type="dummy", **kwargs) as reader:
        return sorted(int(i) for batch in reader for i in batch.id)


def test_columns_types_and_rows(plain):
    with make_batch_reader(plain, shuffle_row_groups=False) as reader:
        batches = list(reader)
    first = batches[0]
    assert type(first).__name__ == "inferred_schema_view"
    assert list(first._fields) == ["id", "x", "name", "v"]
    assert first.id.dtype == np.int64 and first.x.dtype == np.float64
    assert first.v.dtype == np.int64 and first.v.shape[1:] == (2,)  # equal-length lists: one 2-D array
    assert list(first.v[0]) == [0, 1]
    assert [int(i) for b in batches for i in b.id] == list(range(300))


def test_shards_are_row_groups_by_position(plain):
    # Petastorm: row group i (of 6, 50 rows each) is shard i % 4's.
    expected = {0: [*range(0, 50), *range(200, 250)], 1: [*range(50, 100), *range(250, 300)],
                2: list(range(100, 150)), 3: list(range(150, 200))}
    for shard, ids in expected.items():
        assert _ids(plain, cur_shard=shard, shard_count=4) == ids
    with pytest.raises(NoDataAvailableError):
        make_batch_reader(plain, cur_shard=0, shard_count=7)


def test_epochs_filters_and_predicates(plain):
    assert len(_ids(plain, num_epochs=3)) == 900
    assert _ids(plain, filters=[("id", "<", 120)]) == list(range(120))
    assert _ids(plain, predicate=P.in_lambda(["id"], lambda i: i % 7 == 0)) == list(range(0, 300, 7))
    both = _ids(plain, predicate=P.in_lambda(["id"], lambda i: i % 7 == 0), cur_shard=2, shard_count=4)
    assert both == list(range(105, 150, 7))
    with pytest.raises(ValueError, match="derived from PredicateBase"):
        make_batch_reader(plain, predicate=lambda row: True)


def test_schema_fields_and_transform(plain):
    with make_batch_reader(plain, schema_fields=["i.", "x"]) as reader:
        assert list(next(iter(reader))._fields) == ["id", "x"]

    def double_x(frame):
        frame["x"] = frame["x"] * 2
        return frame[["id", "x"]]

    spec = TransformSpec(double_x, removed_fields=["name", "v"])
    with make_batch_reader(plain, transform_spec=spec, shuffle_row_groups=False) as reader:
        batch = next(iter(reader))
    assert list(batch._fields) == ["id", "x"] and float(batch.x[1]) == 1.0


def test_rowgroup_selector_on_a_petastorm_dataset():
    assert _ids(INDEXED, null_policy="fill", rowgroup_selector=S.SingleIndexSelector("label_idx", ["dog"])) == [
        4, 5, 6, 7]


def test_selector_without_an_index_is_an_error(plain):
    with pytest.raises(ValueError, match="Could not find _metadata file"):
        make_batch_reader(plain, rowgroup_selector=S.SingleIndexSelector("a", [1]))


def test_nulls_are_named_and_filesystem_refused(plain):
    with pytest.raises(ValueError, match="column 'note'.*null_policy='fill'"):
        make_batch_reader(INDEXED, null_policy="error")
    with pytest.raises(InvalidArgumentError, match="filesystem"):
        make_batch_reader(plain, filesystem=object())


def test_torch_loaders_over_a_parquet_reader(plain):
    pytest.importorskip("torch")
    from petastream.compat.pytorch import BatchedDataLoader, DataLoader

    with BatchedDataLoader(make_batch_reader(plain, num_epochs=1), batch_size=64) as loader:
        ids = sorted(int(i) for b in loader for i in b["id"])
    assert ids == list(range(300))
    with DataLoader(make_batch_reader(plain, num_epochs=1, schema_fields=["id", "x"]), batch_size=32) as loader:
        batches = list(loader)
    assert sum(len(b["id"]) for b in batches) == 300 and batches[0]["x"].dtype.is_floating_point


def test_parquet_on_s3_with_a_predicate(plain, s3_bucket, s3_endpoint):
    import s3fs

    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_endpoint})
    fs.put(plain, f"{s3_bucket}/plain", recursive=True)
    options = {"client_kwargs": {"endpoint_url": s3_endpoint}}
    ids = _ids(f"{s3_bucket}/plain", storage_options=options, predicate=P.in_lambda(["id"], lambda i: i % 7 == 0))
    assert ids == list(range(0, 300, 7))


def test_process_pool_reads_the_narrowed_plan(plain):
    pytest.importorskip("torch")
    from petastream.compat.pytorch import BatchedDataLoader

    reader = make_batch_reader(plain, reader_pool_type="process", workers_count=2, num_epochs=1,
                               predicate=P.in_lambda(["id"], lambda i: i % 7 == 0), cur_shard=1, shard_count=4)
    with BatchedDataLoader(reader, batch_size=16) as loader:
        batches = list(loader)
    ids = sorted(int(i) for b in batches for i in b["id"])
    assert ids == [i for i in range(300) if i % 7 == 0 and (50 <= i < 100 or 250 <= i < 300)]
    assert batches[0]["v"].shape[1:] == (2,)  # equal-length lists: one tensor per batch


def test_local_disk_cache_keeps_decoded_row_groups(plain, tmp_path, monkeypatch):
    # Petastorm's cache_type="local-disk" keeps decoded row groups on disk; here they are
    # entries of the shard cache at cache_location, bounded by cache_size_limit.
    from petastream.storage.cache import ShardCache

    cache = str(tmp_path / "cache")
    options = dict(cache_type="local-disk", cache_location="file://" + cache, cache_size_limit=1 << 30,
                   cache_row_size_estimate=100, shuffle_row_groups=False, num_epochs=1)
    with make_batch_reader(plain, shuffle_row_groups=False) as reader:
        want = [tuple(b.id) for b in reader]
    with make_batch_reader(plain, **options) as reader:
        assert [tuple(b.id) for b in reader] == want
    assert sum(f.key.startswith("pqd-") for f in ShardCache.at(cache).usage().files) == 6  # the row groups
    decodes = []
    real = pq.ParquetFile.read_row_group
    monkeypatch.setattr(pq.ParquetFile, "read_row_group", lambda self, i, *a, **k: decodes.append(i) or real(
        self, i, *a, **k))
    with make_batch_reader(plain, **options) as reader:  # the next epoch's reader: no Parquet decoded
        assert [tuple(b.id) for b in reader] == want
    assert decodes == []


def test_local_disk_cache_arguments_that_cannot_be_honoured(plain, tmp_path):
    with pytest.raises(InvalidArgumentError, match="cache_extra_settings=.*drop it"):
        make_batch_reader(plain, cache_type="local-disk", cache_location=str(tmp_path), cache_size_limit=1 << 20,
                          cache_row_size_estimate=10, cache_extra_settings={"cleanup": True})
    with pytest.raises(InvalidArgumentError, match="cache_location='s3://b/c'.*local directory"):
        make_batch_reader(plain, cache_type="local-disk", cache_location="s3://b/c", cache_size_limit=1 << 20,
                          cache_row_size_estimate=10)
    with pytest.raises(ValueError, match="Unknown cache_type: memory"):
        make_batch_reader(plain, cache_type="memory")


def test_a_plain_path_two_levels_from_the_root():
    # "/tmp/x": looking for an MDS index.json above the path must stop at "/", not ask for "".
    import shutil
    import tempfile

    root = tempfile.mkdtemp(prefix="petastream-shallow-")
    try:
        assert root.count("/") == 2
        pq.write_table(pa.table({"id": np.arange(10)}), os.path.join(root, "part-0.parquet"))
        with make_batch_reader(root, num_epochs=1, workers_count=1) as reader:
            assert sorted(int(i) for b in reader for i in b.id) == list(range(10))
    finally:
        shutil.rmtree(root)
