"""The reader objects and ``make_reader``'s arguments as Petastorm 0.13.1 behaves (recorded by
running Petastorm 0.13.1 over the same fixtures, tests/fixtures/petastorm, and over the small
Parquet files written here): iterator protocol, several threads, ``diagnostics``,
``cleanup_cache``, URL rules, plain Parquet and single files, ``filters``, the local-disk cache
arguments, and Petastorm's warnings."""

from __future__ import annotations

import glob
import os
import threading
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from petastream.compat import make_batch_reader, make_reader
from petastream.compat.predicates import in_lambda, in_set
from petastream.errors import InvalidArgumentError

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "petastorm")
STOPPED = ("Trying to read a sample after a reader created by make_reader/make_batch_reader has stopped. This may "
           "happen if the make_reader/make_batch_reader context manager has exited but you try to fetch a sample "
           "from it anyway")


def _url(name: str) -> str:
    return os.path.join(FIXTURES, name)


def _write_plain(directory, third="c"):
    """Two plain Parquet files (one of two row groups), a string and a list column."""
    pq.write_table(pa.table({"id": np.arange(6), "s": ["a", "b", third, "d", "e", "f"], "v": [[1.0, 2.0]] * 6}),
                   directory / "a.parquet", row_group_size=3)
    pq.write_table(pa.table({"id": np.arange(6, 8), "s": ["g", "h"], "v": [[3.0]] * 2}), directory / "b.parquet")
    return directory


@pytest.fixture
def plain(tmp_path):
    return _write_plain(tmp_path)


# -- the batch reader is an iterator ------------------------------------------------------------

def test_batch_reader_is_its_own_iterator_and_one_pass(plain):
    reader = make_batch_reader(str(plain), shuffle_row_groups=False)
    assert iter(reader) is reader
    first = next(reader)
    assert type(first).__name__ == "inferred_schema_view" and first.id[0] == 0
    with pytest.raises(NotImplementedError, match="resetting a reader while in the middle of iteration"):
        reader.reset()
    rest = list(reader)
    assert sum(len(b.id) for b in [first, *rest]) == 8 and reader.last_row_consumed
    with pytest.raises(StopIteration):
        next(reader)
    reader.reset()  # a new pass once the last one was read to its end
    assert not reader.last_row_consumed and sum(len(b.id) for b in reader) == 8
    reader.stop()
    with pytest.raises(RuntimeError) as info:
        next(reader)
    assert str(info.value) == STOPPED
    reader.join()
    reader.stop()
    reader.join()  # both may be called again


def test_peek_leaves_the_batch_for_next(plain):
    with make_batch_reader(str(plain), shuffle_row_groups=False) as reader:
        peeked = reader.peek()
        assert reader.peek() is peeked and next(reader) is peeked


@pytest.mark.parametrize("make", ["rows", "batches"])
def test_several_threads_share_one_pass_each_item_once(plain, make):
    # Petastorm's readers may be read from several threads: every row comes out once per epoch.
    if make == "rows":
        reader = make_reader(_url("indexed"), num_epochs=3, workers_count=2)
    else:
        reader = make_batch_reader(str(plain), num_epochs=3, workers_count=2)
    ids: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def consume():
        try:
            for item in reader:
                with lock:
                    ids.extend(np.atleast_1d(item.id).tolist())
        except BaseException as e:  # noqa: BLE001  (reported below)
            errors.append(e)

    threads = [threading.Thread(target=consume) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    reader.stop()
    reader.join()
    assert errors == []
    n = 16 if make == "rows" else 8
    assert sorted(ids) == sorted(list(range(n)) * 3)


# -- diagnostics and cleanup_cache ----------------------------------------------------------------

@pytest.mark.parametrize("pool, keys", [
    ("thread", {"output_queue_size"}),
    ("process", {"items_consumed", "items_produced", "items_inprocess", "zmq_copy_buffers"}),
    ("dummy", set()),
])
def test_diagnostics_have_petastorms_keys_per_pool(plain, pool, keys):
    with make_reader(_url("indexed"), reader_pool_type=pool, workers_count=1, zmq_copy_buffers=False) as reader:
        if pool == "process":
            assert reader.diagnostics["items_produced"] == 0  # nothing read yet
        next(reader)
        assert set(reader.diagnostics) == keys
        if pool == "process":
            assert reader.diagnostics["zmq_copy_buffers"] is False
            assert reader.diagnostics["items_consumed"] < 5
    with make_batch_reader(str(plain), reader_pool_type=pool) as batches:
        next(batches)
        assert set(batches.diagnostics) == keys


def test_cleanup_cache_prints_petastorms_line(plain, capsys):
    for reader in (make_reader(_url("indexed")), make_batch_reader(str(plain))):
        with reader:
            next(reader)
            reader.cleanup_cache()
        assert capsys.readouterr().out == "Cache cleanup complete.\n"  # once: not again at the exit


def test_local_disk_cache_directory_lives_with_the_reader(tmp_path, capsys):
    location = tmp_path / "cache"
    options = dict(cache_type="local-disk", cache_location=str(location), cache_size_limit=1_000_000,
                   cache_row_size_estimate=100)
    with make_reader(_url("indexed"), num_epochs=2, **options) as reader:
        assert location.is_dir()
        assert sorted(int(r.id) for r in reader) == sorted(list(range(16)) * 2)  # the same rows
    assert not location.exists()
    # Never a file of the user's: Petastorm removed the whole tree, here only an empty directory.
    location.mkdir()
    (location / "keep.txt").write_text("mine")
    with make_reader(_url("indexed"), **options) as reader:
        next(reader)
    assert (location / "keep.txt").read_text() == "mine"


def test_a_failing_cache_cleanup_is_printed_not_raised(tmp_path, capsys, monkeypatch):
    reader = make_reader(_url("indexed"), cache_type="local-disk", cache_location=str(tmp_path / "c"),
                         cache_size_limit=1_000_000, cache_row_size_estimate=100)

    def failing():
        raise OSError("disk gone")

    monkeypatch.setattr(reader.cache, "cleanup", failing)
    reader.cleanup_cache()
    assert capsys.readouterr().out == "Error cleaning cache: disk gone\nCache cleanup complete.\n"
    reader.stop()
    reader.join()


def test_local_disk_cache_arguments_checked_as_petastorm(tmp_path):
    options = dict(cache_type="local-disk", cache_location=str(tmp_path))
    with pytest.raises(ValueError, match=r"Condition 'size_limit_bytes / shards < 5 \* expected_row_size_bytes'"):
        make_reader(_url("indexed"), cache_size_limit=1000, cache_row_size_estimate=100, **options)
    with pytest.raises(ValueError, match=r"Condition 'size_limit_bytes / shards"):
        make_batch_reader(_url("indexed"), cache_size_limit=1000, cache_row_size_estimate=100, **options)
    big = dict(options, cache_size_limit=1 << 20, cache_row_size_estimate=10)
    with pytest.raises(RuntimeError, match="Local cache is not supported together with predicates"):
        make_reader(_url("indexed"), predicate=in_set({"cat"}, "label"), **big)
    with pytest.raises(RuntimeError, match="Local cache is not supported together with shuffle_row_drop_partitions"):
        make_reader(_url("indexed"), shuffle_row_drop_partitions=2, **big)
    # A predicate on the partition key is resolved per row group: allowed with the cache.
    with make_reader(_url("partitioned"), predicate=in_set({"test"}, "split"), **big) as reader:
        assert sorted(int(r.id) for r in reader) == [0, 3]
    with pytest.raises(ValueError, match="Unknown cache_type: bogus"):
        make_reader(_url("indexed"), cache_type="bogus")


# -- make_reader's dataset URL --------------------------------------------------------------------

@pytest.mark.parametrize("url, error, text", [
    (None, ValueError, "directory url must be a string"),
    (123, ValueError, "directory url must be a string"),
    ([], ValueError, "dataset url list must be non-empty."),
])
@pytest.mark.parametrize("make", [make_reader, make_batch_reader])
def test_dataset_url_must_be_a_string_or_a_list(make, url, error, text):
    with pytest.raises(error) as info:
        make(url)
    assert str(info.value) == text


def test_plain_parquet_rows_with_petastorms_warning(tmp_path):
    # Petastorm 0.13.1: a UserWarning, then rows typed by the Parquet schema (no codecs), a null as None.
    plain = _write_plain(tmp_path, third=None)
    with pytest.warns(UserWarning, match="Currently make_reader supports reading only Petastorm datasets. "
                                         "To read from a non-Petastorm Parquet store use make_batch_reader"):
        reader = make_reader("file://" + str(plain), reader_pool_type="dummy", shuffle_row_groups=False)
    with reader:
        rows = list(reader)
    assert type(rows[0]).__name__ == "inferred_schema_view"
    assert [int(r.id) for r in rows] == list(range(8))
    third = rows[2]
    assert type(third.id) is np.int64 and third.s is None
    assert isinstance(third.v, np.ndarray) and third.v.tolist() == [1.0, 2.0]
    assert type(rows[3].s) is np.str_ and rows[3].s == "d"


def test_one_parquet_file_and_a_list_of_files():
    # A file of a Petastorm dataset: Petastorm's warning, its rows with the inferred schema (codec
    # columns as the stored bytes); a list naming it twice reads it twice.
    one = sorted(glob.glob(os.path.join(FIXTURES, "indexed", "*.parquet")))[0]
    with pytest.warns(UserWarning, match="supports reading only Petastorm datasets"):
        with make_reader("file://" + one) as reader:
            rows = list(reader)
    assert len(rows) == 4 and type(rows[0]).__name__ == "inferred_schema_view"
    assert list(rows[0]._fields) == ["id", "label", "note", "tags", "vec"]
    assert type(rows[0].vec) is np.bytes_ and type(rows[0].id) is np.int32
    with pytest.warns(UserWarning, match="supports reading only Petastorm datasets"):
        with make_reader(["file://" + one, "file://" + one]) as reader:
            assert len(list(reader)) == 8
    every = sorted(glob.glob(os.path.join(FIXTURES, "partitioned", "*", "*.parquet")))
    with pytest.warns(UserWarning), make_reader(["file://" + f for f in every]) as reader:
        rows = list(reader)
    assert len(rows) == 6 and list(rows[0]._fields) == ["id", "vec"]  # files named: no partition column


# -- filters ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("filters, ids", [
    ([("split", "=", "train")], [1, 2, 4, 5]),  # recorded from Petastorm 0.13.1
    ([("split", "in", {"test"})], [0, 3]),
    ([("split", "!=", "test")], [1, 2, 4, 5]),
    ([[("split", "=", "train")], [("split", "=", "test")]], [0, 1, 2, 3, 4, 5]),
    ([("split", "=", "none")], []),
])
def test_filters_keep_partition_directories(filters, ids):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the no-data warning, for the last case
        with make_reader(_url("partitioned"), filters=filters) as reader:
            assert sorted(int(r.id) for r in reader) == ids


def test_filter_on_a_column_that_is_not_a_partition_key_is_refused():
    # Petastorm 0.13.1 ignored the term on 'id' and returned every row of 'test'.
    with pytest.raises(InvalidArgumentError, match=r"'id' is not a partition key of the dataset \(its keys: split\)"):
        make_reader(_url("partitioned"), filters=[("id", "<", 3), ("split", "=", "test")])
    with pytest.raises(ValueError, match="Malformed filters"):
        make_reader(_url("partitioned"), filters=[])


def test_filter_values_compare_as_legacy_pyarrow(tmp_path):
    # Recorded with pyarrow 14's legacy ParquetDataset (what Petastorm filters with): keys made
    # of digits are ints; each comparison is in the filter value's type.
    from petastream.compat._row_filters import filter_pieces
    from petastream.compat.etl.metadata_files import RowGroupPiece

    pieces = [RowGroupPiece(f"k={k}/a.parquet", 0, (("k", k),)) for k in ("007", "10", "2")]

    def kept(filters):
        return sorted(p.partition_keys[0][1] for p in filter_pieces(pieces, filters))

    assert kept([("k", "<", 5)]) == ["2"]
    assert kept([("k", "<", "5")]) == ["10", "2"]
    assert kept([("k", "=", 7)]) == ["007"] == kept([("k", "=", "7")])
    assert kept([("k", "in", {2, 10})]) == ["10", "2"]
    assert kept([("k", "not in", [2])]) == ["007", "10"]
    with pytest.raises(TypeError, match="'int' object is not a collection"):
        kept([("k", "in", 5)])
    with pytest.raises(ValueError, match="'~' is not a valid operator in predicates."):
        kept([("k", "~", 5)])
    with pytest.raises(ValueError, match="Op '=' not supported with a collection value"):
        kept([("k", "=", [1, 2])])
    with pytest.raises(ValueError, match="must be of same type"):
        kept([("k", "in", [2, "10"])])


# -- warnings -----------------------------------------------------------------------------------

def test_deprecated_shard_seed_warns_as_petastorm(plain):
    text = ("shard_seed was deprecated and will be removed in future versions. "
            "Use seed to apply randomization effects on sharding row groups.")
    with pytest.warns(UserWarning, match=text):
        make_reader(_url("indexed"), shard_seed=123).stop()
    with pytest.warns(UserWarning, match=text):
        make_batch_reader(str(plain), shard_seed=123).stop()


def test_no_matching_row_groups_warns_as_petastorm():
    text = "No matching data is available for loading after rowgroup selector were applied and the data was sharded."
    with pytest.warns(UserWarning, match=text):
        reader = make_reader(_url("partitioned"), reader_pool_type="dummy",
                             predicate=in_set({"non existing value"}, "split"))
    assert list(reader) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a per-row predicate that keeps nothing: no warning, as Petastorm
        with make_reader(_url("indexed"), predicate=in_lambda(["id"], lambda i: False)) as reader:
            assert list(reader) == []


def test_pyarrow_serialize_warns_on_the_process_pool():
    with pytest.warns(UserWarning, match="pyarrow_serializer was deprecated and will be removed in future versions. "
                                         "The argument no longer has any effect."):
        make_reader(_url("indexed"), reader_pool_type="process", pyarrow_serialize=True).stop()


def test_batch_reader_on_a_petastorm_dataset_warns_as_petastorm():
    with pytest.warns(UserWarning, match=r"Please use make_reader \(instead of 'make_batch_dataset' function"):
        make_batch_reader(_url("partitioned")).stop()


# -- make_reader's local-disk cache ---------------------------------------------------------------

def _disk(location, limit=1 << 30):
    return dict(cache_type="local-disk", cache_location=str(location), cache_size_limit=limit,
                cache_row_size_estimate=1)


def test_local_disk_cache_serves_later_epochs_without_the_files(tmp_path):
    import shutil

    dataset = tmp_path / "indexed"
    shutil.copytree(_url("indexed"), dataset)
    with make_reader(str(dataset), reader_pool_type="dummy", num_epochs=2, shuffle_row_groups=False,
                     **_disk(tmp_path / "cache")) as reader:
        first = [next(reader) for _ in range(16)]
        for part in dataset.glob("*.parquet"):
            part.unlink()  # the second epoch can only come from the cache now
        second = list(reader)
        # Each row group's decoded columns in the reader's own directory of the shard cache.
        assert len(list((tmp_path / "cache").glob("petastream-rows-*/v1/data/pqd-*"))) == 4
    assert [int(r.id) for r in second] == [int(r.id) for r in first] == list(range(16))
    assert all(np.array_equal(a.vec, b.vec) and a.note == b.note for a, b in zip(first, second))
    assert not (tmp_path / "cache").exists()  # its files and the emptied directory removed at exit


@pytest.mark.parametrize("limit", [1 << 30, 60])  # 60 bytes: nothing fits, every read decodes
def test_local_disk_cache_gives_the_rows_of_an_uncached_read(tmp_path, limit):
    from tests.compat.petastorm_values import same

    options = dict(seed=7, shuffle_rows=True, num_epochs=2, workers_count=2)
    with make_reader(_url("all_codecs"), **options) as reader:
        plain_rows = list(reader)
    with make_reader(_url("all_codecs"), **options, **_disk(tmp_path / "c", limit)) as reader:
        cached_rows = list(reader)
        written = list((tmp_path / "c").glob("petastream-rows-*/v1/data/pqd-*"))
        assert bool(written) == (limit > 60)
    assert [int(r.id) for r in cached_rows] == [int(r.id) for r in plain_rows]
    assert all(same(getattr(a, k), getattr(b, k)) for a, b in zip(cached_rows, plain_rows) for k in a._fields)


def test_local_disk_cache_of_two_readers_is_their_own(tmp_path):
    # One location, two readers of different columns and transforms: neither serves the other's rows.
    from petastream.compat import TransformSpec

    def double(row):
        return dict(row, id=row["id"] * 2)

    with make_reader(_url("indexed"), **_disk(tmp_path)) as a, \
            make_reader(_url("indexed"), schema_fields=["id"], transform_spec=TransformSpec(double),
                        **_disk(tmp_path)) as b:
        ids_a = sorted(int(r.id) for r in a)
        ids_b = sorted(int(r.id) for r in b)
    assert ids_a == list(range(16)) and ids_b == [2 * i for i in range(16)]


def test_plain_hive_directories_as_petastorm_reads_them(tmp_path):
    # Recorded from Petastorm 0.13.1: partition keys first, digits as int64, names as str_.
    for k in ("1", "2"):
        (tmp_path / f"k={k}" / "s=x").mkdir(parents=True)
        pq.write_table(pa.table({"id": np.arange(2)}), tmp_path / f"k={k}" / "s=x" / "p.parquet")
    with pytest.warns(UserWarning, match="supports reading only Petastorm datasets"):
        reader = make_reader(str(tmp_path), reader_pool_type="dummy", shuffle_row_groups=False,
                             filters=[("k", "=", 2)])
    with reader:
        rows = list(reader)
    assert [tuple(r) for r in rows] == [(2, "x", 0), (2, "x", 1)]
    assert rows[0]._fields == ("k", "s", "id")
    assert [type(v) for v in rows[0]] == [np.int64, np.str_, np.int64]
