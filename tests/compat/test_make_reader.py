"""``make_reader`` over datasets the real Petastorm 0.13.1 wrote (tests/fixtures/petastorm):
rows, types, shards, epochs, predicates, selectors, transforms and errors as Petastorm gives
them (recorded by running Petastorm's make_reader over the same fixtures)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from petastream.compat import TransformSpec, make_reader
from petastream.compat import predicates as P
from petastream.compat import selectors as S
from petastream.compat.errors import NoDataAvailableError
from petastream.errors import InvalidArgumentError
from tests.compat.petastorm_values import decode, same

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "petastorm")


def _url(name: str) -> str:
    return os.path.join(FIXTURES, name)


def _expected(name: str) -> dict:
    with open(os.path.join(FIXTURES, f"{name}.expected.json")) as f:
        return json.load(f)


def _ids(**kwargs) -> list[int]:
    with make_reader(_url(kwargs.pop("name", "indexed")), **kwargs) as reader:
        return sorted(int(r.id) for r in reader)


@pytest.mark.parametrize("name", ["all_codecs", "indexed", "partitioned"])
@pytest.mark.parametrize("pool", ["thread", "dummy"])
def test_every_row_and_value_as_petastorm_yields_it(name, pool):
    expected = _expected(name)
    with make_reader(_url(name), reader_pool_type=pool, workers_count=3) as reader:
        rows = sorted(reader, key=lambda r: int(r.id))
    assert len(rows) == len(expected["rows"])
    assert list(rows[0]._fields) == [f["name"] for f in expected["fields"]]
    differences = [(int(r.id), k) for r, e in zip(rows, expected["rows"]) for k, v in e.items()
                   if not same(getattr(r, k), decode(v))]
    assert differences == []


def test_sequential_order_and_types():
    with make_reader(_url("indexed"), shuffle_row_groups=False) as reader:
        rows = list(reader)
    assert [int(r.id) for r in rows] == list(range(16))  # Petastorm's order: row groups as listed
    assert type(rows[0]).__name__ == "Indexed_view"
    assert {k: type(getattr(rows[0], k)).__name__ for k in rows[0]._fields} == {
        "id": "int32", "label": "str_", "note": "NoneType", "tags": "ndarray", "vec": "ndarray"}


def test_shards_are_row_groups_by_position():
    # Petastorm: row group i belongs to shard i % shard_count (4 row groups of 4 rows).
    assert _ids(cur_shard=0, shard_count=3) == [0, 1, 2, 3, 12, 13, 14, 15]
    assert _ids(cur_shard=1, shard_count=3) == [4, 5, 6, 7]
    assert _ids(cur_shard=2, shard_count=3) == [8, 9, 10, 11]
    assert _ids(cur_shard=0, shard_count=2, seed=5) == [0, 1, 2, 3, 8, 9, 10, 11]


def test_more_shards_than_row_groups_is_petastorms_error():
    with pytest.raises(NoDataAvailableError, match="Number of row-groups in the dataset must be greater or equal"):
        make_reader(_url("indexed"), cur_shard=0, shard_count=5)
    with pytest.raises(ValueError, match="partition and num_partitions must be ints"):
        make_reader(_url("indexed"), cur_shard=0)


def test_epochs_and_seeded_order():
    assert _ids(num_epochs=2) == sorted(list(range(16)) * 2)
    with make_reader(_url("indexed"), seed=3, shuffle_rows=True) as a, \
            make_reader(_url("indexed"), seed=3, shuffle_rows=True) as b:
        first, second = [int(r.id) for r in a], [int(r.id) for r in b]
    assert first == second and sorted(first) == list(range(16)) and first != list(range(16))


def test_endless_epochs_and_reset():
    with make_reader(_url("indexed"), num_epochs=None) as reader:
        ids = [int(next(reader).id) for _ in range(40)]
    assert sorted(set(ids)) == list(range(16))
    reader = make_reader(_url("indexed"))
    with pytest.raises(NotImplementedError, match="resetting a reader while in the middle"):
        reader.reset()
    assert len(list(reader)) == 16
    reader.reset()
    assert len(list(reader)) == 16
    reader.stop()
    with pytest.raises(RuntimeError, match="has stopped"):
        next(reader)
    reader.join()


def test_schema_fields_by_regex_and_field():
    with make_reader(_url("indexed"), schema_fields=["i.*", "vec"]) as reader:
        assert list(next(reader)._fields) == ["id", "vec"]
    with make_reader(_url("indexed"), schema_fields=[reader.schema.fields["id"]]) as reader:
        assert list(next(reader)._fields) == ["id"]
    with pytest.raises(RuntimeError, match=r"No fields matching the criteria '\['nope'\]' were found"):
        make_reader(_url("indexed"), schema_fields=["nope"])


def test_predicates_per_row_and_on_partitions():
    assert _ids(predicate=P.in_set({"cat", "dog"}, "label")) == [0, 1, 2, 3, 4, 5, 6, 7, 13]
    assert _ids(schema_fields=["id", "label"], predicate=P.in_lambda(["id"], lambda i: i % 3 == 0)) == [
        0, 3, 6, 9, 12, 15]
    assert len(list(make_reader(_url("partitioned"), predicate=P.in_set({"test"}, "split")))) == 2
    with pytest.raises(ValueError, match=r"predicate \(label\) are not valid schema names: \(id\)"):
        list(make_reader(_url("indexed"), schema_fields=["id"], predicate=P.in_set({"cat"}, "label")))


def test_rowgroup_selector_on_petastorms_index():
    expected = _expected("indexed")["selectors"]
    assert _ids(rowgroup_selector=S.SingleIndexSelector("label_idx", ["dog"])) == expected["label_dog"]
    union = S.UnionIndexSelector([S.SingleIndexSelector("label_idx", ["bird"]),
                                  S.SingleIndexSelector("tags_idx", ["fish"])])
    assert _ids(rowgroup_selector=union) == expected["union"]
    with pytest.raises(ValueError, match="Some of required indexes"):
        make_reader(_url("indexed"), rowgroup_selector=S.SingleIndexSelector("nope", [1]))


def test_transform_spec_on_each_row():
    def times_ten(row):
        row = dict(row)
        row["id"] = row["id"] * 10
        return row

    spec = TransformSpec(times_ten, removed_fields=["vec"])
    with make_reader(_url("indexed"), transform_spec=spec, shuffle_row_groups=False) as reader:
        rows = list(reader)
    assert list(rows[0]._fields) == ["id", "label", "note", "tags"]
    assert type(rows[0]).__name__ == "Indexed_transformed_view"
    assert [int(r.id) for r in rows] == [10 * i for i in range(16)]


def test_row_drop_partitions_read_every_row_once():
    assert _ids(shuffle_row_drop_partitions=2) == list(range(16))


@pytest.mark.parametrize("kwargs, argument", [
    # Petastorm 0.13.1 ignored a filter on a column that is not a partition key (every row came back).
    (dict(filters=[("id", "<", 3)]), "filters"),
    (dict(cache_type="local-disk", cache_extra_settings={"cleanup": False}), "cache_extra_settings"),
])
def test_refused_arguments_name_themselves(kwargs, argument):
    with pytest.raises(InvalidArgumentError, match=f"make_reader\\({argument}="):
        make_reader(_url("indexed"), **kwargs)


def test_ngram_is_refused_clearly():
    class NGram:  # what petastorm.ngram.NGram is called: refused by name, before any read
        pass

    with pytest.raises(InvalidArgumentError, match="NGram"):
        make_reader(_url("indexed"), schema_fields=NGram())


def test_common_metadata_without_row_groups_points_to_make_batch_reader(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    # A _common_metadata that Petastorm's materialize_dataset did not write (no row-group counts).
    pq.write_table(pa.table({"id": np.arange(3)}), tmp_path / "a.parquet")
    pq.write_metadata(pa.schema([("id", pa.int64())]), tmp_path / "_common_metadata")
    with pytest.warns(UserWarning, match="supports reading only Petastorm datasets"), \
            pytest.raises(RuntimeError, match="you may use make_batch_reader"):
        make_reader(str(tmp_path))


def test_torch_dataloader_over_rows_with_decimal_friendly_collate():
    torch = pytest.importorskip("torch")
    from decimal import Decimal

    from petastream.compat.pytorch import BatchedDataLoader, DataLoader

    with DataLoader(make_reader(_url("indexed"), schema_fields=["id", "label", "vec"], shuffle_row_groups=False),
                    batch_size=5) as loader:
        batches = list(loader)
    assert [len(b["id"]) for b in batches] == [5, 5, 5, 1]
    assert batches[0]["id"].dtype == torch.int32 and batches[0]["vec"].shape == (5, 4)
    assert isinstance(batches[0]["label"][0], str)
    with DataLoader(make_reader(_url("all_codecs"), schema_fields=["id", "price"]), batch_size=4,
                    shuffling_queue_capacity=3) as loader:
        rows = [(int(i), p) for b in loader for i, p in zip(b["id"], b["price"])]
    assert sorted(i for i, _ in rows) == list(range(10)) and all(isinstance(p, Decimal) for _, p in rows)
    with BatchedDataLoader(make_reader(_url("indexed"), schema_fields=["id", "vec"]), batch_size=8) as loader:
        batches = list(loader)
    assert sorted(int(i) for b in batches for i in b["id"]) == list(range(16)) and batches[0]["vec"].shape == (8, 4)


def test_a_dataset_on_s3(s3_bucket, s3_endpoint):
    import s3fs

    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_endpoint})
    fs.put(_url("partitioned"), f"{s3_bucket}/partitioned", recursive=True)
    options = {"client_kwargs": {"endpoint_url": s3_endpoint}}
    with make_reader(f"{s3_bucket}/partitioned", storage_options=options, cur_shard=0, shard_count=2) as reader:
        shard0 = sorted(int(r.id) for r in reader)
    with make_reader(f"{s3_bucket}/partitioned", storage_options=options, cur_shard=1, shard_count=2) as reader:
        shard1 = sorted(int(r.id) for r in reader)
    local = sorted(int(r.id) for r in make_reader(_url("partitioned")))
    assert sorted(shard0 + shard1) == local and shard0 and shard1


def test_in_memory_loader_over_rows():
    pytest.importorskip("torch")
    from petastream.compat.pytorch import InMemBatchedDataLoader

    loader = InMemBatchedDataLoader(make_reader(_url("indexed"), schema_fields=["id", "label", "vec"]), batch_size=6,
                                    num_epochs=2, rows_capacity=16, shuffle=True, seed=1)
    batches = list(loader)
    assert [len(b["id"]) for b in batches] == [6, 6, 4] * 2
    assert sorted(int(i) for b in batches[:3] for i in b["id"]) == list(range(16))
    assert batches[0]["vec"].shape == (6, 4) and isinstance(batches[0]["label"][0], str)
